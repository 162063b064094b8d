"""Parsing and checking hostile and large texts: how long until an answer or a refusal.

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_parse [--runs 3]`.

Rows (issues 23 and 24, ADR 0036): seconds to parse (and check) each text, median of
`--runs` runs, and the first line of the error when it is refused. The 2 MB define
of 1,000,000 nested parentheses held the engine 20 to 106 s before the nesting scan;
a text of deep sums, a long fact list and a syntax error at the end of a long text
show the cost of texts that are legitimate or merely wrong. Times are reported,
never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from bench.common import format_table
from datalog import Database, DatalogError

PROGRAM = ".decl r(x: number)\n.decl q(x: number)\nr(1).\n"


def texts() -> dict[str, str]:
    n = 1_000_000
    sums = "".join(f"q(x) :- r(y), x = {' + '.join(['y'] * 400)}.\n" for _ in range(50))
    return {
        "1,000,000 nested parentheses (2 MB)": PROGRAM + "q(x) :- x = " + "(" * n + ")" * n + ".",
        "1,000,000 open parentheses (1 MB)": PROGRAM + "q(x) :- x = " + "(" * n,
        "50 sums of 400 terms (0.2 MB)": PROGRAM + sums,
        "20,000 facts (0.2 MB)": PROGRAM + "".join(f"r({i}).\n" for i in range(20_000)),
        "an error after 20,000 facts (0.2 MB)": PROGRAM
        + "".join(f"r({i}). // {i}\n" for i in range(20_000))
        + "r(1) r(2).",
        "12 disjunctions in one body": PROGRAM + "q(x) :- r(x)" + ", (x = 1 ; x = 2)" * 12 + ".",
    }


def timed(define: Callable[[], None]) -> tuple[float, str]:
    start = time.perf_counter()
    outcome = "defined"
    try:
        define()
    except DatalogError as error:
        outcome = error.message[:60]
    return time.perf_counter() - start, outcome


def _definer(text: str) -> Callable[[], None]:
    return lambda: Database().define(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for name, text in texts().items():
        runs = [timed(_definer(text)) for _ in range(args.runs)]
        seconds = statistics.median(seconds for seconds, _ in runs)
        rows.append((name, f"{len(text) / 1e6:.2f}", seconds, runs[0][1]))
    print(format_table(rows, ["text", "MB", "seconds", "outcome"]))


if __name__ == "__main__":
    main()
