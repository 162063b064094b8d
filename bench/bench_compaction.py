"""Whether live queries stay bounded: stored updates and commit time under toggles.

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_compaction [--toggles N] [--every K] [--case NAME ...]`.

A 10-edge chain `0 -> 1 -> ... -> 10`; one edge, `(5, 6)`, is retracted and
inserted again, one commit each, `--toggles` times, under one live query (or two,
for the view case). The answer after an even number of toggles is the one before
them, so whatever the engine stores should stay flat. Every `--every` toggles
the script prints the updates stored (`db.stats()`: every input's state trace
and shared arrangements, every dataflow's and every view's arrangements), how
many of them are base relations' state traces (where `Database(history=N)`
keeps the last N epochs' changes for `as_of`: those grow up to N commits, by
design; `--history N` sets it), the answer's size, and the mean CPU time of the
last `--window` commits (the first window's at 0): CPU time of this process
(`time.process_time`), since other jobs on a shared machine move wall-clock times
by 2-3x, and the mean, since a compaction every few dozen commits is part of the
cost. Cases:

- `plain`: `tc(x, y)`, no constant;
- `tenant`: `tc(3, y)`, a multi-tenant dataflow (ADR 0022);
- `magic`: `tc(3, y)` with multi-tenancy switched off: a magic-set plan of its own;
- `nonrec`: `hop2(4, z)` over a non-recursive rule (tenant), and `nonrec-magic`;
- `aggneg`: `reachn(3, n), unreached(3, y)`: a count over `tc` and a negation of
  it (tenant), and `aggneg-magic`;
- `view`: `tc(x, y)` and `tc(x, y), x < y` live together: both read a view of `tc`.

Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import format_table
from datalog import Database

CHAIN = [(i, i + 1) for i in range(10)]
TOGGLED = (5, 6)
DECLS = """
.decl edge(x: number, y: number)
.decl tc(x: number, y: number)
tc(x, y) :- edge(x, y).
tc(x, y) :- tc(x, z), edge(z, y).
"""
NONREC = """
.decl edge(x: number, y: number)
.decl hop2(x: number, z: number)
hop2(x, z) :- edge(x, y), edge(y, z).
"""
AGGNEG = (
    DECLS
    + """
.decl node(x: number)
.decl reachn(x: number, n: number)
.decl unreached(x: number, y: number)
node(x) :- edge(x, _).
node(y) :- edge(_, y).
reachn(x, n) :- node(x), n = count : { tc(x, _) }.
unreached(x, y) :- node(x), node(y), !tc(x, y).
"""
)


@dataclass(frozen=True)
class Case:
    program: str
    queries: tuple[str, ...]
    tenants: bool = True


CASES = {
    "plain": Case(DECLS, ("tc(x, y)",)),
    "tenant": Case(DECLS, ("tc(3, y)",)),
    "magic": Case(DECLS, ("tc(3, y)",), tenants=False),
    "nonrec": Case(NONREC, ("hop2(4, z)",)),
    "nonrec-magic": Case(NONREC, ("hop2(4, z)",), tenants=False),
    "aggneg": Case(AGGNEG, ("reachn(3, n), unreached(3, y)",)),
    "aggneg-magic": Case(AGGNEG, ("reachn(3, n), unreached(3, y)",), tenants=False),
    "view": Case(DECLS, ("tc(x, y)", "tc(x, y), x < y")),
}


def stored(stats: dict[str, Any]) -> tuple[int, int]:
    """(every update stored, those in base relations' state traces) in `db.stats()`."""
    total = history = 0
    for name, inp in stats["inputs"].items():
        total += inp["updates"] + sum(a["tuples"] for a in inp["arrangements"].values())
        if not name.startswith("tenant@") and name not in stats["views"]:
            history += inp["updates"]
    for df in [*stats["dataflows"], *stats["views"].values()]:
        total += sum(tuples for _, tuples, _ in df["arrangements"])
    return total, history


def database(case: Case, history: int | None = 1000) -> tuple[Database, list[Any]]:
    db = Database(history=history)
    db.define(case.program)
    if not case.tenants:  # every query with a constant builds a (magic-set) dataflow of its own
        db.queries.tenants.enabled = False
    db.insert("edge", CHAIN)
    subs = [db.subscribe(q, lambda change: None) for q in case.queries]
    return db, subs


def run(
    name: str, toggles: int, every: int, window: int, history: int | None = 1000
) -> list[list[object]]:
    db, subs = database(CASES[name], history)
    rows: list[list[object]] = []
    latencies: list[float] = []
    for n in range(toggles + 1):
        if n % every == 0 or n == toggles:
            total, history = stored(db.stats())
            recent = latencies[-window:] if n else []
            rows.append([name, n, total, history, len(subs[0].rows()), _ms(recent)])
        if n == toggles:
            break
        start = time.process_time()
        (db.retract if n % 2 == 0 else db.insert)("edge", [TOGGLED])
        latencies.append(time.process_time() - start)
        if n + 1 == window:  # the first window's time is the one shown at 0
            rows[0][-1] = _ms(latencies)
    return rows


def _ms(seconds: Sequence[float]) -> float | str:
    return round(statistics.mean(seconds) * 1e3, 2) if seconds else "-"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--toggles", type=int, default=3000)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--history", type=int, default=1000, help="Database(history=N)")
    parser.add_argument("--quick", action="store_true", help="300 toggles, every 100")
    args = parser.parse_args(argv)
    if args.quick:
        args.toggles, args.every = 300, 100
    headers = ["case", "toggles", "stored updates", "of which base history", "answer", "CPU ms"]
    for name in args.case or list(CASES):
        rows = run(name, args.toggles, args.every, args.window, args.history)
        print(format_table(rows, headers), flush=True)
        print()


if __name__ == "__main__":
    main()
