"""The live queries of a database: each one's life, from its first subscriber to
its last, and its repair after any failure.

Layer: datalog (API). Imports the planner, the checker, `datalog.db.live`,
`datalog.db.tenants`, `datalog.db.definitions` (the program in force) and `differential`.

`LiveQueries` is the one owner of every live query (`datalog.db.live.LiveQuery`):
subscriptions to the same (normalized) query share one; a query with constants
takes a seat in a shared multi-tenant dataflow (`datalog.db.tenants`); a live query's
dataflow is built when its first subscriber comes and dropped with its last. The
commit path (`datalog.db.epochs`) calls it before an epoch (`hold_changes`: the
queries a rule change affects are rebuilt and hold their difference) and after
(`settle`); reads (`answer`) never change anything.

Repair. Whatever fails (a commit aborted by an interrupt, a dataflow dropped by a
failure after its epoch, a delivery stopped half-way, a rebuild during a rule
change, an interrupt during a subscription) leaves `suspect` set, and `repair`
then rebuilds every live query whose dataflow is not running, was built for
another program, or whose delivery stopped half-way, handing each subscriber
exactly what it is missing (`datalog.db.live`'s repair invariant). A repair never
raises into the failure it follows: what fails in it stays suspect, and the next
operation repairs again (and reports what still fails).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import TYPE_CHECKING

from datalog.db.adaptive import Adaptive, difference
from datalog.db.change import Callback, Change
from datalog.db.definitions import ProgramState
from datalog.db.interrupts import deferred
from datalog.db.live import Asked, LiveQuery, Subscription, Watch
from datalog.db.pacing import Clock, Pacing
from datalog.db.tenants import Context, Tenant, Tenants
from datalog.eval.functors import FunctorBinding
from datalog.eval.symbols import SymbolTable
from datalog.lang.checks import CheckedProgram, CheckedQuery, check_query
from datalog.lang.errors import TransactionError
from datalog.lang.parser import parse_query
from datalog.plan.plan import JoinPlan, Options, Share
from datalog.plan.planner import Planner
from differential.batch import Updates, concat
from differential.dataflow import unbudgeted
from differential.engine import Engine
from differential.graph import Dataflow
from differential.inputs import Requests

if TYPE_CHECKING:  # the planner's lowering is loaded when a query is first planned
    from datalog.plan.build import QueryPlan

_log = logging.getLogger("deltalog")


class LiveQueries:
    """Every live query of one database (module docstring)."""

    def __init__(
        self,
        engine: Engine,
        symbols: SymbolTable,
        program: ProgramState,
        functors: Mapping[str, FunctorBinding],
        clock: Clock,
        lock: AbstractContextManager[object],
    ) -> None:
        self.engine, self.symbols, self.program = engine, symbols, program
        self.functors, self.clock, self.lock = functors, clock, lock
        self.by_key: dict[str, LiveQuery] = {}
        self.planner = Planner(engine, symbols, functors)  # the one planner of live queries
        self.tenants = Tenants(Context(engine, symbols, self.planner, self.deliver))
        self.delivering = 0  # >0 while subscribers are being called
        self.suspect = False  # something failed: `repair` looks for what it broke
        # The outputs of the epoch being committed, told once every live query holds
        # its own (`arrive`, `tell_arrived`): None while no commit collects them.
        self.arrived: dict[LiveQuery, tuple[Updates, int]] | None = None
        self.watches: list[Watch] = []  # told of every epoch (`Database.subscribe_why`)
        # Adaptive commits (docs/adr/0053): which dataflows an epoch recomputes.
        self.adaptive = Adaptive(engine)

    # -- subscriptions ----------------------------------------------------------------

    def subscribe(
        self,
        key: str,
        text: str,
        checked: CheckedQuery,
        plan: JoinPlan,
        callback: Callback,
        pacing: Pacing | None,
    ) -> Subscription:
        """A new subscriber of `key`: its live query started if need be, the snapshot
        handed to `callback`. Nothing is left behind if anything fails."""
        self.refuse_in_callback("subscribe")
        self.repair_if_suspect()
        live = self.by_key.get(key) or self._open(key, text, checked, plan)
        sub: Subscription | None = None
        try:
            with deferred():
                sub = Subscription(key, checked.answer_vars, callback, live, pacing=pacing)
                sub.unsubscribe, sub.symbols = self.unsubscribe, self.symbols
                live.subscribers.append(sub)
            if pacing is not None:
                pacing.wake = lambda delay: self._wake_later(sub, delay)
            rows = live.rows(self.symbols)
            with self.calling():
                callback(Change(rows, [1] * len(rows), self.engine.epoch, True, sub.columns))
        except BaseException:  # no orphan: the caller never got a handle to it
            if sub is not None:
                self.unsubscribe(sub)
            elif not live.subscribers:
                self._close(live)
            raise
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with deferred():
            sub.active = False
            live = sub.live
            if live is None or sub not in live.subscribers:
                return
            live.subscribers.remove(sub)
            if not live.subscribers:
                self._close(live)

    def _open(self, key: str, text: str, checked: CheckedQuery, plan: JoinPlan) -> LiveQuery:
        """A live query for `key`, registered: a seat in a shared dataflow if its
        constants make it one, else a dataflow of its own."""
        program = self.program.checked
        shape = self.tenants.shape(text, checked, program)
        if shape is not None:
            snapshot = self.answer_once(checked, key, plan)
            with deferred():
                live = self.tenants.seat(key, shape, checked, program, plan, snapshot)
                self.by_key[key] = live
            return live
        built, first = self._started(checked, key, plan, share="create")
        try:
            with deferred():
                live = LiveQuery.empty(key, checked.answer_types, checked.answer_vars, plan)
                self._attach(live, built, program)
                live.reset(first)
                self.by_key[key] = live
        except BaseException:
            if key not in self.by_key:
                self.engine.retire(built.dataflow)
            raise
        try:
            self.share_views()
        except BaseException:  # not left running without a subscriber
            self._close(live)
            raise
        return live

    def _close(self, live: LiveQuery) -> None:
        """The last subscriber left: the dataflow (or the seat) goes."""
        with deferred():
            if self.by_key.get(live.key) is live:
                del self.by_key[live.key]
                self.adaptive.forget(live.key)
            if live.tenant is not None:
                self.tenants.leave(live)
            elif live.plan is not None:
                self.engine.retire(live.plan.dataflow)

    # -- reads --------------------------------------------------------------------------

    def answer(self, key: str, checked: CheckedQuery, plan: JoinPlan) -> Updates:
        """The current answer of a query: its live state, or a one-shot evaluation."""
        self.repair_if_suspect()
        live = self.by_key.get(key)
        if live is not None:
            return live.answer()
        return self.answer_once(checked, key, plan)

    def answer_once(self, checked: CheckedQuery, key: str, plan: JoinPlan) -> Updates:
        built, answer = self._started(checked, key, plan, one_shot=True)
        self.engine.retire(built.dataflow)
        return answer

    def plan(self, checked: CheckedQuery, key: str, join_plan: JoinPlan) -> QueryPlan:
        """A query's dataflow, built and not started, as a one-shot read plans it."""
        return self.planner.build(
            self.program.checked, checked, key, Options(join_plan, share="reuse")
        )

    def _started(
        self,
        checked: CheckedQuery,
        key: str,
        join_plan: JoinPlan,
        share: Share = "reuse",
        one_shot: bool = False,
    ) -> tuple[QueryPlan, Updates]:
        """A new dataflow for a query, started, and its first answer (not delivered);
        a live one (`share="create"`) reads derived relations from shared views.
        If building or starting fails, the dataflow is dropped."""
        others = frozenset(
            k for q in self.by_key.values() if q.key != key and q.plan for k in q.plan.inlined
        )
        options = Options(join_plan, share=share, others=others, one_shot=one_shot)
        built = self.planner.build(self.program.checked, checked, key, options)
        return built, built.start(self.engine)

    def _attach(self, live: LiveQuery, built: QueryPlan, program: CheckedProgram) -> None:
        built.output.listeners.append(lambda u, e: self.deliver(live, u, e))
        live.plan, live.built_for = built, program

    # -- the commit path's hooks ----------------------------------------------------------

    def refuse_in_callback(self, what: str) -> None:
        """Commits, definitions and subscriptions from inside a subscriber would change
        the database while an epoch is being handed out: they are refused."""
        if self.delivering:
            raise TransactionError(
                f"cannot {what} from inside a subscriber callback: the epoch being "
                "delivered is not over; do it after the call that committed returns"
            )

    @contextmanager
    def calling(self) -> Iterator[None]:
        """While subscribers are called (see `refuse_in_callback`)."""
        self.delivering += 1
        try:
            yield
        finally:
            self.delivering -= 1

    def deliver(self, live: LiveQuery, updates: Updates, epoch: int) -> None:
        """Tell `live`'s subscribers; during a commit, once every live query holds
        the epoch's changes (a callback then reads any live query at that epoch)."""
        if self.arrived is not None:
            prior = self.arrived.get(live)
            both = updates if prior is None else concat([prior[0], updates])
            self.arrived[live] = (both, epoch)
            live.telling = both
            return
        with self.calling():
            live.deliver(updates, epoch, self.symbols)

    def arrive(self) -> None:
        """The next outputs belong to an epoch being committed: hold them."""
        self.arrived = {}

    def tell_arrived(self) -> None:
        """Tell what the epoch's outputs brought (each live query's answer includes
        its change until it is told); every one is told whatever another raises."""
        arrived, self.arrived = self.arrived or {}, None
        failure: BaseException | None = None
        for live, (updates, epoch) in arrived.items():
            try:
                self.deliver(live, updates, epoch)
            except BaseException as error:
                failure = failure or error
            finally:
                live.telling = None
        if failure is not None:
            raise failure

    def before_epoch(self, requests: Mapping[str, Requests]) -> None:
        """Before an epoch that asks `requests` and installs no rules: the adaptive
        choices, and each watch's: what it keeps that the epoch cannot reach rests."""
        self.engine.wake()
        self.adaptive.adapt(self.by_key.values(), requests)
        self.engine.rest([df for w in self.watches for df in w.before(requests)])

    def drop_arrived(self) -> None:
        """The epoch did not happen: what its outputs brought is forgotten (the
        dataflows retired to be recomputed are rebuilt by the repair that follows)."""
        for live in self.arrived or {}:
            live.telling = None
        self.arrived = None
        self.adaptive.recomputing = []
        self.engine.wake()

    def recompute(self, epoch: int) -> None:
        """The epoch happened: rebuild what `adaptive.adapt` retired, over the new base,
        and hand each of its live queries the difference (held with the epoch's other
        changes). What fails stays broken: the repair rebuilds it."""
        lives, self.adaptive.recomputing = self.adaptive.recomputing, []
        if not lives:
            return
        answers, failure = self._rebuild_each(lives, stop=False)
        for live, new in answers.items():
            try:
                self.deliver(live, difference(live.answer(), new, epoch), epoch)
            except BaseException as error:
                failure = failure or error
        if failure is not None:
            raise failure

    def hold_changes(self, heads: frozenset[str]) -> None:
        """The program changed the rules of `heads` (installed already): rebuild the
        live queries that read them, each holding its difference for the epoch."""
        if not heads:
            return
        affected = [q for q in self.by_key.values() if heads & self.program.reads(q.query_text)]
        for live, new in self.rebuild(affected).items():
            live.held = difference(live.answer(), new, self.engine.epoch)

    def settle(self, epoch: int, new_epoch: bool, touched: frozenset[str] = frozenset(),
               requests: Asked = None) -> BaseException | None:  # fmt: skip
        """After a write happened (a new `epoch`, or none; `touched`: the relations it
        wrote or gave new rules; `requests`: the rows it asked to write, if known):
        every step runs whatever an earlier one raised; the first failure is returned,
        to be raised last."""
        failure: BaseException | None = None
        steps: list[Callable[[], object]] = [
            self.engine.wake,
            (lambda: self.recompute(epoch)) if new_epoch else (lambda: None),
            self.tell_arrived,
            (lambda: self.tenants.committed(epoch)) if new_epoch else (lambda: None),
            self.repair_if_suspect,
            lambda: self._deliver_held(epoch),
            self.share_views,
            lambda: self.tick(epoch),
            lambda: self._tell_watches(epoch, touched, requests),
            self.repair_if_suspect,  # what a step above left half-way, at this epoch
        ]
        for step in steps:
            try:
                step()
            except BaseException as error:
                self.suspect = True
                failure = failure or error
        return failure

    def _deliver_held(self, epoch: int) -> None:
        """Rule changes reach the live queries no output of this epoch reached (each
        of them, whatever one of their subscribers raises)."""
        failure: BaseException | None = None
        for live in [q for q in self.by_key.values() if q.held is not None]:
            try:
                self.deliver(live, live.state.empty(), epoch)
            except BaseException as error:
                failure = failure or error
        if failure is not None:
            raise failure

    def tick(self, epoch: int) -> None:
        """Paced subscribers get what is due at `epoch`."""
        failure: BaseException | None = None
        with self.calling():
            for live in list(self.by_key.values()):
                if any(s.pacing is not None for s in live.subscribers):
                    failure = live.tick(epoch) or failure
        if failure is not None:
            raise failure

    def _tell_watches(self, epoch: int, touched: frozenset[str], requests: Asked) -> None:
        """Each watch sees the epoch, whatever another one raises (each keeps its own
        errors; what is raised here is a `BaseException`, raised last)."""
        failure: BaseException | None = None
        for watch in list(self.watches):
            try:
                watch.at_epoch(epoch, touched, requests)
            except BaseException as error:
                failure = failure or error
        if failure is not None:
            raise failure

    def _wake_later(self, sub: Subscription, delay: float) -> None:
        """A paced subscription asks to be woken (on a timer: under the lock)."""

        def woken() -> None:
            with self.lock:
                live = sub.live
                if sub.active and live is not None and sub.pacing is not None:
                    with self.calling():
                        failure = live.tick(self.engine.epoch, woken=True)
                    if failure is not None:
                        raise failure

        self.clock.call_later(delay, woken)

    # -- rebuilds and repair --------------------------------------------------------------

    def rebuild(self, lives: Collection[LiveQuery]) -> dict[LiveQuery, Updates]:
        """New dataflows for `lives` over the program in force (a shared dataflow once
        for all its seats): their new answers, not delivered. A live query whose
        rebuild fails keeps its old dataflow, and the failure is raised at once."""
        answers, failure = self._rebuild_each(lives, stop=True)
        if failure is not None:
            raise failure
        return answers

    def _rebuild_each(
        self, lives: Collection[LiveQuery], stop: bool
    ) -> tuple[dict[LiveQuery, Updates], BaseException | None]:
        """`rebuild`, past a failure unless `stop`: what was rebuilt, the first failure."""
        program = self.program.checked
        tenants = {id(q.tenant): q.tenant for q in lives if isinstance(q.tenant, Tenant)}
        replaced: list[Dataflow] = []
        jobs: list[Callable[[], dict[LiveQuery, Updates]]] = [
            *(partial(self._rebuild_own, q, program, replaced) for q in lives if q.tenant is None),
            *(partial(self.tenants.rebuild, t, program) for t in tenants.values()),
        ]
        answers: dict[LiveQuery, Updates] = {}
        failure: BaseException | None = None
        for job in jobs:
            try:
                answers.update(job())
                self.engine.retire(*replaced)  # (all marked before any is dropped)
                replaced.clear()
            except BaseException as error:
                failure = failure or error  # (a retirement cut short finishes later)
                if stop:
                    break
        return answers, failure

    def _rebuild_own(
        self, live: LiveQuery, program: CheckedProgram, replaced: list[Dataflow]
    ) -> dict[LiveQuery, Updates]:
        """`live` on a new dataflow; the old one goes to `replaced` (retired once
        `live` is on the new one, or a failed drop would orphan the new one)."""
        checked = check_query(parse_query(live.query_text), program.schema)
        built, first = self._started(checked, live.key, live.join_plan, share="create")
        if live.plan is not None:
            replaced.append(live.plan.dataflow)
        self._attach(live, built, program)
        return {live: first}

    def repair_if_suspect(self) -> None:
        if self.suspect:
            self.repair()

    def repair(self) -> None:
        """Rebuild what a failure broke and hand each subscriber what it missed, at
        the current epoch (module docstring). Every broken query is tried; what still
        fails is raised at the end (and stays suspect)."""
        with unbudgeted():  # a repair: it must finish whatever budget the failure had
            self.suspect = False
            broken = self._broken()
            if not broken:
                return
            for live in broken:
                live.held = None  # the rebuilt answer holds any rule change too
            answers, failure = self._rebuild_each(broken, stop=False)
            self.suspect = failure is not None
            epoch = self.engine.epoch
            for live, new in answers.items():
                try:
                    self._resync(live, new, epoch)
                except BaseException as error:
                    self.suspect = True
                    failure = failure or error
            if failure is not None:
                raise failure
            self.share_views()

    def _resync(self, live: LiveQuery, new: Updates, epoch: int) -> None:
        """`live`'s subscribers get what they lack of its new answer `new`."""
        if live.stage == "told":  # they hold the new answer already; `state` may not
            live.reset(new)
            return
        live.stage = "idle"
        self.deliver(live, difference(live.answer(), new, epoch), epoch)

    def _broken(self) -> list[LiveQuery]:
        # (a dataflow whose retirement an interrupt cut short is going: adaptive
        # commits retire a live query's dataflow before the epoch, docs/adr/0053)
        running = set(map(id, self.engine.dataflows)) - set(map(id, self.engine.retiring))
        current = self.program.checked
        return [
            q
            for q in self.by_key.values()
            if q.plan is None
            or id(q.plan.dataflow) not in running
            or not q.sound
            or (q.tenant.built_for if q.tenant is not None else q.built_for) is not current
        ]

    def mark_current(self) -> None:
        """A program change happened without touching these dataflows: they are the
        new program's too (their relations' rules did not change)."""
        current = self.program.checked
        for live in self.by_key.values():
            if live.tenant is not None:
                live.tenant.built_for = current
            else:
                live.built_for = current

    def share_views(self) -> None:
        """Rebuild the live queries that compute a relation a view now holds, to read
        the view instead (docs/adr/0026); their answers do not change."""
        with unbudgeted():
            for _ in range(len(self.by_key)):
                stale = [
                    q
                    for q in self.by_key.values()
                    if q.tenant is None and q.plan and any(map(self.engine.view, q.plan.inlined))
                ]
                if not stale:
                    return
                self.rebuild(stale)
