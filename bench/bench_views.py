"""What sharing a derived relation saves: live queries over one recursive relation.

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_views [--quick] [--commits N]`.

A random graph (`--nodes`, `--edges`) and `reach` from a few sources; three live
queries read all of `reach` (`reach(x, y)`, `reach(x, y), x < y`, and a count
per source). With views they share one computation of `reach`; without (the
planner forced not to share), each computes it. Reported for both: the time to
subscribe the three, single-edge commits (p50, p90, inserts and retractions in
turn, interleaved between the two databases every 20 commits), and the updates
held in arrangements (`stats()`: shared, private and views'). Never asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time
from typing import Any
from unittest import mock

from bench.common import format_table
from datalog import Database
from datalog.plan.views import Views

PROGRAM = """
.decl edge(x: number, y: number)
.decl source(x: number)
.decl reach(x: number, y: number)
.decl reached(x: number, n: number)
reach(x, y) :- source(x), edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
reached(x, n) :- source(x), n = count : { reach(x, _) }.
"""
QUERIES = ("reach(x, y)", "reach(x, y), x < y", "reached(x, n)")
BLOCK = 20


def _database(share: bool, nodes: int, edges: int) -> tuple[Database, float]:
    rng = random.Random(7)
    db = Database()
    db.define(PROGRAM)
    graph = {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)}
    db.insert("edge", sorted(graph))
    db.insert("source", [(i,) for i in range(5)])
    # Without sharing, the planner finds no view to read: each query computes reach.
    unshared: contextlib.AbstractContextManager[object] = (
        contextlib.nullcontext() if share else mock.patch.object(Views, "read", _no_views)
    )
    start = time.perf_counter()
    with unshared:
        for text in QUERIES:
            db.subscribe(text, lambda change: None)
    return db, time.perf_counter() - start


def _no_views(views: Views, relations: object, options: object) -> dict[str, str]:
    return {}


def _held(db: Database) -> int:
    """Updates held in every arrangement: shared, private and views'."""
    stats: Any = db.stats()
    shared = sum(a["tuples"] for i in stats["inputs"].values() for a in i["arrangements"].values())
    private = sum(t for df in stats["dataflows"] for _, t, _ in df["arrangements"])
    views = sum(t for v in stats["views"].values() for _, t, _ in v["arrangements"])
    return shared + private + views


def measure(nodes: int, edges: int, commits: int) -> list[list[object]]:
    dbs = {share: _database(share, nodes, edges) for share in (True, False)}
    answers = {share: sorted(db.query(QUERIES[0])) for share, (db, _) in dbs.items()}
    assert answers[True] == answers[False]
    rng = random.Random(11)
    fresh = [(rng.randrange(nodes), nodes + i) for i in range(commits)]
    costs: dict[bool, list[float]] = {True: [], False: []}
    for block in range(0, commits, BLOCK):
        for share, (db, _) in dbs.items():
            for i in range(block, min(block + BLOCK, commits)):
                commit = db.retract if i % 2 else db.insert
                start = time.perf_counter()
                commit("edge", [fresh[i // 2 * 2]])
                costs[share].append(time.perf_counter() - start)
    rows: list[list[object]] = []
    for share, (db, subscribe) in dbs.items():
        ordered = sorted(costs[share])
        rows.append([
            "views" if share else "no sharing",
            subscribe * 1e3,
            statistics.median(ordered) * 1e3,
            ordered[int(0.9 * (len(ordered) - 1))] * 1e3,
            _held(db),
            len(db.engine.views),
        ])  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--edges", type=int, default=6_000)
    parser.add_argument("--commits", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="a small graph, few commits")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.edges, args.commits = 200, 500, 40
    rows = measure(args.nodes, args.edges, args.commits)
    print(f"graph: {args.nodes:,} nodes, {args.edges:,} edges; {len(QUERIES)} live queries")
    headers = ["planner", "subscribe ms", "commit p50 ms", "commit p90 ms", "held", "views"]
    print(format_table(rows, headers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
