"""The public API: `Database`, transactions, queries and subscriptions.

Layer: datalog (API). Imports the planner, the language and `differential`.

`define` and `redefine` check the whole new program and only then change
anything, at one new epoch (`datalog.definitions`). Queries
and subscriptions synthesize dataflows lazily; subscriptions to the same
(normalized) query share one live dataflow, torn down with its last
subscriber. Commits are atomic: a transaction is validated completely before
any of it is applied, and subscribers see each epoch's changes at once.
One writer and many readers may use a database from several threads: every
entry point takes the database's lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection, Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from datalog import definitions, durable, system
from datalog import history as time_travel
from datalog.ast import Program, Query
from datalog.checks import CheckedProgram, check_program, check_query
from datalog.definitions import Definition
from datalog.dot import explain_graph
from datalog.errors import (
    BudgetExceeded,
    TransactionError,
    UnsupportedError,
)
from datalog.explain import explain_text
from datalog.functors import FunctorBinding, binding, bindings
from datalog.introspection import Introspection
from datalog.live import (
    Callback,
    Change,
    LiveQuery,
    Subscription,
    call_later,
    deliver,
    pacing_of,
    tick,
)
from datalog.parser import parse_query
from datalog.plan.body import UNIT
from datalog.plan.build import Planner, QueryPlan
from datalog.plan.views import Share
from datalog.plan.wcoj import JoinPlan
from datalog.pretty import format_query
from datalog.rows import to_rows
from datalog.storage.store import Store
from datalog.symbols import SymbolTable
from datalog.tenants import Tenants
from datalog.transaction import Transaction
from differential.batch import Updates, concat, consolidate
from differential.dataflow import Interrupted, interrupt, unbudgeted
from differential.dataflow import budget as dataflow_budget
from differential.engine import Engine
from differential.inputs import Requests
from differential.time import column
from differential.trace.spine import Spine

if TYPE_CHECKING:
    from datalog.provenance import Derivation


class Database:
    """An in-memory incremental Datalog database."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        sync: bool = True,
        checkpoint_every: int = 1000,
        functors: Mapping[str, object] | None = None,
        history: int | None = time_travel.DEFAULT_HISTORY,
    ) -> None:
        """An empty database in memory, or the durable one in directory `path`.

        `functors` binds `.functor`s to Python functions: `{"f": fn}`, or
        `{"f": datalog.vectorized(fn)}` (see `register_functor`).

        With a path, every definition and committed transaction is written to the
        log (fsynced unless `sync=False`) before it is applied, and a checkpoint
        is taken once the log holds `checkpoint_every` records or outgrows the last
        snapshot; opening loads the newest snapshot and replays the log after it.
        The last `history` epochs (None: all) stay readable by `as_of` (`datalog.history`).
        """
        self.store: Store | None = None
        self.checkpoint_every = checkpoint_every
        self.definitions: list[Definition] = []  # every applied program text, in order
        self._facts: set[tuple[object, ...]] = set()  # every fact defined so far
        self._quiet = 0  # >0 while replaying the log: nothing is logged
        self._delivering = 0  # >0 while subscribers are being called
        self._paced: list[Subscription] = []  # subscriptions with a granularity
        self.engine = Engine(history=time_travel.history_setting(history))
        self.symbols = SymbolTable()
        self.program = Program(decls=system.DECLS)  # the reserved deltalog.* relations
        self.checked: CheckedProgram = check_program(self.program)
        self.live: dict[str, LiveQuery] = {}
        self.tenants = Tenants(self)  # shared dataflows of queries differing in constants
        self.lock = threading.RLock()
        self.functors: dict[str, FunctorBinding] = bindings(functors)
        self.engine.create_input(UNIT, [np.dtype(np.int64)])
        self.engine.commit({UNIT: Requests((np.zeros(1, np.int64),), np.ones(1, bool))})
        self.programs = time_travel.ProgramVersions(self.engine.epoch, self.checked)
        self.introspection = Introspection(self)
        if path is not None:
            self.store = durable.open_store(self, path, sync)

    # -- program -----------------------------------------------------------------

    def define(self, text: str) -> None:
        """Add declarations, facts and rules; all-or-nothing. New rules take an epoch
        of their own (shared with the facts), whether or not an answer changes."""
        with self.lock:
            definitions.define(self, text, facts=True)
            self.introspection.changed()

    def redefine(self, relation: str, text: str) -> int:
        """Replace every rule of `relation` by the rules of `text` (none: `""`) as one
        new epoch, returned; live answers change by exactly old-to-new at that epoch.
        `text` holds only rules for `relation` (facts are data: they stay)."""
        with self.lock:
            with self.transaction() as tx:
                tx.redefine(relation, text)
            return self.engine.epoch

    def register_functor(self, name: str, function: object, vectorized: bool = False) -> None:
        """Bind `.functor name(...)` to a pure `function`: called per distinct argument
        tuple with Python values, or `vectorized` per batch with numpy columns
        (symbols as object arrays of str); see `datalog.functor_calls`. Dataflows
        built from now on use it; live ones keep the function they were built with."""
        with self.lock:
            key, found = binding(name, function, vectorized)
            self.functors[key] = found

    # -- transactions ------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One atomic epoch: commits on normal exit, discards on an exception."""
        with self.lock:
            tx = Transaction(self)
            try:
                yield tx
            except BaseException:
                tx.discard()  # (its symbols)
                raise
            tx.commit()

    def insert(self, relation: str, rows: object) -> int:
        with self.transaction() as tx:
            tx.insert(relation, rows)
        return self.engine.epoch

    def retract(self, relation: str, rows: object) -> int:
        with self.transaction() as tx:
            tx.retract(relation, rows)
        return self.engine.epoch

    @property
    def epoch(self) -> int:
        return self.engine.epoch

    # -- queries -----------------------------------------------------------------

    def query(self, text: str, plan: JoinPlan = "auto", as_of: int | None = None) -> list[Any]:
        """The current answer of a query, e.g. `reach(1, y)`: a list of rows.

        `plan` picks the join strategy: `auto` (delta queries with worst-case
        optimal joins for bodies of three or more atoms), `wcoj` or `binary`.
        `as_of=E`: the answer at the end of epoch E, by its rules (`datalog.history`).
        """
        with self.lock, self._read_only(text):
            updates, checked = self._answer(text, plan, as_of)
            return to_rows(updates.columns, checked.answer_types, self.symbols, len(updates))

    def query_columns(self, text: str, plan: JoinPlan = "auto", as_of: int | None = None) -> Any:
        """The current answer (or, with `as_of`, a past one) as numpy columns by answer
        variable (no Python rows). Symbol columns come back as arrays of strings."""
        with self.lock, self._read_only(text):
            updates, checked = self._answer(text, plan, as_of)
            named = zip(checked.answer_vars, updates.columns, checked.answer_types, strict=True)
            return {v: self.symbols.strings(c) if k == "symbol" else c for v, c, k in named}

    def query_arrow(self, text: str, plan: JoinPlan = "auto", as_of: int | None = None) -> Any:
        """The answer (`as_of`: a past one) as a `pyarrow.Table` whose columns are named
        after the query's variables (symbols as strings); `.to_pandas()` from there."""
        import pyarrow as pa

        columns = self.query_columns(text, plan, as_of)
        return pa.table({name: pa.array(column) for name, column in columns.items()})

    @contextmanager
    def _read_only(self, text: str) -> Iterator[None]:
        """Symbols a one-shot query interns (its constants, functor results) are
        forgotten when it is done: nothing stored refers to them, and a stream of
        queries with fresh constants would otherwise grow the table forever. (The
        `deltalog.*` relations it reads are refreshed first: they are stored.)"""
        self.introspection.prepare(text)
        mark = len(self.symbols)
        try:
            yield
        finally:
            self.symbols.forget_from(mark)

    def _answer(self, text: str, plan: JoinPlan, as_of: int | None) -> tuple[Updates, Any]:
        """The consolidated answer and the checked query: live, one-shot or of the past."""
        with self.lock:
            past = time_travel.past_epoch(self, as_of)
            if past is not None:
                return time_travel.answer_as_of(self, text, plan, past)
            key, checked = self._check_query(text, plan)
            live = self.live.get(key)
            if live is not None:
                return live.state.accumulate(None), checked
            built, answer = self._started(checked, key, plan, one_shot=True)
            self.engine.drop(built.dataflow)
            return answer, checked

    def subscribe(
        self,
        text: str,
        callback: Callback,
        plan: JoinPlan = "auto",
        granularity: dict[str, float] | None = None,
    ) -> Subscription:
        """Call `callback` with the current answer, then with every epoch's changes, or
        (with `granularity={"epochs": N}` or `{"seconds": S}`) with the changes
        consolidated at most every N epochs or S seconds, as the server paces them."""
        with self.lock:
            self._refuse_in_callback("subscribe")
            pacing_of(granularity, self.engine.epoch)  # a bad granularity changes nothing
            self.introspection.prepare(text)
            key, checked = self._check_query(text, plan)
            live = (
                self.live.get(key)
                or self.tenants.join(key, text, checked, plan)
                or self._start_live(key, checked, plan)
            )
            pacing = pacing_of(granularity, self.engine.epoch)  # a new tenant took an epoch
            sub = Subscription(key, checked.answer_vars, callback, live, pacing=pacing)
            sub.unsubscribe, sub.symbols = self.unsubscribe, self.symbols
            live.subscribers.append(sub)
            live.arriving = 0
            if pacing is not None:
                self._paced.append(sub)
                pacing.wake = lambda delay: call_later(delay, lambda: self._tick(None, [sub]))
            state = live.state.accumulate(None)
            rows = to_rows(state.columns, live.types, self.symbols, len(state))
            self._delivering += 1
            try:
                callback(Change(rows, [1] * len(rows), self.engine.epoch, True, sub.columns))
            except BaseException:  # no orphan: the caller never got a handle to it
                self.unsubscribe(sub)
                raise
            finally:
                self._delivering -= 1
            self.introspection.changed()
            return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self.lock:
            live = sub.live
            sub.active = False
            if sub in self._paced:
                self._paced.remove(sub)
            if live is None or sub not in live.subscribers:
                return
            live.subscribers.remove(sub)
            if not live.subscribers and live.tenant is not None:
                self.tenants.leave(live)
            elif not live.subscribers:
                self.engine.drop(live.plan.dataflow)
                del self.live[live.key]
            self.introspection.changed()

    def explain(self, text: str, plan: JoinPlan = "auto", format: str = "text") -> str:
        """The strata, rule plans and shared arrangements of a query ("dot": a graph)."""
        with self.lock, self._read_only(text):
            key, checked = self._check_query(text, plan)
            built = self._planner(plan).build(checked, key)
            self.engine.drop(built.dataflow)
            if format != "text":  # a Graphviz digraph, or an error naming the formats
                return explain_graph(format, key, built.dataflow, checked.answer_vars)
            served, pragmas = self.tenants.note(key), self.program.pragmas
            return explain_text(key, checked.answer_vars, built, served, pragmas)

    def why(self, fact: str, as_of: int | None = None) -> Derivation:
        """Why the ground `fact` (`"reach(1, 4)"`) holds now, or at the end of epoch
        `as_of`: a proof of minimal height (`datalog.provenance`; computed on demand
        from the base relations of that epoch)."""
        from datalog.provenance import why

        with self.lock:
            self.introspection.prepare(fact)
            return why(self, fact, as_of)

    def stats(self) -> dict[str, object]:
        with self.lock:
            stats = self.engine.stats()
            stats["queries"] = {
                k: {
                    "subscribers": len(v.subscribers),
                    "answer_tuples": len(v.state.accumulate(None)),
                }
                for k, v in self.live.items()
            }
            return stats

    # -- internals ---------------------------------------------------------------

    def _check_query(self, text: str, plan: JoinPlan = "auto") -> tuple[str, Any]:
        """The query checked, and its key: normalized text (and plan, unless `auto`)."""
        if plan not in ("auto", "wcoj", "binary"):
            raise UnsupportedError(f"unknown plan {plan!r}: use 'auto', 'wcoj' or 'binary'")
        parsed: Query = parse_query(text)
        checked = check_query(parsed, self.checked.schema)
        key = format_query(replace(parsed, source=""))
        return (key if plan == "auto" else f"{key} [plan={plan}]"), checked

    def _start_live(self, key: str, checked: Any, join_plan: JoinPlan) -> LiveQuery:
        """Build and start a query's dataflow, and register it only once it runs."""
        plan, first = self._started(checked, key, join_plan, share="create")
        dtypes = [np.dtype(_dtype(t)) for t in checked.answer_types]
        live = LiveQuery(key, plan, checked.answer_types, Spine(len(dtypes), dtypes, 1))
        live.join_plan = join_plan
        self._deliver(live, first, self.engine.epoch)  # no subscriber yet: the state only
        plan.output.listeners.append(lambda u, e: self._deliver(live, u, e))
        self.live[key] = live
        try:
            self._share_views()
        except BaseException:  # not left running without a subscriber
            self.engine.drop(live.plan.dataflow)
            del self.live[key]
            raise
        return live

    def _started(
        self,
        checked: Any,
        key: str,
        join_plan: JoinPlan,
        share: Share = "reuse",
        one_shot: bool = False,
    ) -> tuple[QueryPlan, Updates]:
        """A new dataflow for a query, started, and its first answer (not delivered);
        a live one (`share="create"`) reads derived relations from shared views.
        `one_shot`: it is dropped after this answer (the plan may use that).

        If building or starting fails, the dataflow is dropped: no reader is left
        holding back the compaction of shared arrangements.
        """
        others = {k for q in self.live.values() if q.key != key for k in q.plan.inlined}
        plan = self._planner(join_plan, share, others, one_shot).build(checked, key)
        return plan, plan.start(self.engine)

    def _planner(
        self,
        join_plan: JoinPlan,
        share: Share = "reuse",
        others: Collection[Hashable] = (),
        one_shot: bool = False,
    ) -> Planner:
        return Planner(self.engine, self.checked, self.symbols, join_plan,
                       functors=self.functors, share=share, others=others,
                       one_shot=one_shot)  # fmt: skip

    def _share_views(self) -> None:
        """Rebuild the live queries that compute a relation a view now holds, to read
        the view instead (docs/adr/0026); their answers do not change, and one whose
        rebuild fails keeps its dataflow."""
        for _ in range(len(self.live)):
            stale = [q for q in self.live.values() if any(map(self.engine.view, q.plan.inlined))]
            for live in stale:
                self._rebuild(live)
            if not stale:
                return

    def _restart_live(self) -> None:
        """Rebuild the live dataflows a failed commit dropped: all, if it aborted (the
        answers are as before: nothing to deliver); those that failed, if it failed
        after its epoch (`Engine._finish`): they get what they missed, at that epoch."""
        with unbudgeted():  # a repair: it must finish whatever budget the commit had
            running = self.engine.dataflows  # (tenants' members share one: found first)
            for live in [q for q in self.live.values() if q.plan.dataflow not in running]:
                live.held = None  # the rebuilt answer holds any rule change too
                missed = self._rebuild(live)
                if len(missed):
                    self._deliver(live, missed, self.engine.epoch)
            self._share_views()

    def _rebuild(self, live: LiveQuery) -> Updates:
        """Replace a live query's dataflow (its rules changed, or it may read views now):
        the difference between the new answer and the one its subscribers hold (not
        delivered). If building the new one fails, the old one stays."""
        if live.tenant is not None:
            return self.tenants.rebuild(live)
        old = live.state.accumulate(None)
        _, checked = self._check_query(live.query_text)
        plan, first = self._started(checked, live.key, live.join_plan, share="create")
        self.engine.drop(live.plan.dataflow)
        plan.output.listeners.append(lambda u, e: self._deliver(live, u, e))
        live.plan = plan
        epoch = self.engine.epoch
        parts = [old.negate(), first]
        return consolidate(concat([p.with_times(column((epoch,), len(p))) for p in parts]))

    @contextmanager
    def budget(self, seconds: float | None) -> Iterator[None]:
        """Within the block, a query, subscription, definition or commit running past
        `seconds` stops between two steps of its dataflows and raises `BudgetExceeded`;
        like any failure, it leaves the database as it was."""
        try:
            with dataflow_budget(seconds):
                yield
        except Interrupted as stop:
            raise BudgetExceeded(str(stop)) from None

    def interrupt(self) -> None:
        """Stop whatever computation runs now, and every later one (shutting down)."""
        interrupt()

    def checkpoint(self) -> None:
        """Snapshot the base relations and the program now, and drop the log they cover."""
        with self.lock:
            if self.store is None:
                raise TransactionError("checkpoint needs a durable database: Database(path)")
            durable.checkpoint(self)

    def _checkpoint_if_due(self) -> None:
        """Checkpoint once the log has grown enough; called before a commit writes, so
        the commit that grew the log returns without waiting for the snapshot."""
        store = self.store
        if store is not None and not self._quiet and store.wants_checkpoint(self.checkpoint_every):
            durable.checkpoint(self)

    def close(self) -> None:
        """Close the store and release its lock (the database stays usable in memory)."""
        if self.store is not None:
            self.store.close()
            self.store = None

    def __enter__(self) -> Database:
        return self

    def __repr__(self) -> str:
        where = f" at {self.store.dir}" if self.store is not None else ""
        relations = sum(1 for name in self.checked.schema if not name.startswith("deltalog."))
        return (
            f"<Database{where}: epoch {self.engine.epoch}, {relations} relations, "
            f"{len(self.live)} live queries>"
        )

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tick(self, epoch: int | None, woken: list[Subscription] | None = None) -> None:
        """After a commit: paced subscribers get what is due (only they are visited:
        a commit costs nothing more for subscriptions without a granularity). With
        `woken`, a timer (`Pacing.wake`) calls: those get what is due now."""
        with self.lock:
            paced = self._paced if woken is None else woken
            if paced:
                self._delivering += 1
                try:
                    at = self.engine.epoch if epoch is None else epoch
                    tick(list(paced), at, woken is not None)
                finally:
                    self._delivering -= 1
            if woken is None:  # what callbacks changed in `deltalog.*` is published
                self.introspection.after_commit()

    def _refuse_in_callback(self, what: str) -> None:
        """Commits, definitions and subscriptions from inside a subscriber would change
        the database while an epoch is being handed out: they are refused."""
        if self._delivering:
            raise TransactionError(
                f"cannot {what} from inside a subscriber callback: the epoch being "
                "delivered is not over; do it after the call that committed returns"
            )

    def _deliver(self, live: LiveQuery, updates: Updates, epoch: int) -> None:
        self._delivering += 1
        try:
            deliver(live, updates, epoch, self.symbols)
        finally:
            self._delivering -= 1


def _dtype(kind: str) -> type[np.generic]:
    from datalog.expressions import DTYPES

    return DTYPES[kind]
