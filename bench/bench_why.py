"""What explanations cost: `why_not` against the database's size, and `subscribe_why`
at epochs that do not touch the fact's relations (docs/adr/0045).

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_why [--quick]`.

A random graph of E edges over E / 2 nodes (seeded), the transitive closure `reach`,
and an unrelated relation `other`:

- `why_not("reach(0, M)")` for a node M nothing reaches, next to `why` of a tuple
  that holds and the one-shot query `reach(0, y)` it reads (median of 5, ms);
- the commit latency (p50, ms, 200 single-row commits) of inserts into `other`
  without any subscription, and with 1 and 100 `subscribe_why` subscriptions to
  absent `reach` facts; then of single-edge commits into `edge` between new nodes,
  which no lookup of those why-nots finds: each subscription checks the rows of
  `reach(i, _)` that changed, which the dataflow following it collected (`spared`,
  docs/adr/0071; before, it read `reach` again, ADR 0060), instead of explaining
  again. `explained`
  counts the explanations computed after the snapshots, summed over the
  subscriptions.

Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from bench.common import format_table
from datalog import Database, WhySubscription

PROGRAM = """
.decl edge(x: number, y: number)
.decl other(x: number)
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""


def graph(edges: int, seed: int = 7) -> Database:
    rng = np.random.default_rng(seed)
    nodes = max(edges // 2, 2)
    db = Database()
    db.define(PROGRAM)
    pairs = rng.integers(1, nodes, size=(edges, 2))
    pairs[: min(3, edges), 0] = 0  # node 0 reaches something
    db.insert("edge", pairs)
    return db


def median_ms(fn: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def commits_ms(db: Database, relation: str, rows: list[tuple[int, ...]]) -> float:
    times = []
    for row in rows:
        start = time.perf_counter()
        db.insert(relation, [row])
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def why_not_rows(sizes: list[int]) -> list[list[object]]:
    return [why_not_row(edges) for edges in sizes]


def why_not_row(edges: int) -> list[object]:
    db = graph(edges)
    absent = f"reach(0, {edges})"  # no edge reaches node `edges` (nodes are below edges / 2)
    reached = db.query("reach(0, y)")
    present = f"reach(0, {reached[-1][0]})"
    return [
        edges,
        len(reached),
        median_ms(lambda: db.why_not(absent)),
        median_ms(lambda: db.why(present), runs=3),
        median_ms(lambda: db.query("reach(0, y)")),
    ]


def watch_rows(edges: int, commits: int) -> list[list[object]]:
    rows: list[list[object]] = []
    for watchers in (0, 1, 100):
        db = graph(edges)
        subs: list[WhySubscription] = [
            db.subscribe_why(f"reach({i}, {edges + i})", lambda change: None)
            for i in range(watchers)
        ]
        other = commits_ms(db, "other", [(i,) for i in range(commits)])
        untouched = sum(s.explained for s in subs)
        edge: object = "-"
        if watchers <= 1:  # each commit into `edge` explains every subscription again
            edge = commits_ms(db, "edge", [(edges + 10 + i, edges + 11 + i) for i in range(5)])
        explained, spared = sum(s.explained for s in subs), sum(s.spared for s in subs)
        rows.append([watchers, other, untouched, edge, explained, spared])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small graphs only")
    args = parser.parse_args()
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000, 1_000_000]
    print(format_table(why_not_rows(sizes), ["edges", "reach(0, _)", "why_not ms", "why ms",
                                             "query ms"]))  # fmt: skip
    edges = 10_000 if args.quick else 100_000
    print(f"\nsubscribe_why on {edges:,} edges (p50 commit ms)")
    print(format_table(watch_rows(edges, 50 if args.quick else 200),
                       ["subscriptions", "`other` commit", "explained", "`edge` commit",
                        "explained (total)", "spared"]))  # fmt: skip


if __name__ == "__main__":
    main()
