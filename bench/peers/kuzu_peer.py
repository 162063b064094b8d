"""Kùzu, an embedded graph database with worst-case optimal joins, on the graph workloads.

Layer: bench — may import anything public from deltalog packages and peers.
The edge relation `e` becomes node table `N(id)` and rel table `E(FROM N TO N)`,
bulk-loaded with `COPY` from pyarrow. Cyclic patterns (triangles, 4-cliques) are one
Cypher `MATCH`; reachability is a `SHORTEST` variable-length match, whose depth
Kùzu caps (raised here to `MAX_DEPTH`). Not incremental.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from bench.answers import Answer
from bench.ldbc import Relations
from bench.peers.base import Peer
from bench.workloads import Params, Workload

__all__ = ["KuzuPeer"]

MAX_DEPTH = 10_000
CYPHER = {
    "reach": f"""MATCH (a:N {{id: $source}})-[:E* SHORTEST 1..{MAX_DEPTH}]->(b:N)
        WHERE b.id <> $source RETURN count(DISTINCT b.id) + 1""",
    "triangles": "MATCH (a:N)-[:E]->(b:N)-[:E]->(c:N), (a)-[:E]->(c) RETURN count(*)",
    "clique4": """MATCH (a:N)-[:E]->(b:N), (a)-[:E]->(c:N), (a)-[:E]->(d:N),
        (b)-[:E]->(c), (b)-[:E]->(d), (c)-[:E]->(d) RETURN count(*)""",
}


class KuzuPeer(Peer):
    name = "kuzu"
    module = "kuzu"
    distribution = "kuzu"
    workloads: ClassVar[frozenset[str]] = frozenset(CYPHER)

    def __init__(self) -> None:
        import kuzu

        self._db = kuzu.Database()
        self._con: Any = kuzu.Connection(self._db)
        self._con.execute(f"CALL var_length_extend_max_depth={MAX_DEPTH}")

    def load(self, relations: Relations) -> None:
        edges = relations["e"]
        src = np.asarray(edges.column(0).to_numpy(), dtype=np.int64)
        dst = np.asarray(edges.column(1).to_numpy(), dtype=np.int64)
        nodes = pa.table({"id": np.unique(np.concatenate([src, dst]))})  # noqa: F841
        keys = np.unique(np.stack([src, dst], axis=1), axis=0)
        links = pa.table({"from": keys[:, 0], "to": keys[:, 1]})  # noqa: F841
        self._con.execute("CREATE NODE TABLE N(id INT64, PRIMARY KEY(id))")
        self._con.execute("CREATE REL TABLE E(FROM N TO N)")
        self._con.execute("COPY N FROM nodes")  # Kùzu scans the local pyarrow tables
        self._con.execute("COPY E FROM links")

    def run(self, workload: Workload, params: Params) -> Answer:
        result = self._con.execute(CYPHER[workload.name], dict(params))
        return Answer(int(result.get_next()[0]))
