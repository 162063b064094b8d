"""What a commit costs when many live queries read one view (ADR 0071's charges).

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_view_readers [--readers 50 100 200] [--commits N]`.

`reach` from one source over a small random graph is a view (docs/adr/0026) read
by `--readers` live queries, each its own dataflow (`reach(y), y > k`, one `k`
each). Each commit inserts or retracts one edge, reaching every reader: the
adaptive model weighs each reader and charges it its share of the view's work
(`datalog.db.charges`). Reported per reader count: CPU per commit (p50, mean) and
the part of it spent in the charges (`charges.shares`, by `cProfile` on a separate
run of the same commits). Never asserts.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import statistics
import time

from bench.common import format_table
from datalog import Database

PROGRAM = """
.decl edge(x: number, y: number)
.decl reach(y: number)
reach(y) :- edge(0, y).
reach(z) :- reach(y), edge(y, z).
"""


def _database(readers: int, nodes: int) -> Database:
    rng = random.Random(7)
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", sorted({(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(nodes)}))
    for k in range(readers):
        db.subscribe(f"reach(y), y > {k}", lambda change: None)
    return db


def _commits(db: Database, nodes: int, commits: int) -> list[float]:
    """CPU seconds of each single-edge commit (an insert, then its retraction)."""
    rng = random.Random(11)
    costs = []
    for i in range(commits):
        edge = (rng.randrange(nodes), nodes + i // 2)
        commit = db.retract if i % 2 else db.insert
        start = time.process_time()
        commit("edge", [edge])
        costs.append(time.process_time() - start)
    return costs


def _charges_share(readers: int, nodes: int, commits: int) -> float:
    """The fraction of the commits' profiled time spent under `charges.shares`."""
    db = _database(readers, nodes)
    profile = cProfile.Profile()
    profile.enable()
    _commits(db, nodes, commits)
    profile.disable()
    stats = pstats.Stats(profile)
    total = stats.total_tt  # type: ignore[attr-defined]
    under = [
        cumulative
        for (path, _, name), (_, _, _, cumulative, _) in stats.stats.items()  # type: ignore[attr-defined]
        if path.endswith("charges.py") and name == "shares"
    ]
    return sum(under) / total if total else 0.0


def measure(readers: list[int], nodes: int, commits: int) -> list[list[object]]:
    rows: list[list[object]] = []
    for count in readers:
        db = _database(count, nodes)
        assert len(db.engine.views) == 1, "the readers share one view of reach"
        _commits(db, nodes, 4)  # (first commits build the models)
        costs = _commits(db, nodes, commits)
        share = _charges_share(count, nodes, max(commits // 4, 4))
        rows.append([
            count,
            statistics.median(costs) * 1e3,
            statistics.fmean(costs) * 1e3,
            100 * share,
        ])  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--nodes", type=int, default=60)
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="few readers, few commits")
    args = parser.parse_args(argv)
    if args.quick:
        args.readers, args.commits = [10, 20], 10
    rows = measure(args.readers, args.nodes, args.commits)
    print(f"reach over {args.nodes} nodes, one view, single-edge commits (CPU)")
    headers = ["readers", "commit p50 ms", "commit mean ms", "% in charges.shares"]
    print(format_table(rows, headers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
