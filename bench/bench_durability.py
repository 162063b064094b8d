"""Durability figures: reopening time, the cost of a durable bulk insert, disk use.

Layer: bench. Run: `python -m bench.bench_durability [--facts N] [--commits N]`.

- reopen: a database of `--facts` facts followed by `--commits` small
  transactions (one row each), closed and opened again (goal: at most 1 s for
  1M facts and 10,000 transactions);
- bulk: one transaction of `--facts` rows, durable (fsync) and in memory
  (goal: durable at most 1.3x);
- disk: the directory's size next to its newest snapshot's (goal: about 2x at most).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import print_table
from datalog import Database

PROGRAM = ".decl e(x: number, y: number)"


def _rows(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 40, size=(n, 2), dtype=np.int64)


def bulk(n: int, path: Path | None) -> float:
    rows = _rows(n)
    db = Database(path) if path is not None else Database()
    db.define(PROGRAM)
    start = time.perf_counter()
    db.insert("e", rows)
    took = time.perf_counter() - start
    db.close()
    return took


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def reopen(n: int, commits: int, path: Path) -> tuple[float, int, int]:
    with Database(path) as db:
        db.define(PROGRAM)
        db.insert("e", _rows(n))
        db.checkpoint()
    with Database(path, sync=False) as db:  # the small commits' fsyncs are not what we time
        for i in range(commits):
            db.insert("e", [(-i - 1, i)])
    start = time.perf_counter()
    with Database(path) as db:
        took = time.perf_counter() - start
        assert len(db.query_columns("e(x, y)")["x"]) == n + commits
    snapshots = sorted(path.glob("snapshot-*"))
    return took, _size(path), _size(snapshots[-1]) if snapshots else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="deltalog-durability-"))
    try:
        memory, durable = [], []
        for run in range(args.runs):
            memory.append(bulk(args.facts, None))
            durable.append(bulk(args.facts, work / f"bulk{run}"))
        took, size, snapshot = reopen(args.facts, args.commits, work / "reopen")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mem, dur = statistics.median(memory), statistics.median(durable)
    print_table(
        [
            [f"reopen: {args.facts:,} facts + {args.commits:,} commits", f"{took:.2f} s", "<= 1 s"],
            [f"insert {args.facts:,} rows in memory (median)", f"{mem:.2f} s", ""],
            [f"insert {args.facts:,} rows durably (median)", f"{dur:.2f} s", ""],
            ["durable / in memory", f"{dur / mem:.2f}x", "<= 1.3x"],
            ["directory / newest snapshot", f"{size / max(snapshot, 1):.2f}x", "<= ~2x"],
        ],
        ["measure", "figure", "goal"],
    )


if __name__ == "__main__":
    main()
