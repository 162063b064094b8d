"""Deltalog (through the Datalog API) next to DuckDB on recursive workloads.

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_datalog [--scale 1.0] [--updates 200]`.

Workloads (issue "Datalog language, planner, Python API, CLI and CI"):
- single-source reachability on a power-law directed graph of 1M edges;
- full transitive closure of a sparse random DAG whose closure has ~1M pairs;
- p50/p99 latency of single-edge insertions and deletions after loading a
  100k-edge graph, with `reach(source, y)` subscribed.
Answers are cross-checked with DuckDB (a mismatch raises). Deltalog's time is
`query_columns` (numpy columns, as DuckDB's is a count), not Python tuples.
Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from bench.common import peak_rss_mb, percentiles, print_table, timed
from bench.generators import dag_for_closure, power_law_graph
from bench.peers.duckdb_peer import EdgeDB
from datalog import Change, Database

T = TypeVar("T")

REACH = """
.decl edge(x: number, y: number)
.decl reach(y: number)
.decl root(x: number)
reach(y) :- root(y).
reach(y) :- reach(x), edge(x, y).
"""

CLOSURE = """
.decl edge(x: number, y: number)
.decl tc(x: number, y: number)
tc(x, y) :- edge(x, y).
tc(x, z) :- tc(x, y), edge(y, z).
"""


def _load(program: str, src: np.ndarray, dst: np.ndarray) -> Database:
    db = Database()
    db.define(program)
    with db.transaction() as tx:
        tx.insert("edge", [src, dst])
    return db


REPEATS = 3  # each side runs this many times, interleaved; the medians are reported


def _median_seconds(job: Callable[[], T]) -> tuple[T, float]:
    runs = [timed(job) for _ in range(REPEATS)]
    return runs[-1][0], float(np.median([seconds for _, seconds in runs]))


def _duckdb(src: np.ndarray, dst: np.ndarray, query: str, *args: int) -> list[tuple[Any, float]]:
    """(answer, median query seconds) on all threads, then on one thread."""
    out = []
    for threads in (None, 1):
        with EdgeDB(src, dst, threads=threads) as duck:
            runs = [getattr(duck, query)(*args) for _ in range(REPEATS)]
        out.append((runs[-1][0], float(np.median([seconds for _, seconds in runs]))))
    return out


def reachability(src: np.ndarray, dst: np.ndarray) -> list[object]:
    source = int(np.argmax(np.bincount(src)))
    db, load = timed(lambda: _load(REACH, src, dst))
    with db.transaction() as tx:
        tx.insert("root", [(source,)])
    rows, seconds = _median_seconds(lambda: db.query_columns("reach(y)")["y"])
    (expected, duck_all), (_, duck_one) = _duckdb(src, dst, "reachability", source)
    if len(rows) != len(expected):
        raise AssertionError(f"reach: deltalog {len(rows)} rows, duckdb {len(expected)}")
    return ["reach power-law", src.size, len(rows), load, seconds, duck_all, duck_one]


def closure(src: np.ndarray, dst: np.ndarray) -> list[object]:
    db, load = timed(lambda: _load(CLOSURE, src, dst))
    rows, seconds = _median_seconds(lambda: db.query_columns("tc(x, y)")["x"])
    (expected, duck_all), (_, duck_one) = _duckdb(src, dst, "transitive_closure")
    if len(rows) != expected:
        raise AssertionError(f"tc: deltalog {len(rows)} pairs, duckdb {expected}")
    return ["tc random DAG", src.size, len(rows), load, seconds, duck_all, duck_one]


def latencies(src: np.ndarray, dst: np.ndarray, updates: int, seed: int) -> list[list[object]]:
    """Single-edge insert/delete latency with a live `reach` subscription."""
    db = _load(REACH, src, dst)
    source = int(np.argmax(np.bincount(src)))
    with db.transaction() as tx:
        tx.insert("root", [(source,)])
    changes: list[Change] = []
    db.subscribe("reach(y)", changes.append)
    rng = np.random.default_rng(seed)
    n = int(max(src.max(), dst.max())) + 1
    inserted: list[tuple[int, int]] = []
    ins, dels = [], []
    for _ in range(updates):
        edge = (int(rng.integers(n)), int(rng.integers(n)))
        t0 = time.perf_counter()
        db.insert("edge", [edge])
        ins.append(time.perf_counter() - t0)
        inserted.append(edge)
    picks = rng.choice(src.size, size=updates, replace=False)
    for i in picks:
        t0 = time.perf_counter()
        db.retract("edge", [(int(src[i]), int(dst[i]))])
        dels.append(time.perf_counter() - t0)
    rows = []
    for name, samples in (("insert edge", ins), ("delete edge", dels)):
        p = percentiles(np.array(samples) * 1000)
        rows.append([name, src.size, updates, p["p50"], p["p99"], p["max"]])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Deltalog vs DuckDB on recursion")
    parser.add_argument("--scale", type=float, default=1.0, help="1.0 = 1M edges / 1M pairs")
    parser.add_argument("--updates", type=int, default=200)
    args = parser.parse_args(argv)
    edges = max(1_000, round(1_000_000 * args.scale))
    graph = power_law_graph(edges, seed=0)
    dag = dag_for_closure(max(10_000, round(1_000_000 * args.scale)), seed=0)
    print("## Initial evaluation (seconds)\n")
    rows = [reachability(*graph), closure(*dag)]
    for row in rows:
        ours, duck_all, duck_one = (float(x) for x in row[4:7])  # type: ignore[arg-type]
        row[6:6] = [ours / duck_all]
        row.append(ours / duck_one)
    headers = ["workload", "edges", "answer", "load s", "deltalog s", "duckdb s", "ratio"]
    print_table(rows, [*headers, "duckdb 1-thread s", "ratio 1-thread"])
    print(f"\n(medians of {REPEATS} runs each; deltalog runs on one thread)")
    print("\n## Single-edge updates (milliseconds)\n")
    small = power_law_graph(max(1_000, edges // 10), seed=1)
    lat = latencies(*small, args.updates, seed=2)
    print_table(lat, ["update", "edges", "count", "p50 ms", "p99 ms", "max ms"])
    print(f"\npeak RSS: {peak_rss_mb():,.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
