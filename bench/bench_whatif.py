"""What a hypothetical costs: `db.what_if` against committing the same rows, by the
database's size and by the change's size (docs/adr/0047, 0052).

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_whatif [--quick]`.

A random graph of E edges over E / 4 nodes (seeded) and the single-source reach
`reach(b) :- reach(a), e(a, b)` from node 0, subscribed (a live query). For each
size: the p50 (ms) of committing one new edge out of node 0 (each commit a new
node), of `what_if` with one such edge (a live query: the epoch run in process and undone,
ADR 0052), their ratio, the fork alone (the floor of ADR 0047's mechanism, still
used for queries that are not live: a child that exits at once) and rebuilding the
live query (what undoing an epoch by dropping its dataflows would cost, measured as
subscribing the query afresh). Then, at one size, changes of 1, 100 and
10,000 edges, committed and asked.

Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable

import numpy as np

from bench.common import format_table
from datalog import Database

PROGRAM = """
.decl e(a: number, b: number)
.decl reach(a: number)
reach(0).
reach(b) :- reach(a), e(a, b).
"""


def graph(edges: int, seed: int = 1) -> tuple[Database, int]:
    rng = np.random.default_rng(seed)
    nodes = max(edges // 4, 2)
    db = Database()
    db.define(PROGRAM)
    db.insert("e", rng.integers(0, nodes, size=(edges, 2)))
    db.subscribe("reach(a)", lambda change: None)
    return db, nodes


def p50_ms(fn: Callable[[int], object], runs: int) -> float:
    times = []
    for i in range(runs):
        start = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def fork_ms(runs: int) -> float:
    def once(_: int) -> None:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    return p50_ms(once, runs)


def new_edges(start: int, count: int) -> list[tuple[int, int]]:
    return [(0, start + j) for j in range(count)]


def size_rows(sizes: list[int], runs: int) -> list[list[object]]:
    rows: list[list[object]] = []
    for edges in sizes:
        rows.append(size_row(edges, runs))
    return rows


def size_row(edges: int, runs: int) -> list[object]:
    db, nodes = graph(edges)
    commit = p50_ms(lambda i: db.insert("e", new_edges(nodes + i, 1)), runs)
    asked = p50_ms(lambda i: db.what_if({"e": new_edges(nodes + runs + i, 1)}), runs)
    start = time.perf_counter()
    db.subscribe("reach(a)", lambda change: None, plan="binary")  # another dataflow
    rebuild = (time.perf_counter() - start) * 1e3
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return [edges, commit, asked, asked / commit, fork_ms(runs), rebuild, rss]


def change_rows(edges: int, counts: list[int], runs: int) -> list[list[object]]:
    db, nodes = graph(edges)
    rows: list[list[object]] = []
    at = nodes
    for count in counts:

        def commit(_: int, count: int = count) -> None:
            nonlocal at
            db.insert("e", new_edges(at, count))
            at += count

        def ask(_: int, count: int = count) -> None:
            db.what_if({"e": new_edges(at, count)})

        committed, asked = p50_ms(commit, runs), p50_ms(ask, runs)
        rows.append([count, committed, asked, asked / committed])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small graphs only")
    args = parser.parse_args()
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    runs = 5 if args.quick else 15
    print("one new edge into a live reach (p50 ms)")
    columns = ["edges", "commit", "what_if", "ratio", "fork alone", "rebuild", "max RSS MB"]
    print(format_table(size_rows(sizes, runs), columns))
    edges = 10_000 if args.quick else 100_000
    print(f"\nchanges of several sizes into a live reach of {edges:,} edges (p50 ms)")
    print(format_table(change_rows(edges, [1, 100, 10_000], runs),
                       ["edges changed", "commit", "what_if", "ratio"]))  # fmt: skip


if __name__ == "__main__":
    main()
