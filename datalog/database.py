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

import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from datalog import durable
from datalog.ast import ColumnType, Program, Query
from datalog.checks import CheckedProgram, check_program, check_query
from datalog.errors import TransactionError, UnknownNameError, did_you_mean
from datalog.parser import parse_program, parse_query
from datalog.plan.body import UNIT
from datalog.plan.build import Planner, QueryPlan
from datalog.plan.wcoj import JoinPlan
from datalog.pretty import format_query
from datalog.rows import to_columns, to_rows
from datalog.storage.store import Store
from datalog.symbols import SymbolTable
from differential.batch import Updates, concat, consolidate
from differential.engine import Engine
from differential.inputs import Requests
from differential.time import column
from differential.trace.spine import Spine


@dataclass(frozen=True)
class Change:
    """What a subscriber receives: rows with their diffs (+1 in, -1 out) at an epoch."""

    rows: list[tuple[Any, ...]]
    diffs: list[int]
    epoch: int
    snapshot: bool = False

    def __iter__(self) -> Iterator[Any]:
        return iter((self.rows, self.diffs, self.epoch))


Callback = Callable[[Change], None]
_log = logging.getLogger("deltalog")


@dataclass(eq=False)
class Subscription:
    query: str
    columns: tuple[str, ...]
    callback: Callback
    live: LiveQuery | None = None
    active: bool = True
    errors: list[Exception] = field(default_factory=list)


@dataclass(eq=False)
class LiveQuery:
    """A started dataflow kept up to date, its accumulated answer and its subscribers."""

    key: str
    plan: QueryPlan
    types: tuple[ColumnType, ...]
    state: Spine
    subscribers: list[Subscription] = field(default_factory=list)
    join_plan: JoinPlan = "auto"

    @property
    def query_text(self) -> str:
        return self.key.split(" [plan=")[0]


class Database:
    """An in-memory incremental Datalog database."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        sync: bool = True,
        checkpoint_every: int = 1000,
    ) -> None:
        """An empty database in memory, or the durable one in directory `path`.

        With a path, every definition and committed transaction is written to the
        log (fsynced unless `sync=False`) before it is applied, and a checkpoint
        is taken once the log holds `checkpoint_every` records or outgrows the last
        snapshot; opening loads the newest snapshot and replays the log after it.
        """
        self.store: Store | None = None
        self.checkpoint_every = checkpoint_every
        self.definitions: list[str] = []  # every applied `define` text, in order
        self._quiet = 0  # >0 while replaying or committing a define's facts: no log
        self.engine = Engine()
        self.symbols = SymbolTable()
        self.program = Program()
        self.checked: CheckedProgram = check_program(self.program)
        self.live: dict[str, LiveQuery] = {}
        self.lock = threading.RLock()
        self.engine.create_input(UNIT, [np.dtype(np.int64)])
        self.engine.commit({UNIT: Requests((np.zeros(1, np.int64),), np.ones(1, bool))})
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
            parsed = parse_program(text)
            merged = Program(
                decls=self.program.decls + parsed.decls,
                types=self.program.types + parsed.types,
                directives=self.program.directives + parsed.directives,
                rules=self.program.rules + parsed.rules,
                source=text,
            )
            checked = check_program(merged)
            known = set(self.checked.facts)
            new_facts = [f for f in checked.facts if f not in known] if facts else []
            self._checkpoint_if_due()
            offset = durable.log_define(self, text)
            try:
                self._apply_define(text, parsed, merged, checked, new_facts)
            except BaseException:
                durable.undo(self, offset)
                raise

    def _apply_define(
        self, text: str, parsed: Program, merged: Program, checked: CheckedProgram, facts: list[Any]
    ) -> None:
        with self.lock:
            before = self.program, self.checked, len(self.definitions)
            self.program, self.checked = merged, checked
            self.definitions.append(text)
            try:
                self._insert_facts(checked, facts)
            except BaseException:  # a fact out of its type's range, say: nothing changes
                self.program, self.checked = before[0], before[1]
                del self.definitions[before[2] :]
                raise
            self._refresh_live(parsed)

    def _insert_facts(self, checked: CheckedProgram, facts: list[Any]) -> None:
        with self.lock:
            for info in checked.schema.relations.values():
                if info.name not in self.engine.inputs:
                    # a nullary relation is stored with one constant column
                    dtypes = [np.dtype(_dtype(t)) for t in info.types] or [np.dtype(np.int64)]
                    self.engine.create_input(info.name, dtypes, info.semantics)
            self._quiet += 1
            try:
                with self.transaction() as tx:
                    for fact in facts:
                        tx.insert(fact.head.name, [tuple(a.value for a in fact.head.args)])
            finally:
                self._quiet -= 1

    def _refresh_live(self, parsed: Program) -> None:
        """Rebuild live queries that read relations the new rules define."""
        heads = {r.head.name for r in parsed.rules if r.body}
        for live in list(self.live.values()):
            if heads & self._reads(live.query_text):
                self._rebuild(live)

    def _reads(self, query_text: str) -> set[str]:
        from datalog.checks import dependencies
        from datalog.plan.build import _relations_read

        checked = check_query(parse_query(query_text), self.checked.schema)
        return dependencies(self.checked, _relations_read(checked))

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
        updates, types = self._answer(text, plan)
        return to_rows(updates.columns, types, self.symbols, len(updates))

    def query_columns(self, text: str, plan: JoinPlan = "auto") -> dict[str, np.ndarray]:
        """The current answer as numpy columns by answer variable (no Python rows).

        Symbol columns come back as arrays of strings (dtype object).
        """
        updates, types = self._answer(text, plan)
        _, checked = self._check_query(text, plan)
        return {
            var: self.symbols.strings(col) if kind == "symbol" else col
            for var, col, kind in zip(checked.answer_vars, updates.columns, types, strict=True)
        }

    def _answer(self, text: str, plan: JoinPlan) -> tuple[Updates, tuple[ColumnType, ...]]:
        """The consolidated answer of a query now, from its live dataflow or a one-shot one."""
        with self.lock:
            key, checked = self._check_query(text, plan)
            live = self.live.get(key)
            if live is not None:
                return live.state.accumulate(None), live.types
            built = Planner(self.engine, self.checked, self.symbols, plan).build(checked, key)
            collected: list[Updates] = []
            built.output.listeners.append(lambda u, _e: collected.append(u))
            self.engine.start(built.dataflow)
            self.engine.drop(built.dataflow)
            types = checked.answer_types
            if not collected:
                dtypes = [np.dtype(_dtype(t)) for t in types]
                return Updates.empty(len(types), 1, dtypes), types
            return collected[0], types

    def subscribe(self, text: str, callback: Callback, plan: JoinPlan = "auto") -> Subscription:
        """Call `callback` with the current answer, then with every epoch's changes."""
        with self.lock:
            key, checked = self._check_query(text, plan)
            live = self.live.get(key) or self._start_live(key, checked, plan)
            sub = Subscription(key, checked.answer_vars, callback, live)
            live.subscribers.append(sub)
            state = live.state.accumulate(None)
            rows = to_rows(state.columns, live.types, self.symbols, len(state))
            callback(Change(rows, [1] * len(rows), self.engine.epoch, snapshot=True))
            return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self.lock:
            live = sub.live
            sub.active = False
            if live is None or sub not in live.subscribers:
                return
            live.subscribers.remove(sub)
            if not live.subscribers:
                self.engine.drop(live.plan.dataflow)
                del self.live[live.key]

    def explain(self, text: str, plan: JoinPlan = "auto") -> str:
        """The strata, per-rule plans and shared arrangements a query would use."""
        with self.lock:
            key, checked = self._check_query(text, plan)
            built = Planner(self.engine, self.checked, self.symbols, plan).build(checked, key)
            self.engine.drop(built.dataflow)
            lines = [f"query {key}", f"answer columns: {', '.join(checked.answer_vars)}"]
            lines += [f"  {n}" for n in built.notes]
            lines.append("shared arrangements: " + (", ".join(built.shared) or "none"))
            return "\n".join(lines)

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
        parsed: Query = parse_query(text)
        checked = check_query(parsed, self.checked.schema)
        key = format_query(replace(parsed, source=""))
        return (key if plan == "auto" else f"{key} [plan={plan}]"), checked

    def _start_live(self, key: str, checked: Any, join_plan: JoinPlan) -> LiveQuery:
        plan = Planner(self.engine, self.checked, self.symbols, join_plan).build(checked, key)
        dtypes = [np.dtype(_dtype(t)) for t in checked.answer_types]
        live = LiveQuery(key, plan, checked.answer_types, Spine(len(dtypes), dtypes, 1))
        live.join_plan = join_plan
        plan.output.listeners.append(lambda u, e: self._deliver(live, u, e))
        self.live[key] = live
        self.engine.start(plan.dataflow)
        return live

    def _restart_live(self) -> None:
        """Rebuild the live queries' dataflows, which an aborted commit dropped. The
        inputs are as before the commit, so each new dataflow's answer equals the
        one its subscribers hold and nothing is delivered."""
        for live in list(self.live.values()):
            self._rebuild(live)

    def _rebuild(self, live: LiveQuery) -> None:
        """Replace a live query's dataflow (its rules changed); deliver the difference."""
        old = live.state.accumulate(None)
        self.engine.drop(live.plan.dataflow)
        _, checked = self._check_query(live.query_text)
        plan = Planner(self.engine, self.checked, self.symbols, live.join_plan).build(
            checked, live.key
        )
        captured: list[Updates] = []
        plan.output.listeners.append(lambda u, _e: captured.append(u))
        self.engine.start(plan.dataflow)
        plan.output.listeners[:] = [lambda u, e: self._deliver(live, u, e)]
        live.plan = plan
        epoch = self.engine.epoch
        parts = [old.negate(), *captured]
        change = consolidate(concat([p.with_times(column((epoch,), len(p))) for p in parts]))
        self._deliver(live, change, epoch)

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

    def _deliver(self, live: LiveQuery, updates: Updates, epoch: int) -> None:
        if len(updates) == 0:
            return
        since = live.state.default_since
        live.state.insert(updates.with_times(updates.times * 0), since, since)
        rows = to_rows(updates.columns, live.types, self.symbols, len(updates))
        change = Change(rows, updates.diffs.tolist(), epoch)
        for sub in list(live.subscribers):
            _notify(sub, change)


def _notify(sub: Subscription, change: Change) -> None:
    """Call a subscriber; its exception is logged and kept, never raised into a commit.

    The commit has already happened: other subscribers must still hear of it.
    """
    try:
        sub.callback(change)
    except Exception as exc:  # a subscriber's bug must not undo or hide an epoch
        sub.errors.append(exc)
        _log.exception("subscriber of %s failed at epoch %d", sub.query, change.epoch)


class Transaction:
    """Inserts and retractions, validated as they are added, applied at commit."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.parts: list[tuple[str, tuple[np.ndarray, ...], bool]] = []
        self.done = False

    def insert(self, relation: str, rows: object) -> None:
        self.parts.append((relation, self._columns(relation, rows), True))

    def retract(self, relation: str, rows: object) -> None:
        self.parts.append((relation, self._columns(relation, rows), False))

    def _columns(self, relation: str, rows: object) -> tuple[np.ndarray, ...]:
        if self.done:
            raise TransactionError("this transaction has already committed")
        info = self.db.checked.schema.get(relation)
        if info is None or relation == UNIT:
            names = self.db.checked.schema.names()
            raise UnknownNameError(f"unknown relation `{relation}`{did_you_mean(relation, names)}")
        if info.arity == 0:
            return (np.zeros(_nullary_rows(relation, rows), dtype=np.int64),)
        return to_columns(info, rows, self.db.symbols)

    def commit(self) -> int:
        """Apply everything as one epoch (also done on leaving the `with` block)."""
        self.done = True
        if not self.parts:
            return self.db.engine.epoch
        grouped: dict[str, list[tuple[tuple[np.ndarray, ...], bool]]] = {}
        for relation, cols, inserting in self.parts:
            grouped.setdefault(relation, []).append((cols, inserting))
        requests = {rel: _requests(parts) for rel, parts in grouped.items()}
        self.db._checkpoint_if_due()  # before, not after: the commit that grew the log
        offset = durable.log_commit(self.db, self.db.engine.epoch + 1, self.parts)
        try:
            epoch = self.db.engine.commit(requests)
        except BaseException:
            durable.undo(self.db, offset)
            self.db._restart_live()
            raise
        return epoch


def _nullary_rows(relation: str, rows: object) -> int:
    """How many (empty) rows of a nullary relation `rows` holds."""
    if not isinstance(rows, Iterable):
        raise TransactionError(f"rows for `{relation}` must be iterable")
    found = list(rows)
    if any(not isinstance(r, tuple) or r for r in found):
        raise TransactionError(f"`{relation}` has no columns: its only row is `()`")
    return len(found)


def _requests(parts: list[tuple[tuple[np.ndarray, ...], bool]]) -> Requests:
    arity = len(parts[0][0])
    columns = tuple(np.concatenate([p[0][i] for p in parts]) for i in range(arity))
    inserting = np.concatenate([np.full(len(p[0][0]) if p[0] else 0, p[1]) for p in parts])
    return Requests(columns, inserting.astype(bool))


def _dtype(kind: str) -> type[np.generic]:
    from datalog.expressions import DTYPES

    return DTYPES[kind]
