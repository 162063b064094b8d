"""A C points-to analysis fed incrementally: a generated stand-in for Soufflé's `hmmer`.

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_hmmer [--variables 200000] [--commits 20]`.

Soufflé's `hmmer` example is a points-to analysis for C over the facts of the hmmer
program (direct flows, loads, stores, allocations, external returns, escaping
pointers); its fact files are not on this machine, so this bench generates facts of
that shape (`facts`: variables in functions of 16, flows between nearby variables,
a tenth of the variables loading or storing through another, a twentieth allocating)
and runs the same rules. `CPtrLoad` and `CPtrStore` are subscribed on the empty
database, the facts are then inserted in `--commits` commits (every relation a slice
each time), and the whole feed is timed; the final answers are checked against a
one-shot evaluation of all the facts in a fresh database. Times are CPU seconds of
this process (the machine is shared: wall time measures the neighbours), reported,
never asserted; each commit's choice (ADR 0064) is printed below the table.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np

from bench.common import format_table, peak_rss_mb
from datalog import Change, Database

# The rules of the analysis (Soufflé's example, restated).
PROGRAM = """
.type Var <: symbol
.type Obj <: symbol
.decl DirectFlow(v: Var, w: Var)
.decl Load(v: Var, w: Var)
.decl Store(v: Var, w: Var)
.decl ExtReturn(v: Var, w: Var)
.decl EscapePtr(v: Var)
.decl HeapAlloc(v: Var, o: Obj)
.decl StackAlloc(v: Var, o: Obj)
.decl Global(v: Var, o: Obj)
.decl LptrVar(v: Var)
.decl IsPtr(v: Var, o: Obj)
.decl Memory(a: Obj, b: Obj)
.decl IsReachable(v: Var, o: Obj)
.decl CFormat(o: Obj)
.decl CPtrLoad(a: Var, b: Var)
.decl CPtrStore(a: Var, b: Var)
LptrVar(v) :- StackAlloc(v, _) ; HeapAlloc(v, _) ; Load(_, v) ; Store(_, v).
LptrVar(v) :- DirectFlow(v, w), LptrVar(w).
LptrVar(v) :- DirectFlow(w, v), LptrVar(w).
IsPtr(v, o) :- HeapAlloc(v, o) ; StackAlloc(v, o) ; Global(v, o).
IsPtr(d, o) :- DirectFlow(s, d), IsPtr(s, o).
IsPtr(d, o) :- Load(d, a), IsPtr(a, p), Memory(p, o).
IsPtr(v, o) :- ExtReturn(a, v), IsReachable(a, o).
IsPtr(v, "ext") :- ExtReturn(_, v).
Memory(p, o) :- Store(s, a), IsPtr(s, o), IsPtr(a, p).
Memory("ext", "ext") :- ExtReturn(_, _).
IsReachable(v, o) :- IsPtr(v, o).
IsReachable(v, o) :- Memory(p, o), IsReachable(v, p).
CFormat(o) :- EscapePtr(v), IsReachable(v, o).
CFormat("ext") :- ExtReturn(_, _).
CPtrLoad(d, a) :- Load(d, a), IsPtr(a, o), CFormat(o), LptrVar(d).
CPtrStore(s, a) :- Store(s, a), IsPtr(a, o), CFormat(o), LptrVar(s).
CFormat(o) :- CPtrLoad(_, v), IsPtr(v, o).
CFormat(o) :- CPtrStore(_, v), IsPtr(v, o).
CFormat(o) :- Load(v, a), IsPtr(a, o), !LptrVar(v).
CFormat(o) :- Store(v, a), IsPtr(a, o), !LptrVar(v).
"""

Facts = dict[str, list[tuple[str, ...]]]


def facts(variables: int, seed: int = 0) -> Facts:
    """Facts of a C program with `variables` variables (see the module)."""
    rng = np.random.default_rng(seed)
    size, n = 16, variables - variables % 16

    def near(count: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.integers(0, n, count)
        y = x - np.minimum(rng.integers(1, 5, count), x % size)
        keep = x != y
        return x[keep], y[keep]

    def var(a: np.ndarray) -> list[str]:
        return [f"v{i}" for i in a.tolist()]

    def pairs(a: np.ndarray, b: np.ndarray, obj: bool = False) -> list[tuple[str, ...]]:
        second = [f"o{i}" for i in b.tolist()] if obj else var(b)
        return sorted(set(zip(var(a), second, strict=True)))

    flow = near(n)
    load = near(n // 10)
    store = near(n // 10)
    heap = rng.choice(n, n // 20, replace=False)
    stack = rng.choice(n, n // 20, replace=False)
    glob = rng.choice(n, max(1, n // 1000), replace=False)
    ext = near(max(1, n // 2000))
    escape = rng.choice(n, max(1, n // 500), replace=False)
    return {
        "DirectFlow": pairs(*flow),
        "Load": pairs(*load),
        "Store": pairs(*store),
        "ExtReturn": pairs(*ext),
        "EscapePtr": [(v,) for v in sorted(set(var(escape)))],
        "HeapAlloc": pairs(heap, heap, obj=True),
        "StackAlloc": pairs(stack, stack + n, obj=True),
        "Global": pairs(glob, glob + 2 * n, obj=True),
    }


class Tally:
    def __init__(self) -> None:
        self.size = 0

    def __call__(self, change: Change) -> None:
        self.size += int(np.sum(np.asarray(change.diffs, dtype=np.int64)))


def fed(all_facts: Facts, commits: int) -> tuple[dict[str, int], list[float], str]:
    """Subscribe, then insert the facts in `commits` slices: answer sizes, commit times,
    and how each commit reached the live queries (`R`: recomputed, `.`: ran through, `-`:
    not weighed; one letter per query and commit: docs/adr/0064)."""
    db = Database()
    db.define(PROGRAM)
    tallies = {rel: Tally() for rel in ("CPtrLoad", "CPtrStore")}
    for rel, tally in tallies.items():
        db.subscribe(f"{rel}(a, b)", tally)
    seconds: list[float] = []
    chose: list[str] = []
    for i in range(commits):
        start = time.process_time()
        with db.transaction() as tx:
            for rel, rows in all_facts.items():
                part = rows[i * len(rows) // commits : (i + 1) * len(rows) // commits]
                if part:
                    tx.insert(rel, part)
        seconds.append(time.process_time() - start)
        lasts = [q["last_commit"] for q in db.stats()["queries"].values()]  # type: ignore[attr-defined]
        chose.append("".join(_how(last, db.epoch) for last in lasts))
    return {rel: t.size for rel, t in tallies.items()}, seconds, " ".join(chose)


def _how(last: dict[str, object] | None, epoch: int) -> str:
    if last is None or last["epoch"] != epoch:
        return "-"  # not weighed (a small change for it)
    return "R" if last["recomputed"] else "."


def once(all_facts: Facts) -> tuple[dict[str, int], float]:
    db = Database()
    db.define(PROGRAM)
    start = time.process_time()
    with db.transaction() as tx:
        for rel, rows in all_facts.items():
            tx.insert(rel, rows)
    sizes = {rel: len(db.query_columns(f"{rel}(a, b)")["a"]) for rel in ("CPtrLoad", "CPtrStore")}
    return sizes, time.process_time() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variables", type=int, default=200_000)
    parser.add_argument("--commits", type=int, default=20)
    args = parser.parse_args(argv)
    generated = facts(args.variables)
    sizes, seconds, chose = fed(generated, args.commits)
    fed_mb = peak_rss_mb()
    want, batch_s = once(generated)
    count = sum(len(r) for r in generated.values())
    rows = [
        [
            f"fed in {args.commits} commits",
            f"{sum(seconds):.2f} s",
            f"max commit {max(seconds):.2f} s",
            f"{sizes} {'ok' if sizes == want else 'MISMATCH ' + str(want)}",
            f"{fed_mb:,.0f}",
        ],
        ["one transaction, one-shot queries", f"{batch_s:.2f} s", "", str(want), ""],
    ]
    print(f"{count:,} facts, {args.variables:,} variables")
    print(format_table(rows, ["run", "total", "", "answers", "peak MiB (fed)"]))
    print(f"each commit (R: recomputed, .: ran through, per live query): {chose}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
