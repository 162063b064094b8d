"""Long iteration chains: a recursion that needs a million rounds of one fact each.

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_chain [--sizes 100000 1000000] [--runs 3]`.

Rows (issue 13, ADR 0029): seconds to define `c(x + 1) :- c(x), x < N.` over the
fact `c(0)` and read its N + 1 rows (median of `--runs` runs), the cost per
round, and Python calls per further round (cProfile's count for N = 10,000 less
that for N = 5,000, per round: a figure the load of a shared machine does not
move). Times are reported, never
asserted.

Later epochs of a live chain (issue 11, ADR 0034): a subscribed
`c(x + 1, y) :- c(x, y), x < M.` seeded with `(0, 0)` in epoch 1, then the cost
per round of inserting a second chain `(0, 1)` in epoch 2 and of retracting the
first seed in epoch 3, and of retracting the seed of a subscribed 20,000-round
chain whose second column varies (`c(x + 1, (x * 7) band 3) :- c(x, _)`); with
the Python calls per round of each (cProfile, a second run).
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
SECOND = ".decl c(x: number, y: number)\nc(x + 1, y) :- c(x, y), x < {n}."
VARYING = ".decl c(x: number, y: number)\nc(x + 1, (x * 7) band 3) :- c(x, _), x < {n}."


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


def later_epochs(program: str, n: int, second: bool, profile: bool) -> list[tuple[float, int]]:
    """Seconds and Python calls (0 unless `profile`) of each later epoch of a
    subscribed chain of `n` rounds seeded with `(0, 0)`: inserting `(0, 1)` (when
    `second`), then retracting `(0, 0)`."""
    db = Database()
    db.define(program.format(n=n))
    db.subscribe("c(x, y)", lambda change: None)
    db.insert("c", [(0, 0)])
    epochs = [lambda: db.insert("c", [(0, 1)])] if second else []
    epochs.append(lambda: db.retract("c", [(0, 0)]))
    out = []
    for epoch in epochs:
        profiler = cProfile.Profile() if profile else None
        start = time.perf_counter()
        if profiler is None:
            epoch()
        else:
            profiler.runcall(epoch)
        took = time.perf_counter() - start
        made = 0 if profiler is None else pstats.Stats(profiler).total_calls  # type: ignore[attr-defined]
        out.append((took, made))
    return out


def later_rows(n: int, long: int, runs: int) -> list[list[object]]:
    """Per round of the later epochs: median time of `runs` runs, calls of one more."""
    cases = [
        (SECOND, n, True, ["epoch 2: insert a second chain", "epoch 3: retract the first"]),
        (VARYING, long, False, ["retract a varying chain"]),
    ]
    out: list[list[object]] = []
    for program, size, second, names in cases:
        timed = [later_epochs(program, size, second, False) for _ in range(runs)]
        counted = later_epochs(program, size, second, True)
        for i, name in enumerate(names):
            took = statistics.median(t[i][0] for t in timed)
            out.append(
                [
                    f"{name}, M = {size:,}",
                    f"{took / size * 1e6:.1f} us/round",
                    f"{counted[i][1] / size:.1f} calls/round",
                ]
            )
    return out


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
    parser.add_argument("--later", type=int, nargs=2, default=[2_000, 20_000], metavar="M")
    parser.add_argument("--later-only", action="store_true", help="only the later epochs")
    args = parser.parse_args(argv)
    if not args.later_only:
        print(format_table(rows(args.sizes, args.runs), ["case", "time", "per round"]))
    later = later_rows(args.later[0], args.later[1], args.runs)
    print(format_table(later, ["later epoch of a live chain", "per round", "calls"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
