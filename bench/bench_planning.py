"""Planning time: how long the planner takes to turn a checked query into a built
(not started) dataflow, on a long chain of rules and on the programs of
`bench_datalog` and `bench_magic` (docs/adr/0051: the plan as data).

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_planning [--chain 300] [--repeats 5]`.

Each case times `Database.explain` (the passes, the lowering to operators and the
text printed from the plan; the dataflow is built and dropped, never run) and a
one-shot `Database.query` over empty relations (the same plus starting the
dataflow). CPU seconds (`time.process_time`), the median of `--repeats` runs.
Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence

from bench.bench_datalog import CLOSURE, REACH
from bench.bench_magic import NR, SAMEGEN
from bench.common import print_table
from datalog import Database


def chain(n: int) -> str:
    """`r1 :- e`, `r{i} :- r{i-1}, e` for i up to n: a long chain of rules."""
    lines = [".decl e(x: number, y: number)"]
    lines += [f".decl r{i}(x: number, y: number)" for i in range(1, n + 1)]
    lines.append("r1(x, y) :- e(x, y).")
    lines += [f"r{i}(x, z) :- r{i - 1}(x, y), e(y, z)." for i in range(2, n + 1)]
    return "\n".join(lines)


def cases(length: int) -> dict[str, tuple[str, str]]:
    return {
        f"chain {length}": (chain(length), f"r{length}(x, y)"),
        f"chain {length}, magic": (chain(length), f"r{length}(1, y)"),
        "reach (bench_datalog)": (REACH, "reach(y)"),
        "closure (bench_datalog)": (CLOSURE, "tc(x, y)"),
        "samegen (bench_magic)": (SAMEGEN.format(left=1, right=2), "query()"),
        "nr (bench_magic)": (NR, "nr(1, y)"),
    }


def median_ms(job: Callable[[], object], repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.process_time()
        job()
        runs.append(time.process_time() - start)
    return 1000 * statistics.median(runs)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chain", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    rows = []
    for name, (program, query) in cases(args.chain).items():
        db = Database()
        db.define(program)
        explain = median_ms(lambda: db.explain(query), args.repeats)  # noqa: B023
        once = median_ms(lambda: db.query(query), args.repeats)  # noqa: B023
        rows.append([name, f"{explain:.1f}", f"{once:.1f}"])
    print_table(rows, ["case", "explain ms", "one-shot query ms"])


if __name__ == "__main__":
    main()
