"""Adaptive commits: a commit large next to what a live dataflow reads recomputes the
dataflow from the new base when that is predicted cheaper than running the change
through it (docs/adr/0053, the measured model of docs/adr/0064).

Layer: datalog (API). Imports `datalog.db.live`, `datalog.db.tenants` and
`differential`; the commit path (`datalog.db.epochs`) calls `Adaptive.adapt` before
each epoch and `Adaptive.learn` once it is settled, and the live queries' owner
(`datalog.db.queries`) recomputes what was retired right after the epoch
(`LiveQueries.recompute`).

The model, one per live dataflow (`Costs`), learns from its own measurements: the
seconds the dataflow spent (`Dataflow.spent`: its runs, settling and advances, timed
by `Engine.clock`, this thread's CPU time, a fake in tests), and its share of what the
views it reads spent (`datalog.db.charges`: a view's work divided among its readers):

- recomputing costs `build` seconds per base row, measured by every (re)build of the
  dataflow (what it spent starting and settling) over a base of at least
  `recompute_min_rows` rows, and by a change run into an empty base (that is a build);
- running a change of `c` rows through costs `fixed + per_row * c`, a least-squares
  line through its past runs (what it spent in each epoch that changed an input it
  reads), older runs weighing `recompute_decay` times less at each new one:
  five running sums, whatever the number of commits. Past `recompute_reach` times the
  largest run measured, a run is predicted at least at that run's cost per row (a
  change's cost per row shrinks as it grows, so this errs towards recomputing).

A commit that asks to change at least `recompute_min_rows` rows in the inputs a
dataflow reads (through views, the inputs the views read) recomputes it when the
predicted run costs more than the predicted recompute over the new base. Until both
are measured, the prior decides: recompute when the change is at least
`recompute_ratio` times the base (ADR 0053's measured threshold). A base below
`recompute_min_rows` rows runs the change: that is computing from scratch, without
planning again, and it measures the dataflow's first run.

A dataflow whose computation may fail on the data (it calls a functor, or a `range`
that may be too long) always runs the change: its failure must refuse the
transaction, as it does while the epoch is computed, and a recomputation runs after
the commit point, where it could only leave the epoch committed and the live query
broken. Under a budget (a deadline or a row limit, docs/adr/0039) the change always
runs through: a recomputation happens after the epoch's commit point, where no
budget may stop it, and a budget must be able to stop a large commit before it
happens.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from datalog.db.charges import Sharing, Spent, charged, spent
from datalog.db.live import LiveQuery
from datalog.db.tenants import Tenant
from datalog.lang.ast import Call
from datalog.lang.passes.variables import nodes
from datalog.plan.plan import Plan
from differential.batch import Updates, concat, consolidate
from differential.budget import remaining, row_limit
from differential.engine import Engine
from differential.graph import Dataflow
from differential.inputs import Requests
from differential.sort import order_of
from differential.time import column
from differential.trace.batch import ordered_hash
from differential.tuning import TUNING


@dataclass
class Costs:
    """What one live dataflow's measurements predict (module docstring)."""

    build: float | None = None  # seconds per base row of a (re)build
    builds: int = 0
    runs: int = 0
    # decayed sums over the runs (rows x, seconds y): weight, x, y, x*x, x*y
    sums: list[float] = field(default_factory=lambda: [0.0] * 5)
    top: tuple[int, float] = (0, 0.0)  # the largest run measured: rows, seconds

    def built(self, rows: int, seconds: float) -> None:
        """A (re)build over `rows` base rows took `seconds`."""
        if rows >= max(TUNING.recompute_min_rows, 1):
            rate = seconds / rows
            keep = TUNING.recompute_decay if self.build is not None else 0.0
            self.build = keep * (self.build or 0.0) + (1 - keep) * rate
            self.builds += 1

    def ran(self, rows: int, seconds: float) -> None:
        """A change of `rows` rows ran through in `seconds`."""
        keep = TUNING.recompute_decay
        self.sums = [keep * s for s in self.sums]
        for i, v in enumerate((1.0, rows, seconds, rows * rows, rows * seconds)):
            self.sums[i] += v
        if rows >= self.top[0]:
            self.top = (rows, seconds)
        self.runs += 1

    def line(self) -> tuple[float, float] | None:
        """`(fixed, per_row)` seconds of a run, or None before any run."""
        w, x, y, xx, xy = self.sums
        if not self.runs or x <= 0:
            return None
        spread = w * xx - x * x
        if spread <= 1e-9 * w * xx:  # one size only: all of it per row
            return 0.0, y / x
        per_row = (w * xy - x * y) / spread
        fixed = (y - per_row * x) / w
        if per_row < 0:
            return y / w, 0.0
        if fixed < 0:
            return 0.0, xy / xx
        return fixed, per_row

    def incremental(self, rows: int) -> float | None:
        """The predicted seconds of running a change of `rows` rows through."""
        line = self.line()
        if line is None:
            return None
        predicted = line[0] + line[1] * rows
        top_rows, top_seconds = self.top
        if rows > TUNING.recompute_reach * top_rows:  # past what was measured
            predicted = max(predicted, top_seconds * rows / max(top_rows, 1))
        return predicted

    def recompute(self, rows: int) -> float | None:
        """The predicted seconds of rebuilding over a base of `rows` rows."""
        return None if self.build is None else self.build * max(rows, 1)

    def as_dict(self) -> dict[str, object]:
        line = self.line()
        return {
            "build_s_per_row": self.build,
            "builds": self.builds,
            "run_fixed_s": None if line is None else line[0],
            "run_s_per_row": None if line is None else line[1],
            "runs": self.runs,
            "largest_run_rows": self.top[0],
        }


@dataclass(frozen=True)
class Choice:
    """How one epoch reached one live dataflow: the rows it asked to change in the
    inputs the dataflow reads, the rows those held before, whether the dataflow was
    recomputed from the new base (else the change ran through it), why, and what the
    model predicted (None: not measured yet)."""

    epoch: int
    change: int
    state: int
    recompute: bool
    reason: str = ""
    incremental: float | None = None
    rebuild: float | None = None

    def describe(self) -> str:
        how = "recomputed from the new base" if self.recompute else "ran the change through"
        return (
            f"epoch {self.epoch}: {how} (change {self.change:,} rows, "
            f"base {self.state:,} rows): {self.reason} (docs/adr/0064)"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "epoch": self.epoch,
            "change_rows": self.change,
            "base_rows": self.state,
            "recomputed": self.recompute,
            "reason": self.reason,
            "predicted_incremental_s": self.incremental,
            "predicted_recompute_s": self.rebuild,
        }


@dataclass
class Track:
    """One live dataflow as the model follows it: its costs, the dataflow measured
    (weakly: a retired one is not kept alive), what it reads, whether it may fail,
    the change the epoch being committed brings it, and its last weighed choice."""

    costs: Costs
    flow: weakref.ref[Dataflow]
    reads: frozenset[str]
    fallible: bool
    # the epoch being committed: its number, the change, the base, whether recomputed,
    # and what the dataflow and the views it reads had spent before it
    pending: tuple[int, int, int, bool, Spent] | None = None
    choice: Choice | None = None


Group = tuple[Dataflow, Plan, list[LiveQuery], bool]  # the dataflow, its plan, lives, seats moving


class Adaptive:
    """The adaptive choices of one database's live queries (module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.recomputing: list[LiveQuery] = []  # retired for the epoch being committed
        self.tracks: dict[str, Track] = {}  # by live query key (a shared dataflow's: one)

    def adapt(self, lives: Iterable[LiveQuery], requests: Mapping[str, Requests]) -> None:
        """Before an epoch that carries `requests`: note what it changes for each live
        dataflow (`learn` times it), and retire the dataflows it is cheaper to
        recompute from the new base than to run the change through, remembering
        their live queries in `recomputing`. A shared dataflow with parameters
        joining or leaving always runs the change (its seats' first slices are its
        output) and is not timed."""
        for track in self.tracks.values():  # (an aborted epoch's notes go)
            track.pending = None
        asked = {name: req for name, req in requests.items() if len(req)}
        if not asked:
            return
        big = sum(len(req) for req in asked.values()) >= TUNING.recompute_min_rows
        epoch = self.engine.epoch + 1
        sharing = Sharing(self.engine)  # (read once for every dataflow, again after a retire)
        for df, plan, members, moving in groups(lives):
            track = self._track(df, plan, members, sharing)
            change = sum(len(asked[name]) for name in track.reads if name in asked)
            base = self._base(track.reads) if change else 0
            before = spent(sharing, df) if change and not moving else None
            track.pending = None if before is None else (epoch, change, base, False, before)
            if not big or not change:
                continue
            after = base + sum(_net(asked[name]) for name in track.reads if name in asked)
            choice = self._choose(track, epoch, change, base, max(after, 0), moving)
            track.choice = choice
            if choice.recompute:
                track.pending = (epoch, change, base, True, before or spent(sharing, df))
                self.recomputing += members
                self.engine.retire(df)
                sharing = Sharing(self.engine)  # (its views have a reader fewer)

    def learn(self, lives: Iterable[LiveQuery]) -> None:
        """After a settled epoch that `adapt` saw: fold what it cost into each model it
        reached (the run of a dataflow that ran it, the rebuild of one recomputed),
        each with its share of the views it reads (`datalog.db.charges`)."""
        sharing = Sharing(self.engine)
        for df, _, members, _ in groups(lives):
            track = next((self.tracks[q.key] for q in members if q.key in self.tracks), None)
            if track is None or track.pending is None:
                continue
            epoch, change, base, recomputed, before = track.pending
            track.pending = None
            if self.engine.epoch != epoch:  # the epoch did not happen
                continue
            if recomputed and track.flow() is not df:
                rebuilt = Spent(0.0, before.views)  # a new dataflow: all it spent
                track.costs.built(self._base(track.reads), charged(sharing, df, rebuilt))
                track.flow = weakref.ref(df)
            elif track.flow() is df:
                cost = charged(sharing, df, before)
                track.costs.ran(change, cost)
                if base < TUNING.recompute_min_rows:  # into a (nearly) empty base: a build
                    track.costs.built(self._base(track.reads), cost)

    def forget(self, key: str) -> None:
        """Live query `key` closed."""
        self.tracks.pop(key, None)

    def last_commit(self, key: str) -> dict[str, object] | None:
        """How the last commit weighed for live query `key` ran (`stats`): one of at
        least `TUNING.recompute_min_rows` rows that reached it, with what the model
        had measured then."""
        track = self.tracks.get(key)
        if track is None or track.choice is None:
            return None
        return {**track.choice.as_dict(), "model": track.costs.as_dict()}

    def note(self, live: LiveQuery | None) -> list[str]:
        """`explain`'s line for a live query: how the last commit that reached it ran."""
        track = None if live is None else self.tracks.get(live.key)
        if track is None or track.choice is None:
            return []
        return [f"  live: last commit, {track.choice.describe()}"]

    def _track(self, df: Dataflow, plan: Plan, members: list[LiveQuery], sharing: Sharing) -> Track:
        """The model of `df` (its live queries'): a new one for a dataflow not seen
        (measuring its first build) or rebuilt by anything but a recomputation (new
        rules or a repair: what was measured may not hold)."""
        track = next((self.tracks[q.key] for q in members if q.key in self.tracks), None)
        if track is None or track.flow() is not df:
            names = frozenset(read(self.engine, df))
            track = Track(Costs(), weakref.ref(df), names, fallible(plan))
            track.costs.built(self._base(names), charged(sharing, df, None))
        for q in members:
            self.tracks[q.key] = track
        return track

    def _base(self, names: Iterable[str]) -> int:
        return sum(self.engine.inputs[name].size for name in names if name in self.engine.inputs)

    def _choose(
        self, track: Track, epoch: int, change: int, base: int, after: int, moving: bool
    ) -> Choice:
        """How a weighed commit reaches one dataflow (module docstring)."""
        run, rebuild = track.costs.incremental(change), track.costs.recompute(after)
        fixed = _forced(track, moving)
        if fixed is not None:
            recompute, reason = fixed
        elif base < TUNING.recompute_min_rows:
            recompute, reason = False, "the base is (nearly) empty: running the change computes it"
        elif run is not None and rebuild is not None:
            recompute = run > rebuild
            reason = f"measured: run through ~{run:.3g} s, recompute ~{rebuild:.3g} s"
        else:
            recompute = change >= TUNING.recompute_ratio * base
            sign = ">=" if recompute else "<"
            reason = f"not measured yet: change {sign} {TUNING.recompute_ratio:g}x the base"
        return Choice(epoch, change, base, recompute, reason, run, rebuild)


def _forced(track: Track, moving: bool) -> tuple[bool, str] | None:
    """A choice no measurement may change, with its reason, or None."""
    if remaining() is not None or row_limit() is not None:
        return False, "under a budget (a recomputation could not be stopped)"
    if track.fallible:
        return False, "it calls a functor or range (a failure must refuse the commit)"
    if moving:
        return False, "parameters join or leave its shared dataflow"
    if TUNING.recompute != "measured":
        return TUNING.recompute == "always", f"tuning: recompute {TUNING.recompute}"
    return None


def _net(req: Requests) -> int:
    """The rows `req` adds at most, net of those it retracts."""
    inserted = int(np.count_nonzero(req.inserting))
    return 2 * inserted - len(req)


def groups(lives: Iterable[LiveQuery]) -> list[Group]:
    """The live dataflows of `lives`, each with its plan, its live queries, and whether
    parameters join or leave it (a shared one) at the next epoch."""
    found: dict[int, Group] = {}
    for live in lives:
        tenant = live.tenant
        plan = tenant.plan if isinstance(tenant, Tenant) else live.plan
        if plan is None:
            continue
        moving = isinstance(tenant, Tenant) and bool(tenant.joining or tenant.retiring)
        group = found.setdefault(id(plan.dataflow), (plan.dataflow, plan.plan, [], moving))
        group[2].append(live)
    return list(found.values())


def read(engine: Engine, df: Dataflow) -> set[str]:
    """The inputs `df` reads, and through each view it reads, the inputs the view reads."""
    owner = {id(a): name for name, inp in engine.inputs.items() for a in inp.arrangements.values()}
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
