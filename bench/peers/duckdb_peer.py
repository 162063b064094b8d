"""DuckDB baselines for the graph benchmarks: reachability, closure, triangles.

Layer: bench — may import anything public from deltalog packages and peers.
Edges are loaded from numpy arrays through pyarrow (no Python loops) into one table
`e(src, dst)` with set semantics (duplicates dropped), as Datalog would hold them.
Each query returns its answer and the seconds it took; the load is timed apart
(`EdgeDB.load_seconds`). Recursive queries use `UNION` (set semantics), so they end
on cyclic graphs.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["EdgeDB", "reachability", "transitive_closure", "triangles"]

_REACH = """
WITH RECURSIVE reach(n) AS (
    SELECT CAST($source AS BIGINT)
    UNION
    SELECT e.dst FROM reach JOIN e ON e.src = reach.n
)
SELECT n FROM reach ORDER BY n
"""

_CLOSURE = """
WITH RECURSIVE tc(x, y) AS (
    SELECT src, dst FROM e
    UNION
    SELECT tc.x, e.dst FROM tc JOIN e ON e.src = tc.y
)
SELECT count(*) FROM tc
"""

# The directed pattern e(a,b), e(b,c), e(a,c): every match (a,b,c) counts once.
_TRIANGLES = """
SELECT count(*)
FROM e AS ab
JOIN e AS bc ON bc.src = ab.dst
JOIN e AS ac ON ac.src = ab.src AND ac.dst = bc.dst
"""


class EdgeDB:
    """An in-memory DuckDB database holding the edge set `e(src, dst)`.

    `load_seconds` is the time to load and deduplicate the edges; each query method
    returns `(answer, query_seconds)`.
    """

    def __init__(self, src: np.ndarray, dst: np.ndarray, *, threads: int | None = None) -> None:
        import duckdb  # the bench extra; imported here so `bench.peers` imports cheaply

        edges = _edge_table(src, dst)
        self._con: Any = duckdb.connect(":memory:")
        self._con.execute("SET enable_progress_bar = false")
        if threads is not None:
            self._con.execute(f"SET threads = {int(threads)}")
        start = time.perf_counter()
        self._con.register("edges_in", edges)
        self._con.execute("CREATE TABLE e AS SELECT DISTINCT src, dst FROM edges_in")
        self._con.unregister("edges_in")
        self.load_seconds = time.perf_counter() - start

    def reachability(self, source: int) -> tuple[np.ndarray, float]:
        """Nodes reachable from `source` by paths of length >= 0 (so `source` is included),
        sorted ascending as int64."""
        start = time.perf_counter()
        reached = self._con.execute(_REACH, {"source": int(source)}).fetchnumpy()["n"]
        seconds = time.perf_counter() - start
        return np.asarray(reached, dtype=np.int64), seconds

    def transitive_closure(self) -> tuple[int, float]:
        """The number of pairs (x, y) joined by a path of length >= 1."""
        return self._count(_CLOSURE)

    def triangles(self) -> tuple[int, float]:
        """The number of matches of e(a,b), e(b,c), e(a,c)."""
        return self._count(_TRIANGLES)

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> EdgeDB:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _count(self, sql: str) -> tuple[int, float]:
        start = time.perf_counter()
        (count,) = self._con.execute(sql).fetchone()
        return int(count), time.perf_counter() - start


def reachability(src: np.ndarray, dst: np.ndarray, source: int) -> tuple[np.ndarray, float]:
    """Sorted nodes reachable from `source` (itself included) and the query seconds."""
    with EdgeDB(src, dst) as db:
        return db.reachability(source)


def transitive_closure(src: np.ndarray, dst: np.ndarray) -> tuple[int, float]:
    """The size of the transitive closure and the query seconds."""
    with EdgeDB(src, dst) as db:
        return db.transitive_closure()


def triangles(src: np.ndarray, dst: np.ndarray) -> tuple[int, float]:
    """The number of directed triangles e(a,b), e(b,c), e(a,c) and the query seconds."""
    with EdgeDB(src, dst) as db:
        return db.triangles()


def _edge_table(src: np.ndarray, dst: np.ndarray) -> pa.Table:
    src64 = np.ascontiguousarray(src, dtype=np.int64)
    dst64 = np.ascontiguousarray(dst, dtype=np.int64)
    if src64.ndim != 1 or src64.shape != dst64.shape:
        raise ValueError(f"src and dst must be 1-D of one length, got {src.shape}, {dst.shape}")
    return pa.table({"src": src64, "dst": dst64})
