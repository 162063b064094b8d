"""Adaptive commits: a commit large next to what a live dataflow reads recomputes the
dataflow from the new base instead of running the change through it (docs/adr/0053).

Layer: datalog (API). Imports `datalog.db.live`, `datalog.db.tenants` and
`differential`; the commit path (`datalog.db.epochs`) calls `Adaptive.adapt` before
each epoch, and the live queries' owner (`datalog.db.queries`) recomputes what it
retired right after the epoch (`LiveQueries.recompute`).

The cost model. Running a change through a dataflow costs about the change times
what each changed row derives, round after round, and every round pays for the
history it keeps; recomputing costs about the new base (what the dataflow reads)
plus what it derives, once, with no history. The first grows with the change, the
second does not, so past some ratio of change to base recomputing wins: `choose`
recomputes a dataflow when the rows a commit asks to change in the inputs it reads
(through views, the inputs the views read) are at least `TUNING.recompute_ratio`
times the rows those inputs hold, and at least `TUNING.recompute_min_rows` (below
that, planning and starting a dataflow cost more than any change). Both thresholds
were measured (`python -m bench.bench_adaptive`).

A dataflow whose computation may fail on the data (it calls a functor, or a `range`
that may be too long) always runs the change: its failure must refuse the
transaction, as it does while the epoch is computed, and a recomputation runs after
the commit point, where it could only leave the epoch committed and the live query
broken.

Under a budget (a deadline or a row limit, docs/adr/0039) the change always runs
through: a recomputation happens after the epoch's commit point, where no budget may
stop it, and a budget must be able to stop a large commit before it happens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from datalog.db.live import LiveQuery
from datalog.db.tenants import Tenant
from datalog.lang.ast import Call
from datalog.lang.passes.variables import nodes
from datalog.plan.plan import Plan
from differential.batch import Updates, concat, consolidate
from differential.budget import remaining, row_limit
from differential.engine import Dataflow, Engine
from differential.inputs import Requests
from differential.sort import order_of
from differential.time import column
from differential.trace.batch import ordered_hash
from differential.tuning import TUNING


@dataclass(frozen=True)
class Choice:
    """How one epoch reached one live dataflow: the rows it asked to change in the
    inputs the dataflow reads, the rows those held before, and whether the dataflow
    was recomputed from the new base (else the change ran through it)."""

    epoch: int
    change: int
    state: int
    recompute: bool

    def describe(self) -> str:
        how = "recomputed from the new base" if self.recompute else "ran the change through"
        return (
            f"epoch {self.epoch}: {how} (change {self.change:,} rows, "
            f"base {self.state:,} rows; recompute at {TUNING.recompute_ratio:g}x the base, "
            f"from {TUNING.recompute_min_rows:,} rows, docs/adr/0053)"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "epoch": self.epoch,
            "change_rows": self.change,
            "base_rows": self.state,
            "recomputed": self.recompute,
        }


class Adaptive:
    """The adaptive choices of one database's live queries (module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.recomputing: list[LiveQuery] = []  # retired for the epoch being committed
        self.choices: dict[str, Choice] = {}  # by live query key: its last choice

    def adapt(self, lives: Iterable[LiveQuery], requests: Mapping[str, Requests]) -> None:
        """Before an epoch that carries `requests`: retire the dataflows it is cheaper
        to recompute from the new base than to run the change through, and remember
        their live queries in `recomputing`. A shared dataflow with parameters joining
        or leaving always runs the change (its seats' first slices are its output)."""
        flows: dict[int, tuple[Dataflow, list[LiveQuery]]] = {}
        for live in lives:
            tenant = live.tenant
            plan = tenant.plan if isinstance(tenant, Tenant) else live.plan
            if plan is None or (isinstance(tenant, Tenant) and (tenant.joining or tenant.retiring)):
                continue
            if fallible(plan.plan):
                continue
            flows.setdefault(id(plan.dataflow), (plan.dataflow, []))[1].append(live)
        chosen = choose(self.engine, [df for df, _ in flows.values()], requests)
        for df, members in flows.values():
            choice = chosen.get(df)
            if choice is None:
                continue
            for live in members:
                self.choices[live.key] = choice
            if choice.recompute:
                self.recomputing += members
                self.engine.retire(df)

    def last_commit(self, key: str) -> dict[str, object] | None:
        """How the last commit weighed for live query `key` ran (`stats`): one of at
        least `TUNING.recompute_min_rows` rows that reached it."""
        choice = self.choices.get(key)
        return None if choice is None else choice.as_dict()

    def note(self, live: LiveQuery | None) -> list[str]:
        """`explain`'s line for a live query: how the last commit that reached it ran."""
        choice = None if live is None else self.choices.get(live.key)
        return [] if choice is None else [f"  live: last commit, {choice.describe()}"]


def choose(
    engine: Engine, flows: list[Dataflow], requests: Mapping[str, Requests]
) -> dict[Dataflow, Choice]:
    """For each of `flows` that the requests reach, how the next epoch should reach it.
    A commit of fewer than `TUNING.recompute_min_rows` rows is not weighed at all (it
    costs the commit path one sum)."""
    asked = {name: len(req) for name, req in requests.items() if len(req)}
    if sum(asked.values()) < TUNING.recompute_min_rows:
        return {}
    found: dict[Dataflow, Choice] = {}
    epoch = engine.epoch + 1
    free = remaining() is None and row_limit() is None  # (module docstring)
    owner = {id(a): name for name, inp in engine.inputs.items() for a in inp.arrangements.values()}
    for df in flows:
        names = read(engine, df, owner)
        change = sum(asked.get(name, 0) for name in names)
        if change:
            state = sum(engine.inputs[name].size for name in names if name in engine.inputs)
            recompute = free and (
                change >= TUNING.recompute_min_rows and change >= TUNING.recompute_ratio * state
            )
            found[df] = Choice(epoch, change, state, recompute)
    return found


def read(engine: Engine, df: Dataflow, owner: Mapping[int, str]) -> set[str]:
    """The inputs `df` reads, and through each view it reads, the inputs the view reads
    (`owner`: the input of each arrangement, by id)."""
    views = {view.input.name: view for view in engine.views}
    names: set[str] = set()
    waiting = [df]
    while waiting:
        flow = waiting.pop()
        for op in flow.imports:
            name = owner.get(id(op.shared))
            if name is not None and name not in names:
                names.add(name)
                if name in views:
                    waiting.append(views[name].dataflow)
    return names


def fallible(plan: Plan) -> bool:
    """Whether computing `plan` may raise on the data: its query or a rule it computes
    calls a functor or `range` (`urange` and `frange` included; the module docstring)."""
    rules = [(r.head.args, r.body) for r in plan.program.rules if r.head.name in plan.computed]
    queried = [((), body) for body in plan.query.bodies] if plan.query is not None else []
    return any(
        isinstance(node, Call) and (node.function == "range" or node.function.startswith("@"))
        for terms, body in (*rules, *queried)
        for node in nodes(terms, body)
    )


def difference(old: Updates, new: Updates, epoch: int) -> Updates:
    """`new - old`, consolidated, at `epoch`: what a live query holding `old` is told
    when its dataflow is recomputed (or rebuilt for new rules) and answers `new`.

    Both are consolidated answers, mostly alike. When each is in row order and its
    rows have an order-preserving hash (`ordered_hash`: integers that fit), the rows
    of `new` are searched in `old` by hash and only the rows that differ are sorted
    (a recomputed answer of 50,000 rows: 1.5 ms instead of 4); otherwise both are
    consolidated together."""
    fast = _sorted_difference(old, new) if len(old) and len(new) else None
    parts = [old.negate(), new] if fast is None else fast
    return consolidate(concat([p.with_times(column((epoch,), len(p))) for p in parts]))


def _sorted_difference(old: Updates, new: Updates) -> list[Updates] | None:
    """`difference`'s parts by a search of sorted hashes, or None unless the rows of
    each answer strictly increase and have ordered hashes."""
    if order_of(list(old.columns)) < 1 or order_of(list(new.columns)) < 1:
        return None
    was, now = ordered_hash(old.columns), ordered_hash(new.columns)
    if was is None or now is None:
        return None
    at = np.minimum(was.searchsorted(now), len(was) - 1)
    same = was[at] == now  # rows of `new` that `old` holds too
    kept = np.zeros(len(was), dtype=bool)
    kept[at[same]] = True
    matched = np.flatnonzero(same)
    moved = np.asarray(new.diffs)[matched] - np.asarray(old.diffs)[at[matched]]
    recounted = matched[moved != 0]
    fresh = np.flatnonzero(~same)
    return [
        old.take(np.flatnonzero(~kept)).negate(),
        new.take(fresh),
        Updates(
            tuple(c[recounted] for c in new.columns),
            new.times[:, recounted],
            moved[moved != 0],
        ),
    ]
