"""How promptly a budget or an interrupt stops heavy work, and the memory a failed
big computation leaves behind (docs/adr/0039).

For each kind of heavy work, in a fresh process of its own:

- `late`: seconds from the budget's expiry to the `BudgetExceeded` (a `--budget`
  of a few seconds), and the longest gap between two budget checks while it ran;
- `interrupt`: the same work without a budget, `Database.interrupt()` called from
  another thread after `--budget` seconds: seconds from the call to the error;
- for the cross product, the process's RSS before it, at its peak, and after the
  failure: as the database leaves it (the failed dataflow freed at once and the
  heap trimmed), and with that switched off (freed at some later collection).

Kinds: a runaway recursion, a transitive closure, a `--cross` x `--cross` cross
product (time budget only, and refused by a row limit), a count over `--rows`
rows, a regular expression that backtracks for ever (a pattern from the data),
a slow Python functor, and a bulk insert under a live query.

    python -m bench.bench_budget [--quick] [--budget 2] [--cross 10000] [--rows 5000000]

Linux only for RSS (it reads /proc/self/status). Timings on a loaded machine are
pessimistic: each kind prints its own line, nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from datalog import BudgetExceeded, Database
from differential.budget import Budget

KINDS = ("recursion", "closure", "cross", "cross_rows", "count", "regex", "functor", "insert")


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _slow(x: int) -> int:
    """A Python functor that takes a millisecond a row."""
    time.sleep(0.001)
    return x


def _setup(kind: str, cross: int, rows: int) -> tuple[Database, Callable[[], object]]:
    """A database loaded for `kind`, and the heavy request to run on it."""
    rng = np.random.default_rng(0)
    db = Database(functors={"slow": _slow})
    if kind == "recursion":
        db.define(".decl n(x: number)\nn(0).\nn(x + 1) :- n(x).")
        return db, lambda: db.query("n(x)")
    if kind == "closure":
        db.define(
            ".decl e(x: number, y: number)\n.decl r(x: number, y: number)\n"
            "r(x, y) :- e(x, y).\nr(x, z) :- r(x, y), e(y, z)."
        )
        nodes = 20_000
        db.insert("e", (rng.integers(0, nodes, 2 * nodes), rng.integers(0, nodes, 2 * nodes)))
        return db, lambda: db.query("r(x, y)")
    if kind in ("cross", "cross_rows"):
        db.define(
            ".decl a(x: number)\n.decl b(y: number)\n.decl q(x: number, y: number)\n"
            "q(x, y) :- a(x), b(y)."
        )
        db.insert("a", (np.arange(cross),))
        db.insert("b", (np.arange(cross),))
        return db, lambda: db.query("q(x, y)")
    if kind == "count":
        db.define(
            ".decl e(x: number, y: number)\n.decl c(x: number, n: number)\n"
            "c(x, n) :- e(x, _), n = count : { e(x, y) }."
        )
        db.insert("e", (rng.integers(0, rows // 10, rows), rng.integers(0, 1 << 40, rows)))
        return db, lambda: db.query("c(x, n)")
    if kind == "regex":
        db.define(".decl s(x: symbol)\n.decl p(x: symbol)")
        db.insert("p", [("((a|b)|a)+b",)])  # the scan lets it through: the budget stops it
        db.insert("s", [("a" * 34 + "b!",)])
        return db, lambda: db.query("s(x), p(q), match(q, x)")
    if kind == "functor":
        db.define(".decl a(x: number)\n.functor slow(x: number): number")
        db.insert("a", (np.arange(1_000_000),))
        return db, lambda: db.query("a(x), y = @slow(x)")
    if kind == "insert":
        db.define(
            ".decl e(x: number, y: number)\n.decl r(x: number, y: number)\nr(x, y) :- e(y, x)."
        )
        db.subscribe("r(x, y)", lambda change: None)
        columns = (rng.integers(0, 1 << 40, rows), rng.integers(0, 1 << 40, rows))
        return db, lambda: db.insert("e", columns)
    raise ValueError(f"unknown kind {kind!r}")


def _checks(db: Database) -> list[float]:
    """The times of the database's budget checks from now on."""
    stamps: list[float] = []
    budget = db.lock.budget
    check = Budget.check

    def timed(where: str = "") -> None:
        stamps.append(time.monotonic())
        check(budget, where)

    budget.check = timed  # type: ignore[method-assign]
    return stamps


def _late(kind: str, budget: float, cross: int, rows: int, trim: bool) -> dict[str, Any]:
    """Run `kind` under a time budget (a row limit too for `cross_rows`)."""
    db, request = _setup(kind, cross, rows)
    limit = 1_000_000 if kind == "cross_rows" else None
    before = _rss_mb()
    stamps = _checks(db)
    start = time.monotonic()
    outcome = "finished"
    keep = mock.patch("differential.budget._release")  # as before: nothing given back
    with keep if not trim else contextlib.nullcontext():
        try:
            with db.budget(budget, rows=limit):
                request()
        except BudgetExceeded as error:
            outcome = type(error).__name__
    end = time.monotonic()
    marks = [start, *stamps, end]
    return {
        "kind": kind,
        "outcome": outcome,
        "seconds": round(end - start, 3),
        "late": round(end - start - budget, 3),
        "checks": len(stamps),
        "max_gap": round(max(b - a for a, b in itertools.pairwise(marks)), 3),
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(_peak_mb(), 1),
        "rss_after_mb": round(_rss_mb(), 1),
        "trim": trim,
    }


def _interrupt(kind: str, after: float, cross: int, rows: int) -> dict[str, Any]:
    """Run `kind` without a budget in a thread; interrupt it after `after` seconds."""
    db, request = _setup(kind, cross, rows)
    ended: list[float] = []
    outcome: list[str] = []

    def work() -> None:
        try:
            request()
            outcome.append("finished")
        except BaseException as error:
            outcome.append(type(error).__name__)
        ended.append(time.monotonic())

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(after)
    called = time.monotonic()
    db.interrupt()
    thread.join(600)
    return {
        "kind": kind,
        "outcome": outcome[0] if outcome else "still running",
        "after_interrupt": round(ended[0] - called, 3) if ended else None,
    }


def _one(args: argparse.Namespace) -> None:
    """The child process: one measurement, printed as JSON."""
    if args.mode == "late":
        result = _late(args.one, args.budget, args.cross, args.rows, not args.no_trim)
    else:
        result = _interrupt(args.one, args.budget, args.cross, args.rows)
    print(json.dumps(result))


def _run(kind: str, mode: str, args: argparse.Namespace, *extra: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.bench_budget", "--one", kind, "--mode", mode]
    command += ["--budget", str(args.budget), "--cross", str(args.cross), "--rows", str(args.rows)]
    done = subprocess.run([*command, *extra], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"kind": kind, "outcome": f"crashed: {done.stderr.strip().splitlines()[-1:]}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of each budget")
    parser.add_argument("--cross", type=int, default=10_000, help="rows of each product side")
    parser.add_argument("--rows", type=int, default=5_000_000, help="rows counted, inserted")
    parser.add_argument("--quick", action="store_true", help="smaller inputs")
    parser.add_argument("--kinds", nargs="*", default=list(KINDS), choices=KINDS)
    parser.add_argument("--one", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("late", "interrupt"), help=argparse.SUPPRESS)
    parser.add_argument("--no-trim", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(args)
        return
    if args.quick:
        args.cross, args.rows = min(args.cross, 5_000), min(args.rows, 1_000_000)
    print(f"budget {args.budget} s, cross {args.cross} x {args.cross}, rows {args.rows:,}")
    print(f"{'kind':<11} {'outcome':<17} {'late s':>7} {'max gap s':>9} {'checks':>7} "
          f"{'interrupt s':>11}")  # fmt: skip
    for kind in args.kinds:
        late = _run(kind, "late", args)
        stopped = _run(kind, "interrupt", args) if kind != "cross_rows" else {}
        print(f"{kind:<11} {late.get('outcome', ''):<17} {late.get('late', ''):>7} "
              f"{late.get('max_gap', ''):>9} {late.get('checks', ''):>7} "
              f"{stopped.get('after_interrupt', '-')!s:>11}")  # fmt: skip
        if kind == "cross":
            untrimmed = _run(kind, "late", args, "--no-trim")
            for label, found in (("released", late), ("not released", untrimmed)):
                print(f"  RSS of a failed cross product ({label}): before "
                      f"{found.get('rss_before_mb')} MB, peak {found.get('rss_peak_mb')} MB, "
                      f"after {found.get('rss_after_mb')} MB")  # fmt: skip


if __name__ == "__main__":
    main()
