"""The public API: `Database`, transactions, queries and subscriptions.

Layer: datalog (API). Imports the planner, the language and `differential`.

`define` checks the whole program (old and new text together) and only then
changes anything; facts it contains are committed as one transaction. Queries
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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from datalog import durable, system
from datalog.ast import ColumnType, Program, Query
from datalog.checks import CheckedProgram, check_program, check_query
from datalog.errors import (
    BudgetExceeded,
    TransactionError,
    UnsupportedError,
)
from datalog.functors import FunctorBinding, binding, bindings
from datalog.introspection import Introspection
from datalog.live import Callback, Change, LiveQuery, Subscription, deliver, pacing_of, tick
from datalog.parser import parse_program, parse_query
from datalog.plan.body import UNIT
from datalog.plan.build import Planner, QueryPlan
from datalog.plan.wcoj import JoinPlan
from datalog.pretty import format_query
from datalog.rows import to_rows
from datalog.storage.store import Store
from datalog.symbols import SymbolTable
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
    ) -> None:
        """An empty database in memory, or the durable one in directory `path`.

        `functors` binds `.functor`s to Python functions: `{"f": fn}`, or
        `{"f": datalog.vectorized(fn)}` (see `register_functor`).

        With a path, every definition and committed transaction is written to the
        log (fsynced unless `sync=False`) before it is applied, and a checkpoint
        is taken once the log holds `checkpoint_every` records or outgrows the last
        snapshot; opening loads the newest snapshot and replays the log after it.
        """
        self.store: Store | None = None
        self.checkpoint_every = checkpoint_every
        self.definitions: list[str] = []  # every applied `define` text, in order
        self._facts: set[tuple[object, ...]] = set()  # every fact defined so far
        self._quiet = 0  # >0 while replaying or committing a define's facts: no log
        self._delivering = 0  # >0 while subscribers are being called
        self._paced: list[Subscription] = []  # subscriptions with a granularity
        self.engine = Engine()
        self.symbols = SymbolTable()
        self.program = Program(decls=system.DECLS)  # the reserved deltalog.* relations
        self.checked: CheckedProgram = check_program(self.program)
        self.live: dict[str, LiveQuery] = {}
        self.lock = threading.RLock()
        self.functors: dict[str, FunctorBinding] = bindings(functors)
        self.engine.create_input(UNIT, [np.dtype(np.int64)])
        self.engine.commit({UNIT: Requests((np.zeros(1, np.int64),), np.ones(1, bool))})
        self.introspection = Introspection(self)
        if path is not None:
            self.store = durable.open_store(self, path, sync)

    # -- program -----------------------------------------------------------------

    def define(self, text: str) -> None:
        """Add declarations, facts and rules; all-or-nothing."""
        with self.lock:
            self._define(text, facts=True)

    def _define(self, text: str, facts: bool) -> None:
        """`define`; without `facts`, its facts are not inserted (a snapshot holds them)."""
        with self.lock:
            self._refuse_in_callback("define")
            parsed = parse_program(text)
            merged = Program(
                decls=self.program.decls + parsed.decls,
                types=self.program.types + parsed.types,
                directives=self.program.directives + parsed.directives,
                rules=self.program.rules + parsed.rules,
                source=text,
                pragmas=self.program.pragmas + parsed.pragmas,
                functors=self.program.functors + parsed.functors,
                subsumptions=self.program.subsumptions + parsed.subsumptions,
            )
            checked = check_program(merged)
            new_facts = [f for f in checked.facts if _fact_key(f) not in self._facts]
            new_facts = new_facts if facts else []
            self._checkpoint_if_due()
            offset = durable.log_define(self, text)
            try:
                self._apply_define(text, parsed, merged, checked, new_facts, own_epoch=facts)
            except BaseException:
                durable.undo(self, offset)
                raise
            self.introspection.changed()

    def _apply_define(
        self,
        text: str,
        parsed: Program,
        merged: Program,
        checked: CheckedProgram,
        facts: list[Any],
        own_epoch: bool,
    ) -> None:
        """Switch to the merged program. New rules are an epoch of their own (with the
        definition's facts, if any): the live queries they change get one change
        labelled with that new epoch. On any failure nothing changes."""
        with self.lock:
            before = self.program, self.checked, len(self.definitions)
            # Facts live in their relations: the program keeps only rules, so a later
            # definition re-checks the rules, not every fact ever defined.
            self.program = replace(merged, rules=tuple(r for r in merged.rules if r.body))
            self.checked = checked
            self.definitions.append(text)
            affected: list[LiveQuery] = []
            try:
                self._create_inputs(checked)
                affected = self._affected(parsed)
                for live in affected:  # the changes new rules cause wait for their epoch
                    live.held = self._rebuild(live)
                rules = any(rule.body for rule in parsed.rules) or bool(parsed.subsumptions)
                self._insert_facts(facts, new_epoch=rules and own_epoch)
            except BaseException:  # a fact out of its type's range, say: nothing changes
                self.program, self.checked = before[0], before[1]
                del self.definitions[before[2] :]
                with unbudgeted():
                    for live in affected:
                        live.held = None
                        self._rebuild(live)
                raise
            self._facts.update(_fact_key(f) for f in checked.facts)
            for live in affected:  # a held change that no fact's change carried along
                if live.held is not None:
                    self._deliver(live, live.state.empty(), self.engine.epoch)

    def _create_inputs(self, checked: CheckedProgram) -> None:
        for info in checked.schema.relations.values():
            if info.name not in self.engine.inputs:
                # a nullary relation is stored with one constant column
                dtypes = [np.dtype(_dtype(t)) for t in info.types] or [np.dtype(np.int64)]
                self.engine.create_input(info.name, dtypes, info.semantics)

    def _insert_facts(self, facts: list[Any], new_epoch: bool) -> None:
        """Commit a definition's facts (and a new epoch even without any, if asked)."""
        self._quiet += 1
        try:
            if not facts and new_epoch:
                self.engine.commit({})
            elif facts:
                with self.transaction() as tx:
                    for fact in facts:
                        tx.insert(fact.head.name, [tuple(a.value for a in fact.head.args)])
        finally:
            self._quiet -= 1

    def _affected(self, parsed: Program) -> list[LiveQuery]:
        """The live queries that read relations the new rules define."""
        heads = {r.head.name for r in parsed.rules if r.body}
        heads |= {s.dominated.name for s in parsed.subsumptions}
        return [live for live in self.live.values() if heads & self._reads(live.query_text)]

    def _reads(self, query_text: str) -> set[str]:
        from datalog.checks import dependencies
        from datalog.plan.build import _relations_read

        checked = check_query(parse_query(query_text), self.checked.schema)
        return dependencies(self.checked, _relations_read(checked))

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
            yield tx
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

    def query(self, text: str, plan: JoinPlan = "auto") -> list[tuple[Any, ...]]:
        """The current answer of a query, e.g. `reach(1, y)`: a list of rows.

        `plan` picks the join strategy: `auto` (delta queries with worst-case
        optimal joins for bodies of three or more atoms), `wcoj` or `binary`.
        """
        with self.lock, self._read_only(text):
            updates, types = self._answer(text, plan)
            return to_rows(updates.columns, types, self.symbols, len(updates))

    def query_columns(self, text: str, plan: JoinPlan = "auto") -> dict[str, np.ndarray]:
        """The current answer as numpy columns by answer variable (no Python rows).

        Symbol columns come back as arrays of strings (dtype object).
        """
        with self.lock, self._read_only(text):
            updates, types = self._answer(text, plan)
            _, checked = self._check_query(text, plan)
            return {
                var: self.symbols.strings(col) if kind == "symbol" else col
                for var, col, kind in zip(checked.answer_vars, updates.columns, types, strict=True)
            }

    def query_arrow(self, text: str, plan: JoinPlan = "auto") -> Any:
        """The current answer as a `pyarrow.Table` whose columns are named after the
        query's variables (symbols as strings); `.to_pandas()` or
        `polars.from_arrow(...)` from there."""
        import pyarrow as pa

        columns = self.query_columns(text, plan)
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

    def _answer(self, text: str, plan: JoinPlan) -> tuple[Updates, tuple[ColumnType, ...]]:
        """The consolidated answer of a query now, from its live dataflow or a one-shot one."""
        with self.lock:
            key, checked = self._check_query(text, plan)
            live = self.live.get(key)
            if live is not None:
                return live.state.accumulate(None), live.types
            built, answer = self._started(checked, key, plan)
            self.engine.drop(built.dataflow)
            return answer, checked.answer_types

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
            pacing = pacing_of(granularity, self.engine.epoch)
            self.introspection.prepare(text)
            key, checked = self._check_query(text, plan)
            live = self.live.get(key) or self._start_live(key, checked, plan)
            sub = Subscription(key, checked.answer_vars, callback, live, pacing=pacing)
            sub.unsubscribe, sub.symbols = self.unsubscribe, self.symbols
            live.subscribers.append(sub)
            if pacing is not None:
                self._paced.append(sub)
            state = live.state.accumulate(None)
            rows = to_rows(state.columns, live.types, self.symbols, len(state))
            self._delivering += 1
            try:
                callback(Change(rows, [1] * len(rows), self.engine.epoch, snapshot=True))
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
            if not live.subscribers:
                self.engine.drop(live.plan.dataflow)
                del self.live[live.key]
            self.introspection.changed()

    def explain(self, text: str, plan: JoinPlan = "auto") -> str:
        """The strata, per-rule plans and shared arrangements a query would use."""
        with self.lock, self._read_only(text):
            key, checked = self._check_query(text, plan)
            built = self._planner(plan).build(checked, key)
            self.engine.drop(built.dataflow)
            operators = built.dataflow.describe()
            lines = [f"query {key}", f"answer columns: {', '.join(checked.answer_vars)}"]
            lines += [f"  {n}" for n in built.notes]
            lines += [
                f"  pragma {p.key!r}{f' = {p.value!r}' if p.value else ''}: an engine hint, "
                "accepted; it changes no answer here (delta queries, magic sets and "
                "arrangements are chosen per query)"
                for p in self.program.pragmas
            ]
            lines.append("shared arrangements: " + (", ".join(built.shared) or "none"))
            lines.append("dataflow (the operators built, stateful ones):")
            lines += [f"  {line}" for line in operators]
            return "\n".join(lines)

    def why(self, fact: str) -> Derivation:
        """Why the ground `fact` (`"reach(1, 4)"`) holds now: a proof of minimal height
        (`datalog.provenance`; computed on demand from the current base relations)."""
        from datalog.provenance import why

        with self.lock:
            self.introspection.prepare(fact)
            return why(self, fact)

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
        plan, first = self._started(checked, key, join_plan)
        dtypes = [np.dtype(_dtype(t)) for t in checked.answer_types]
        live = LiveQuery(key, plan, checked.answer_types, Spine(len(dtypes), dtypes, 1))
        live.join_plan = join_plan
        self._deliver(live, first, self.engine.epoch)  # no subscriber yet: the state only
        plan.output.listeners.append(lambda u, e: self._deliver(live, u, e))
        self.live[key] = live
        return live

    def _started(self, checked: Any, key: str, join_plan: JoinPlan) -> tuple[QueryPlan, Updates]:
        """A new dataflow for a query, started, and its first answer (not delivered).

        If building or starting fails, the dataflow is dropped: no reader is left
        holding back the compaction of shared arrangements.
        """
        plan = self._planner(join_plan).build(checked, key)
        captured: list[Updates] = []
        plan.output.listeners.append(lambda u, _e: captured.append(u))
        try:
            self.engine.start(plan.dataflow)
        except BaseException:
            self.engine.drop(plan.dataflow)
            raise
        plan.output.listeners.clear()
        dtypes = [np.dtype(_dtype(t)) for t in checked.answer_types]
        return plan, concat([Updates.empty(len(dtypes), 1, dtypes), *captured])

    def _planner(self, join_plan: JoinPlan) -> Planner:
        return Planner(self.engine, self.checked, self.symbols, join_plan, functors=self.functors)

    def _restart_live(self) -> None:
        """Rebuild the live queries' dataflows, which an aborted commit dropped. The
        inputs are as before the commit, so each new dataflow's answer equals the
        one its subscribers hold and nothing is delivered."""
        with unbudgeted():  # a repair: it must finish whatever budget the commit had
            for live in list(self.live.values()):
                self._rebuild(live)

    def _rebuild(self, live: LiveQuery) -> Updates:
        """Replace a live query's dataflow (its rules changed): the difference between
        the new answer and the one its subscribers hold (not delivered)."""
        old = live.state.accumulate(None)
        self.engine.drop(live.plan.dataflow)
        _, checked = self._check_query(live.query_text)
        plan, first = self._started(checked, live.key, live.join_plan)
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

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tick(self, epoch: int) -> None:
        """After a commit: paced subscribers get what is due (only they are visited:
        a commit costs nothing more for subscriptions without a granularity), and
        what callbacks changed in `deltalog.*` is published."""
        if self._paced:
            self._delivering += 1
            try:
                tick(list(self._paced), epoch)
            finally:
                self._delivering -= 1
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


def _fact_key(fact: Any) -> tuple[object, ...]:
    return (fact.head.name, *(arg.value for arg in fact.head.args))


def _dtype(kind: str) -> type[np.generic]:
    from datalog.expressions import DTYPES

    return DTYPES[kind]
