"""Big commits into live dataflows against recomputing them (docs/adr/0053).

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_adaptive [--quick] [--scale K] [--runs N] [--programs
reach,tc,hmmer] [--fractions 0.01,0.1,0.5,1] [--limit S] [--memory GB]`.

Three programs, each with a live subscription to its whole answer over a base of
generated facts (seeded): `reach` (single-source reachability over a random graph),
`tc` (transitive closure over a graph of small DAG clusters) and `hmmer`, a
points-to analysis shaped like the Doop/Souffle `hmmer` benchmark (field-sensitive
Andersen: `new`, `assign`, `load`, `store` into mutually recursive `pt`/`hpt`). For
a change of 1%, 10%, 50% and 100% of the base's size (new facts of the same
distribution), committed in one transaction:

- `incremental`: the commit with adaptive commits off (the change runs through every
  round of the live dataflow; `inf` if it ran past `--limit` seconds, under a budget
  which stops it, or past `--memory` GB of address space);
- `adaptive`: the commit with the default tuning (the engine chooses; `chose` says
  what it chose, from `stats()`);
- `recompute`: a fresh database holding base and change, subscribed (planning the
  dataflow and evaluating it from scratch: what the goal compares against);
- `ratio`: adaptive / recompute (goal of issue 28: at most 1.2);
- `warmed`, `chose`, `recompute`, `ratio`: the same after warm-up commits of growing
  size (`ladder`: from `recompute_min_rows` rows, 4x each), so the dataflow's model
  (ADR 0064) has measured runs near the change's size; the recompute holds the
  warm-up facts too. Without warm-up the prior (0.5% of the base) decides.

The fraction 0 is a row of its own: all the base's facts in one commit into a
subscribed, empty database, against loading them and subscribing.

Bases: 100,000 edges for `reach` and `tc`, 10,000 facts for `hmmer` (its answer
grows much faster than its facts: at twice the facts it is several times larger),
times `--scale`. Each figure is the best of `--runs` (default 1), in CPU
seconds of this process (the machine is shared: wall time measures the neighbours).
Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np

from bench.common import format_table
from datalog import BudgetExceeded, Database
from differential.tuning import TUNING, tuned

Facts = dict[str, np.ndarray]


@dataclass(frozen=True)
class Workload:
    name: str
    program: str
    query: str
    # (facts, base size, rng) -> that many facts over the base's domain
    facts: Callable[[int, int, np.random.Generator], Facts]
    size: int  # base facts at scale 1


REACH = """
.decl e(a: number, b: number)
.decl reach(a: number)
reach(0).
reach(b) :- reach(a), e(a, b).
"""

TC = """
.decl e(a: number, b: number)
.decl tc(a: number, b: number)
tc(a, b) :- e(a, b).
tc(a, c) :- tc(a, b), e(b, c).
"""

HMMER = """
.decl new(v: number, o: number)
.decl assign(to: number, from: number)
.decl load(to: number, base: number, f: number)
.decl store(base: number, f: number, from: number)
.decl pt(v: number, o: number)
.decl hpt(o: number, f: number, p: number)
pt(v, o) :- new(v, o).
pt(v, o) :- assign(v, w), pt(w, o).
pt(v, o) :- load(v, b, f), pt(b, q), hpt(q, f, o).
hpt(q, f, o) :- store(b, f, w), pt(b, q), pt(w, o).
"""


def reach_facts(size: int, base: int, rng: np.random.Generator) -> Facts:
    nodes = max(base // 2, 2)
    return {"e": rng.integers(0, nodes, size=(size, 2))}


def tc_facts(size: int, base: int, rng: np.random.Generator) -> Facts:
    """Edges `a -> b`, `a <= b`, inside clusters of 40 nodes (a DAG per cluster)."""
    cluster = 40
    clusters = max(base // 60, 1)
    start = rng.integers(0, clusters, size) * cluster
    a, b = rng.integers(0, cluster, size), rng.integers(0, cluster, size)
    return {"e": np.stack([start + np.minimum(a, b), start + np.maximum(a, b)], 1)}


def hmmer_facts(size: int, base: int, rng: np.random.Generator) -> Facts:
    """Variables in modules of 16 (assignments stay in a module), objects one
    per `new`, four fields: sizes in the proportions of a program's facts."""
    module = 16
    variables = max(base // 2, module)

    def var(n: int) -> np.ndarray:
        return rng.integers(0, variables, n)

    def near(v: np.ndarray) -> np.ndarray:
        return (v // module) * module + rng.integers(0, module, len(v))

    news, assigns, loads, stores = (int(size * p) for p in (0.3, 0.4, 0.15, 0.15))
    v = var(news)
    w = var(assigns)
    lv, sv = var(loads), var(stores)
    return {
        "new": np.stack([v, rng.integers(0, base, news)], 1),
        "assign": np.stack([near(w), w], 1),
        "load": np.stack([lv, near(lv), rng.integers(0, 4, loads)], 1),
        "store": np.stack([sv, rng.integers(0, 4, stores), near(sv)], 1),
    }


WORKLOADS = [
    Workload("reach", REACH, "reach(a)", reach_facts, 100_000),
    Workload("tc", TC, "tc(a, b)", tc_facts, 100_000),
    Workload("hmmer", HMMER, "pt(v, o)", hmmer_facts, 10_000),
]
FRACTIONS = [0.01, 0.1, 0.5, 1.0, 0.0]


def loaded(work: Workload, facts: list[Facts]) -> Database:
    db = Database()
    db.define(work.program)
    for part in facts:
        with db.transaction() as tx:
            for relation, rows in part.items():
                tx.insert(relation, rows)
    return db


@contextmanager
def capped(gigabytes: float) -> Iterator[None]:
    """Allocations past `gigabytes` of address space raise `MemoryError` meanwhile (an
    incremental hmmer commit can hold tens of millions of updates in flight: on a
    shared machine it must fail, not take every byte)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = int(gigabytes * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard < 0 else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def commit_s(
    work: Workload,
    base: Facts,
    change: Facts,
    incremental: bool,
    limit: float,
    memory: float,
    warm: list[Facts] = [],  # noqa: B006 (read only)
) -> tuple[float, str]:
    """The commit's seconds and what the engine chose; `inf` if it ran past `limit`
    seconds or `memory` GB of address space (see `capped`). `warm`: commits made
    first, untimed (what the dataflow's model measures before the big one)."""
    db = loaded(work, [base])
    db.subscribe(work.query, lambda change: None)
    for part in warm:
        with db.transaction() as tx:
            for relation, rows in part.items():
                tx.insert(relation, rows)
    never = TUNING.but(recompute="never")
    with tuned(never if incremental else TUNING.but()):
        start = time.process_time()
        try:
            with (
                capped(memory),
                db.budget(seconds=limit) if incremental else nullcontext(),
                db.transaction() as tx,
            ):
                for relation, rows in change.items():
                    tx.insert(relation, rows)
        except (BudgetExceeded, MemoryError):
            return float("inf"), "incremental" if incremental else "?"
        took = time.process_time() - start
    (live,) = db.stats()["queries"].values()  # type: ignore[attr-defined]
    last = live["last_commit"]
    return took, "recompute" if last and last["recomputed"] else "incremental"


def recompute_s(work: Workload, facts: list[Facts], memory: float) -> float:
    db = loaded(work, facts)
    start = time.process_time()
    try:
        with capped(memory):
            db.subscribe(work.query, lambda change: None)
    except MemoryError:
        return float("inf")
    return time.process_time() - start


def ladder(work: Workload, target: int, size: int, rng: np.random.Generator) -> list[Facts]:
    """Warm-up commits for a change of `target` facts: from `recompute_min_rows`
    facts up, each 4x the last (`recompute_reach`), the last within reach of
    `target`: a live dataflow that has seen commits of growing size."""
    sizes, n = [], TUNING.recompute_min_rows
    while n < target:
        sizes.append(n)
        if n * TUNING.recompute_reach >= target:
            break
        n = int(n * TUNING.recompute_reach)
    return [work.facts(n, size, rng) for n in sizes]


def rows_for(
    work: Workload, size: int, fraction: float, runs: int, limit: float, memory: float
) -> list[object]:
    """One commit of `fraction` of a base of `size` facts (0: all `size` facts into an
    empty base, against loading them at once)."""
    rng = np.random.default_rng(7)
    base = work.facts(size, size, rng) if fraction else {}
    change = work.facts(max(int(size * (fraction or 1)), 1), size, rng)
    changed = sum(len(v) for v in change.values())
    warm = ladder(work, changed, size, rng) if fraction else []
    incremental = min(commit_s(work, base, change, True, limit, memory)[0] for _ in range(runs))
    adaptive, chose = min(commit_s(work, base, change, False, limit, memory) for _ in range(runs))
    recompute = min(recompute_s(work, [base, change], memory) for _ in range(runs))
    row = [work.name, size, f"{fraction:.0%}" if fraction else "all, empty base", changed,
           incremental, adaptive, chose, recompute, adaptive / recompute]  # fmt: skip
    if not warm:
        return [*row, "", "", "", ""]
    warmed = [commit_s(work, base, change, False, limit, memory, warm) for _ in range(runs)]
    after, chose_after = min(warmed)
    again = min(recompute_s(work, [base, *warm, change], memory) for _ in range(runs))
    return [*row, after, chose_after, again, after / again]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="bases a tenth the size, one run")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the base sizes")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--limit", type=float, default=120.0,
                        help="seconds an incremental commit may take (inf past it)")  # fmt: skip
    parser.add_argument("--memory", type=float, default=6.0,
                        help="GB of address space a step may take (inf past it)")  # fmt: skip
    parser.add_argument("--programs", default=",".join(w.name for w in WORKLOADS),
                        help="which programs, comma-separated")  # fmt: skip
    parser.add_argument("--fractions", default=",".join(map(str, FRACTIONS)),
                        help="change sizes as fractions of the base, comma-separated")  # fmt: skip
    args = parser.parse_args()
    scale, runs = (args.scale / 10, 1) if args.quick else (args.scale, args.runs)
    names, fractions = args.programs.split(","), [float(f) for f in args.fractions.split(",")]
    rows = [rows_for(w, int(w.size * scale), f, runs, args.limit, args.memory)
            for w in WORKLOADS if w.name in names for f in fractions]  # fmt: skip
    print(f"one commit of a fraction of the base into a live dataflow (best of {runs}, s)")
    print(format_table(rows, ["program", "base", "change", "rows", "incremental", "adaptive",
                              "chose", "recompute", "ratio", "warmed", "chose",
                              "recompute", "ratio"]))  # fmt: skip


if __name__ == "__main__":
    main()
