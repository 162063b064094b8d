"""Magic sets for every stratified program (docs/adr/0043): time, peak RSS, stored updates.

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_magic [--height 15] [--cap-mb 3000] [--timeout 120] [--case NAME ...]`.

Each case runs in a child process of its own (its peak RSS is its own), capped at
`--cap-mb` of address space and `--timeout` seconds; "off" runs the same program
with `.pragma "magic-transform" ""` appended (magic sets switched off, which is what
main did for these programs: it ignored the pragma, never specialized constants
inside rules, and never specialized a program with negation or aggregates).

- `samegen` / `samegen-off`: Soufflé's `magic_samegen` (a binary tree of height
  `--height`, `query() :- samegen(16384, 32767)`), the whole `query()` from a fresh
  database: load and query time, peak RSS;
- `nr` / `nr-off`: a 100-edge chain (its closure is 5,050 pairs), `nr(x, y) :-
  reach(x, y), !hidden(x, y)`, one subscription to `nr(1, y)` then 50 commits that
  each insert and retract a `secret` pair: updates stored by the live dataflows
  (`db.stats()`: every dataflow's arrangements, and tenant parameter inputs) and
  mean milliseconds per commit; `-own` variants switch multi-tenancy off;
- `reach`: the existing magic case, single-source reach `reach(3, y)` over a
  power-law graph (200k edges): one-shot query time, and the mean milliseconds of
  100 single-edge commits under a live subscription (multi-tenancy off, so the
  query's own magic-set dataflow serves it). Run it on two trees to compare.

Times inside a case are CPU seconds of the child (`time.process_time`: other jobs on
a shared machine move wall-clock times by 2-3x); "wall s" is the whole child
process, start-up included. Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.common import peak_rss_mb, print_table
from bench.generators import power_law_graph
from datalog import Database

OFF = '\n.pragma "magic-transform" ""\n'

SAMEGEN = """
.pragma "magic-transform" "*"
.decl samegen(x: number, y: number)
.decl node(x: number)
.decl parent(x: number, y: number)
.decl query()
samegen(x, x) :- node(x).
samegen(x, y) :- parent(x, a), samegen(a, b), parent(y, b).
query() :- samegen({left}, {right}).
"""

NR = """
.decl edge(x: number, y: number)
.decl secret(x: number, y: number)
.decl reach(x: number, y: number)
.decl hidden(x: number, y: number)
.decl nr(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
hidden(x, y) :- secret(x, y).
hidden(x, z) :- hidden(x, y), edge(y, z).
nr(x, y) :- reach(x, y), !hidden(x, y).
"""

REACH = """
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""


def samegen(height: int, off: bool) -> dict[str, Any]:
    leaves = 2 ** (height - 1)
    start = time.process_time()
    db = Database()
    db.define(SAMEGEN.format(left=leaves, right=2 * leaves - 1) + (OFF if off else ""))
    nodes = np.arange(1, 2 * leaves, dtype=np.int64)
    db.insert("node", [nodes])
    db.insert("parent", [nodes[1:], nodes[1:] // 2])
    loaded = time.process_time()
    rows = db.query("query()")
    done = time.process_time()
    return {"answer": len(rows), "load s": loaded - start, "query s": done - loaded}


def stored(db: Database) -> int:
    """Updates the live dataflows hold: their arrangements and tenant parameters."""
    stats = db.stats()
    held = sum(inp["updates"] for n, inp in stats["inputs"].items() if n.startswith("tenant@"))  # type: ignore[attr-defined]
    for df in stats["dataflows"]:  # type: ignore[attr-defined]
        held += sum(tuples for _, tuples, _ in df["arrangements"])
    return held


def nr(off: bool, tenants: bool) -> dict[str, Any]:
    db = Database()
    db.queries.tenants.enabled = tenants
    db.define(NR + (OFF if off else ""))
    db.insert("edge", [(i, i + 1) for i in range(100)])
    got: list[Any] = []
    db.subscribe("nr(1, y)", got.append)
    rng = np.random.default_rng(0)
    times = []
    for _ in range(50):
        pair = (1, int(rng.integers(2, 100)))
        start = time.process_time()
        db.insert("secret", [pair])
        db.retract("secret", [pair])
        times.append((time.process_time() - start) / 2)
    return {
        "answer": len(db.query("nr(1, y)")),
        "stored": stored(db),
        "ms/commit": 1000 * float(np.mean(times)),
    }


def reach() -> dict[str, Any]:
    src, dst = power_law_graph(200_000, 50_000, seed=1)
    db = Database()
    db.queries.tenants.enabled = False
    db.define(REACH)
    db.insert("edge", [src, dst])
    start = time.process_time()
    size = len(db.query("reach(3, y)"))
    once = time.process_time() - start
    db.subscribe("reach(3, y)", lambda _c: None)
    rng = np.random.default_rng(2)
    times = []
    for _ in range(100):
        edge = (int(rng.integers(0, 50_000)), int(rng.integers(0, 50_000)))
        start = time.process_time()
        db.insert("edge", [edge])
        times.append(time.process_time() - start)
    return {"answer": size, "query s": once, "ms/commit": 1000 * float(np.mean(times))}


def cases(height: int) -> dict[str, Callable[[], dict[str, Any]]]:
    return {
        "samegen": lambda: samegen(height, off=False),
        "samegen-off": lambda: samegen(height, off=True),
        "nr": lambda: nr(off=False, tenants=True),
        "nr-off": lambda: nr(off=True, tenants=True),
        "nr-own": lambda: nr(off=False, tenants=False),
        "nr-own-off": lambda: nr(off=True, tenants=False),
        "reach": reach,
    }


def child(name: str, height: int, cap_mb: int) -> None:
    """Run one case in this (child) process and print its figures as JSON."""
    cap = cap_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    figures = cases(height)[name]()
    figures["peak MB"] = peak_rss_mb()
    print(json.dumps(figures))


def run(name: str, args: argparse.Namespace) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.bench_magic", "--child", name]
    argv += ["--height", str(args.height), "--cap-mb", str(args.cap_mb)]
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"case": name, "result": f"stopped after {args.timeout} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        why = "out of memory" if "MemoryError" in done.stderr else last[:60]
        return {"case": name, "result": f"failed at the {args.cap_mb} MB cap ({why})"}
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {"case": name, "wall s": round(time.perf_counter() - start, 2), **figures}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--height", type=int, default=15)
    parser.add_argument("--cap-mb", type=int, default=3000)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--case", action="append", choices=sorted(cases(1)))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.height, args.cap_mb)
        return
    rows = [run(name, args) for name in args.case or cases(args.height)]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    print_table([[row.get(c, "") for c in columns] for row in rows], columns)


if __name__ == "__main__":
    main()
