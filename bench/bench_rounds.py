"""General rounds: Soufflé's `independent_body3`, a chain whose rounds go through joins.

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_rounds [--sizes 10000 100000 1000000] [--runs 1]`.

Rows (issue 25, ADR 0046): seconds to define

    a(x) :- b(x), c(y), d(y).
    b(x + 1) :- a(x), x < N.

over `b(0). c(1). c(2). d(2). d(3).` and read `a`'s N + 1 rows (median of `--runs`),
the cost per derived value (two rounds: one of `b`, one of `a`), and Python calls
per further value (cProfile's count at 2 * 5,000 less that at 5,000, per value: a
figure the load of a shared machine does not move). `--scheduler` runs the sizes
up to 10,000 with fused rounds off too (the path the fused rounds shortcut).
Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Sequence
from contextlib import nullcontext
from unittest import mock

from bench.common import format_table
from datalog import Database
from differential.operators import iterate

PROGRAM = """
.decl a(x: number)
.decl b(x: number)
.decl c(y: number)
.decl d(y: number)
a(x) :- b(x), c(y), d(y).
b(x + 1) :- a(x), x < {n}.
b(0). c(1). c(2). d(2). d(3).
"""
PROFILED = 5_000


def body3(n: int) -> float:
    """Seconds to derive and read `a(0..n)`."""
    db = Database()
    start = time.perf_counter()
    db.define(PROGRAM.format(n=n))
    assert len(db.query_columns("a(x)")["x"]) == n + 1
    return time.perf_counter() - start


def calls(n: int) -> int:
    profile = cProfile.Profile()
    profile.runcall(body3, n)
    return pstats.Stats(profile).total_calls  # type: ignore[attr-defined]


def calls_per_value(n: int = PROFILED) -> float:
    body3(10)  # parse the grammar and import everything first
    return (calls(2 * n) - calls(n)) / n


def rows(sizes: Sequence[int], runs: int, scheduler: bool) -> list[list[object]]:
    table: list[list[object]] = []
    for fused in (True, False) if scheduler else (True,):
        off = mock.patch.object(iterate, "fused_rounds", lambda scope: None)
        with nullcontext() if fused else off:
            for n in sizes if fused else [s for s in sizes if s <= 10_000]:
                seconds = statistics.median(body3(n) for _ in range(runs))
                path = "fused" if fused else "scheduler"
                table.append([path, n, round(seconds, 2), round(seconds / n * 1e6, 1)])
                print(*table[-1], flush=True)
    return table


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--scheduler", action="store_true", help="also with fusion off")
    args = parser.parse_args(argv)
    table = rows(args.sizes, args.runs, args.scheduler)
    print(format_table(table, ["path", "N", "seconds", "us per value"]))
    print(f"Python calls per further value (fused): {calls_per_value():.0f}")


if __name__ == "__main__":
    main()
