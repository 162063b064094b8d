"""Recursive aggregation through subsumption: BFS levels, WCC labels and SSSP.

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_subsumption [--edges 100000] [--updates 40]`
(`--edges 1000000` for the 1M case).

On a seeded power-law graph (`bench.generators.power_law_graph`, weights 1..9,
source: the node of highest out-degree) each query's initial computation is timed
(subscribing builds and runs the dataflow) next to DuckDB's recursive CTE with
`USING KEY` (DuckDB >= 1.3: each round keeps one row per key, the minimum found)
and networkx. Then, with the query subscribed, single edges are retracted and
inserted back, one commit each: p50 and p99 of those commits, in wall time and in
the thread's CPU time (on a shared machine wall minus CPU is time spent waiting for
a core), after `gc.freeze()` as a latency-minded host would (docs/benchmarks.md,
"Single-edge commit spikes"). First evaluations are timed in wall and process CPU
time, DuckDB's too (its threads' CPU added up). Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable, Sequence

import numpy as np

from bench.common import format_table
from bench.generators import power_law_graph
from datalog import Database

PROGRAMS = {
    "bfs": """
        .decl level(x: number, n: number) btree_delete
        level(s, 0) :- source(s).
        level(y, n + 1) :- level(x, n), edge(x, y, _).
        level(x, n1) <= level(x, n2) :- n2 <= n1.""",
    "wcc": """
        .decl node(x: number)
        node(x) :- edge(x, _, _) ; edge(_, x, _).
        .decl label(x: number, l: number) btree_delete
        label(x, x) :- node(x).
        label(y, l) :- label(x, l), edge(x, y, _).
        label(y, l) :- label(x, l), edge(y, x, _).
        label(x, l1) <= label(x, l2) :- l2 <= l1.""",
    "sssp": """
        .decl dist(x: number, d: number) btree_delete
        dist(s, 0) :- source(s).
        dist(y, d + w) :- dist(x, d), edge(x, y, w).
        dist(x, d1) <= dist(x, d2) :- d2 <= d1.""",
}
QUERIES = {"bfs": "level(x, n)", "wcc": "label(x, l)", "sssp": "dist(x, d)"}
BASE = ".decl edge(x: number, y: number, w: number)\n.decl source(x: number)\n"

Graph = tuple[np.ndarray, np.ndarray, np.ndarray, int]


def graph(n_edges: int, seed: int) -> Graph:
    src, dst = power_law_graph(n_edges, seed=seed)
    weights = np.random.default_rng(seed).integers(1, 10, len(src)).astype(np.int64)
    source = int(np.bincount(src).argmax())
    return src, dst, weights, source


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def timed_cpu(fn: Callable[[], object], clock: Callable[[], float]) -> tuple[object, float, float]:
    """`fn()`, its wall seconds and its seconds of `clock` (a CPU clock)."""
    cpu = clock()
    result, wall = timed(fn)
    return result, wall, clock() - cpu


def deltalog(kind: str, g: Graph, updates: int, seed: int) -> tuple[int, float, float, list[float]]:
    """(answer rows, initial wall and CPU seconds, [insert p50, insert p99, delete p50,
    delete p99, insert CPU p99, delete CPU p99] ms)."""
    src, dst, weights, source = g
    db = Database()
    db.define(BASE + PROGRAMS[kind])
    db.insert("edge", (src, dst, weights))
    db.insert("source", [(source,)])
    rows = [0]

    def count(change: object) -> None:
        rows[0] += int(sum(change.diffs))  # type: ignore[attr-defined]

    _, initial, initial_cpu = timed_cpu(
        lambda: db.subscribe(QUERIES[kind], count), time.process_time
    )
    answer = rows[0]
    gc.collect()
    gc.freeze()
    picks = np.random.default_rng(seed + 1).choice(len(src), updates, replace=False)
    deletes, inserts, delete_cpu, insert_cpu = [], [], [], []
    for i in picks.tolist():
        edge = [(int(src[i]), int(dst[i]), int(weights[i]))]
        _, wall, cpu = timed_cpu(lambda e=edge: db.retract("edge", e), time.thread_time)  # type: ignore[misc]
        deletes.append(wall)
        delete_cpu.append(cpu)
        _, wall, cpu = timed_cpu(lambda e=edge: db.insert("edge", e), time.thread_time)  # type: ignore[misc]
        inserts.append(wall)
        insert_cpu.append(cpu)
    gc.unfreeze()
    ms = [1000 * float(np.percentile(s, q)) for s in (inserts, deletes) for q in (50, 99)]
    ms += [1000 * float(np.percentile(s, 99)) for s in (insert_cpu, delete_cpu)]
    return answer, initial, initial_cpu, ms


DUCK = {
    "bfs": """
        WITH RECURSIVE level(x, n) USING KEY (x) AS (
            SELECT {source}::BIGINT, 0::BIGINT
            UNION
            (SELECT e.dst, min(l.n + 1) FROM level l JOIN edge e ON e.src = l.x
             LEFT JOIN recurring.level r ON r.x = e.dst
             GROUP BY e.dst, r.n HAVING min(l.n + 1) < coalesce(r.n, 9223372036854775807)))
        SELECT count(*) FROM level""",
    "wcc": """
        WITH RECURSIVE label(x, l) USING KEY (x) AS (
            SELECT x, x FROM (SELECT src AS x FROM und UNION SELECT dst FROM und)
            UNION
            (SELECT e.dst, min(l.l) FROM label l JOIN und e ON e.src = l.x
             JOIN recurring.label r ON r.x = e.dst
             GROUP BY e.dst, r.l HAVING min(l.l) < r.l))
        SELECT count(*) FROM label""",
    "sssp": """
        WITH RECURSIVE dist(x, d) USING KEY (x) AS (
            SELECT {source}::BIGINT, 0::BIGINT
            UNION
            (SELECT e.dst, min(d.d + e.w) FROM dist d JOIN edge e ON e.src = d.x
             LEFT JOIN recurring.dist r ON r.x = e.dst
             GROUP BY e.dst, r.d HAVING min(d.d + e.w) < coalesce(r.d, 9223372036854775807)))
        SELECT count(*) FROM dist""",
}


def duckdb_time(kind: str, g: Graph) -> tuple[int | str, float | str, float | str]:
    """(rows, wall seconds, process CPU seconds) of DuckDB's recursive CTE."""
    try:
        import duckdb
    except ImportError:
        return "-", "not installed", "-"
    src, dst, weights, source = g
    con = duckdb.connect()
    frame = {"src": src, "dst": dst, "w": weights}  # noqa: F841 - read by DuckDB by name
    con.execute("CREATE TABLE edge AS SELECT * FROM frame")
    con.execute("CREATE TABLE und AS SELECT src, dst FROM edge UNION SELECT dst, src FROM edge")
    query = DUCK[kind].format(source=source)
    try:
        result, seconds, cpu = timed_cpu(lambda: con.execute(query).fetchone(), time.process_time)
    except duckdb.Error as error:  # USING KEY needs DuckDB >= 1.3
        return "-", f"failed: {str(error).splitlines()[0][:40]}", "-"
    assert isinstance(result, tuple)
    return int(result[0]), seconds, cpu


def networkx_time(kind: str, g: Graph) -> tuple[int | str, float | str]:
    try:
        import networkx as nx
    except ImportError:
        return "-", "not installed"
    src, dst, weights, source = g
    graph = nx.DiGraph()
    graph.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), weights.tolist(), strict=True))

    def run() -> int:
        if kind == "bfs":
            return len(nx.single_source_shortest_path_length(graph, source))
        if kind == "sssp":
            return len(nx.single_source_dijkstra_path_length(graph, source))
        return sum(len(c) for c in nx.weakly_connected_components(graph))

    rows, seconds = timed(run)
    assert isinstance(rows, int)
    return rows, seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=40, help="edges deleted and re-inserted")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    g = graph(args.edges, args.seed)
    table = []
    for kind in PROGRAMS:
        rows, initial, initial_cpu, ms = deltalog(kind, g, args.updates, args.seed)
        duck_rows, duck, duck_cpu = duckdb_time(kind, g)
        nx_rows, nx_seconds = networkx_time(kind, g)
        table.append(
            [kind, rows, initial, initial_cpu, duck, duck_cpu, duck_rows, nx_seconds, nx_rows, *ms]
        )
    headers = [
        "query", "rows", "deltalog s", "deltalog cpu s", "duckdb s", "duckdb cpu s",
        "duckdb rows", "networkx s", "nx rows", "insert p50 ms", "insert p99 ms",
        "delete p50 ms", "delete p99 ms", "insert cpu p99 ms", "delete cpu p99 ms",
    ]  # fmt: skip
    print(f"power-law graph: {args.edges:,} edges, {len(np.unique(g[:2])):,} nodes")
    print(format_table(table, headers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
