"""What introspection costs a commit: single-edge commits with and without a
subscriber of the `deltalog.*` relations.

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_introspection [--quick] [--commits N] [--runs 3]`.

One database: a random graph (`--nodes`, `--edges`), `reach(x, y)` from a few
sources and `edge(x, y), !edge(y, x)` subscribed. Single edges are inserted and
retracted in turn under three monitors, taking turns every 20 commits so that
drift in the machine and the data hits all three alike:
- none: no live query reads `deltalog.*` (a commit asks for nothing);
- issue example: `deltalog.arrangement(n, t, _, _), t > 1000000`;
- all three: `deltalog.relation`, `deltalog.arrangement` and `deltalog.dataflow`
  subscribed whole.
Also one-shot queries of each relation with nothing subscribed to them (each one
measures the database first).
Prints p50 and p90 of the commits' wall time (ms) per monitor; never asserts.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from bench.common import format_table
from datalog import Database, Subscription

PROGRAM = """
.decl edge(x: number, y: number)
.decl source(x: number)
.decl reach(x: number, y: number)
reach(x, y) :- source(x), edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""
BLOCK = 20  # commits under one monitor before the next takes over
MONITORS: dict[str, tuple[str, ...]] = {
    "none": (),
    "issue example": ("deltalog.arrangement(n, t, _, _), t > 1000000",),
    "all three": (
        "deltalog.relation(n, t)",
        "deltalog.arrangement(n, t, b, r)",
        "deltalog.dataflow(q, o, s)",
    ),
}


def _database(nodes: int, edges: int, seed: int) -> tuple[Database, list[tuple[int, int]]]:
    rng = random.Random(seed)
    db = Database()
    db.define(PROGRAM)
    graph = {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)}
    db.insert("edge", sorted(graph))
    db.insert("source", [(0,), (1,), (2,)])
    db.subscribe("reach(x, y)", lambda change: None)
    db.subscribe("edge(x, y), !edge(y, x)", lambda change: None)
    fresh = [(rng.randrange(nodes), nodes + i) for i in range(4096)]  # not in the graph
    return db, fresh


def _commits(db: Database, fresh: list[tuple[int, int]], count: int) -> list[float]:
    """Seconds of `count` single-edge commits: each new edge inserted, then retracted."""
    costs = []
    for i in range(count):
        edge = fresh[(i // 2) % len(fresh)]
        commit: Callable[[str, object], int] = db.retract if i % 2 else db.insert
        start = time.perf_counter()
        commit("edge", [edge])
        costs.append(time.perf_counter() - start)
    return costs


def _watched(db: Database, texts: tuple[str, ...]) -> list[Subscription]:
    return [db.subscribe(text, lambda change: None) for text in texts]


def measure(nodes: int, edges: int, commits: int, runs: int) -> list[list[object]]:
    db, fresh = _database(nodes, edges, seed=7)
    _commits(db, fresh, 50)  # warm up
    costs: dict[str, list[float]] = {name: [] for name in MONITORS}
    for _ in range(runs * commits // BLOCK):
        for name, texts in MONITORS.items():
            subs = _watched(db, texts)
            costs[name] += _commits(db, fresh, BLOCK)
            for sub in subs:
                sub.close()
    rows = [_row(f"commit, monitor: {name}", c) for name, c in costs.items()]
    for text in MONITORS["all three"]:
        rows.append(_row(f"one-shot {text}", _one_shots(db, fresh, text, runs * 10)))
    return rows


def _one_shots(db: Database, fresh: list[tuple[int, int]], text: str, count: int) -> list[float]:
    """Seconds of `count` queries of `text`, each after a commit (so each refreshes)."""
    costs = []
    for i in range(count):
        db.insert("edge", [fresh[-1 - i]])
        start = time.perf_counter()
        rows = db.query(text)
        costs.append(time.perf_counter() - start)
        assert rows
    return costs


def _row(label: str, seconds: list[float]) -> list[object]:
    ordered = sorted(seconds)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return [label, statistics.median(ordered) * 1e3, p90 * 1e3, len(ordered)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--edges", type=int, default=6_000)
    parser.add_argument("--commits", type=int, default=400)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a small graph, few commits")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.edges, args.commits, args.runs = 200, 500, 40, 1
    rows = measure(args.nodes, args.edges, args.commits, args.runs)
    print(f"graph: {args.nodes:,} nodes, {args.edges:,} edges; reach from 3 sources subscribed")
    print(format_table(rows, ["what", "p50 ms", "p90 ms", "n"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
