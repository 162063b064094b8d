"""Pathway, an incremental dataflow framework (Rust engine, Python API), on joins.

Layer: bench — may import anything public from deltalog packages and peers.
Each relation becomes a static table (`pw.debug.table_from_pandas`); a workload is a
chain of joins reduced to a count, computed by `pw.debug.table_to_pandas`. Updates
are not measured: Pathway's streaming mode runs on its own clock, and timing one
change from input to output needs a streaming harness this suite does not have yet.
"""

from __future__ import annotations

from typing import Any, ClassVar

from bench.ldbc import Relations
from bench.peers.base import Peer
from bench.workloads import PERSON_ATTRS, Params, Workload

__all__ = ["PathwayPeer"]


class PathwayPeer(Peer):
    name = "pathway"
    module = "pathway"
    distribution = "pathway"
    workloads: ClassVar[frozenset[str]] = frozenset({"triangles", "star7"})

    def load(self, relations: Relations) -> None:
        import pathway as pw

        wanted = ["e"] if "e" in relations else [f"person.{a}" for a in PERSON_ATTRS]
        self._tables = {
            name: pw.debug.table_from_pandas(relations[name].to_pandas().drop_duplicates())
            for name in wanted
        }

    def run(self, workload: Workload, params: Params) -> int:
        import pathway as pw

        joined = self._triangles() if workload.name == "triangles" else self._star()
        counted = joined.reduce(n=pw.reducers.count())
        frame = pw.debug.table_to_pandas(counted)
        return int(frame["n"].iloc[0]) if len(frame) else 0

    def _triangles(self) -> Any:
        e = self._tables["e"]
        bc, ac = e.copy(), e.copy()
        path = e.join(bc, e.c1 == bc.c0).select(a=e.c0, b=e.c1, c=bc.c1)
        return path.join(ac, path.a == ac.c0, path.c == ac.c1).select(path.a)

    def _star(self) -> Any:
        tables = [self._tables[f"person.{a}"] for a in PERSON_ATTRS]
        joined = tables[0].select(p=tables[0].c0)
        for table in tables[1:]:
            joined = joined.join(table, joined.p == table.c0).select(p=joined.p)
        return joined
