"""Long iteration chains: a recursion that needs a million rounds of one fact each.

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_chain [--sizes 100000 1000000] [--runs 3]`.

Rows (issue 13, ADR 0029): seconds to define `c(x + 1) :- c(x), x < N.` over the
fact `c(0)` and read its N + 1 rows (median of `--runs` runs), the cost per
round, and Python calls per further round (cProfile's count for N = 10,000 less
that for N = 5,000, per round: a figure the load of a shared machine does not
move). Times are reported, never
asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Sequence

from bench.common import format_table
from datalog import Database

PROGRAM = ".decl c(x: number)\nc(0).\nc(x + 1) :- c(x), x < {n}."
PROFILED = 5_000


def chain(n: int) -> float:
    """Seconds to derive and read `c(0..n)`, one fact per iteration round."""
    db = Database()
    start = time.perf_counter()
    db.define(PROGRAM.format(n=n))
    assert len(db.query_columns("c(x)")["x"]) == n + 1
    return time.perf_counter() - start


def calls(n: int) -> int:
    """Python calls (cProfile's count) to derive and read the chain of `n` rounds."""
    profile = cProfile.Profile()
    profile.runcall(chain, n)
    return pstats.Stats(profile).total_calls  # type: ignore[attr-defined]


def calls_per_round(n: int = PROFILED) -> float:
    """Python calls each further round costs: the calls of `2n` rounds less those of
    `n`, per round (the set-up's calls cancel)."""
    chain(10)  # parse the grammar and import everything first
    return (calls(2 * n) - calls(n)) / n


def rows(sizes: Sequence[int], runs: int) -> list[list[object]]:
    out: list[list[object]] = []
    for n in sizes:
        took = statistics.median(chain(n) for _ in range(runs))
        out.append([f"chain N = {n:,}", f"{took:.2f} s", f"{took / n * 1e6:.1f} us/round"])
    out.append(["calls per round", f"{calls_per_round():.1f}", ""])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    print(format_table(rows(args.sizes, args.runs), ["case", "time", "per round"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
