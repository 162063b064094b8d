"""The public API: `Database`, transactions, queries and subscriptions.

Layer: datalog (API). The top of the `datalog` API modules: it composes them and
nothing imports it but the package's users.

A database is a few parts with one job each: the program in force
(`datalog.db.definitions.ProgramState`), the engine with its base relations
(`differential.engine`), the live queries and their subscribers
(`datalog.db.queries.LiveQueries`, each query owned by one `datalog.db.live.LiveQuery`),
the log (`datalog.db.durable.Log`), and the one path every write takes
(`datalog.db.epochs.Epochs`: log, apply, repair on failure, deliver). Reads never
write: a query, a subscription, `why`, `explain` or an `as_of` read never advances
the epoch or touches the log.

One writer and many readers may use a database from several threads: every entry
point takes the database's lock.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from datalog.db import definitions, durable
from datalog.db.definitions import Definition, ProgramState, fact_rows
from datalog.db.durable import Log
from datalog.db.epochs import Epochs, Write
from datalog.db.explanations import Explanations
from datalog.db.history import DEFAULT_HISTORY, Past, history_setting
from datalog.db.introspection import Introspection
from datalog.db.live import Callback, Subscription
from datalog.db.many import answer, answers
from datalog.db.pacing import Clock, Pacing, SystemClock
from datalog.db.queries import LiveQueries
from datalog.db.transaction import Transaction
from datalog.eval.functors import FunctorBinding, binding, bindings
from datalog.eval.rows import to_rows
from datalog.eval.symbols import SymbolTable
from datalog.lang import system
from datalog.lang.ast import Program, Query
from datalog.lang.checks import CheckedProgram, CheckedQuery, check_query
from datalog.lang.errors import BudgetExceeded, RowLimitExceeded, TransactionError, UnsupportedError
from datalog.lang.parser import parse_query
from datalog.lang.pretty import format_query
from datalog.lang.system import UNIT
from datalog.plan.plan import JoinPlan
from datalog.storage.records import Commit, Define, Record
from differential.batch import Updates
from differential.budget import Budget, WorkLock
from differential.engine import Engine
from differential.inputs import Requests

if TYPE_CHECKING:
    from datalog.db.change import Answer, Change
    from datalog.db.live import LiveQuery
    from datalog.db.provenance import Derivation
    from datalog.db.whatif import Hypothetical
    from datalog.db.whynot import WhyNot
    from datalog.db.whywatch import WhyCallback, WhySubscription
    from datalog.storage.store import Store


class Database:
    """An in-memory incremental Datalog database."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        sync: bool = True,
        checkpoint_every: int = 1000,
        functors: Mapping[str, object] | None = None,
        history: int | None = DEFAULT_HISTORY,
        clock: Clock | None = None,
    ) -> None:
        """An empty database in memory, or the durable one in directory `path`.

        `functors` binds `.functor`s to Python functions: `{"f": fn}`, or
        `{"f": datalog.vectorized(fn)}` (see `register_functor`).

        With a path, every definition and committed transaction is written to the
        log (fsynced unless `sync=False`) before it is applied, and a checkpoint
        is taken once the log holds `checkpoint_every` records or outgrows the last
        snapshot; opening loads the newest snapshot and replays the log after it.
        The last `history` epochs (None: all) stay readable by `as_of` (`datalog.db.history`).
        `clock` is what paced subscriptions read and wake up by (tests pass a
        `datalog.db.pacing.ManualClock`).
        """
        self.lock = WorkLock(Budget(BudgetExceeded, RowLimitExceeded))  # entries run under it
        self.clock = clock or SystemClock()
        self.engine = Engine(history=history_setting(history))
        self.symbols = SymbolTable()
        self.functors: dict[str, FunctorBinding] = bindings(functors)
        self.engine.create_input(UNIT, [np.dtype(np.int64)])
        self.engine.commit({UNIT: Requests((np.zeros(1, np.int64),), np.ones(1, bool))})
        self.state = ProgramState.initial(Program(decls=system.DECLS), self.engine.epoch)
        self.queries = LiveQueries(
            self.engine, self.symbols, self.state, self.functors, self.clock, self.lock
        )
        self.log = Log(checkpoint_every)
        self.epochs = Epochs(self.engine, self.state, self.queries, self.log, self.symbols)
        self.introspection = Introspection(self.engine, self.state, self.queries, self.symbols)
        if path is not None:
            durable.open_store(self, path, sync)

    # -- what the parts hold, by their usual names -------------------------------------

    @property
    def epoch(self) -> int:
        return self.engine.epoch

    @property
    def program(self) -> Program:
        return self.state.program

    @property
    def checked(self) -> CheckedProgram:
        return self.state.checked

    @property
    def definitions(self) -> list[Definition]:
        return self.state.definitions

    @property
    def live(self) -> Mapping[str, LiveQuery]:
        """The live queries, by key (normalized query text)."""
        return self.queries.by_key

    @property
    def store(self) -> Store | None:
        return self.log.store

    @property
    def checkpoint_every(self) -> int:
        """Log records after which a write first takes a checkpoint."""
        return self.log.checkpoint_every

    @checkpoint_every.setter
    def checkpoint_every(self, records: int) -> None:
        self.log.checkpoint_every = records

    # -- program -----------------------------------------------------------------

    def define(self, text: str) -> None:
        """Add declarations, facts and rules; all-or-nothing. New rules take an epoch
        of their own (shared with the facts), whether or not an answer changes."""
        with self.lock:
            self.queries.refuse_in_callback("define")
            change = definitions.defined(self.state, text)
            tx = Transaction(self.state, self.symbols, self.epochs, change.checked.schema)
            try:
                for relation, rows in fact_rows(change.facts).items():
                    tx.insert(relation, rows)
            except BaseException:
                tx.discard()
                raise
            new_epoch = bool(change.heads) or bool(change.facts)
            write = Write("define", lambda _: Define(text), tx.requests(), change, new_epoch,
                          undo=tx.discard)  # fmt: skip
            self.epochs.commit(write)

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
        (symbols as object arrays of str); see `datalog.eval.functor_calls`. Dataflows
        built from now on use it; live ones keep the function they were built with."""
        with self.lock:
            key, found = binding(name, function, vectorized)
            self.functors[key] = found

    # -- transactions ------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One atomic epoch: commits on normal exit, discards on an exception."""
        with self.lock:
            tx = Transaction(self.state, self.symbols, self.epochs)
            try:
                yield tx
            except BaseException:
                tx.discard()  # (its symbols)
                raise
            if not tx.done:
                tx.commit()

    @contextmanager
    def hypothetical(self, queries: Sequence[str] | None = None) -> Iterator[Hypothetical]:
        """A transaction that is never committed: on leaving the block, `tx.changes`
        holds, for each live query (or each of `queries`), the `Change` committing
        it would deliver; nothing changes (`datalog.db.whatif`, docs/adr/0047)."""
        from datalog.db.whatif import Hypothetical

        with self.lock:
            self.queries.refuse_in_callback("what_if")
            base = Transaction(self.state, self.symbols, self.epochs)
            tx = Hypothetical(base, lambda text, callback: self.subscribe(text, callback), queries)
            try:
                yield tx
            except BaseException:
                tx.discard()
                raise
            if not tx.done:
                tx.commit()

    def what_if(
        self,
        inserts: Mapping[str, object] | None = None,
        retracts: Mapping[str, object] | None = None,
        queries: Sequence[str] | None = None,
    ) -> dict[str, Change]:
        """What committing `inserts` and `retracts` ({relation: rows}) would deliver to
        each live query (or each of `queries`, by its text), without committing
        (`hypothetical`)."""
        with self.hypothetical(queries) as tx:
            for relation, rows in (inserts or {}).items():
                tx.insert(relation, rows)
            for relation, rows in (retracts or {}).items():
                tx.retract(relation, rows)
        return tx.changes

    def insert(self, relation: str, rows: object) -> int:
        with self.transaction() as tx:
            tx.insert(relation, rows)
        return self.engine.epoch

    def retract(self, relation: str, rows: object) -> int:
        with self.transaction() as tx:
            tx.retract(relation, rows)
        return self.engine.epoch

    # -- queries -----------------------------------------------------------------

    def query(self, text: str, plan: JoinPlan = "auto", as_of: int | None = None) -> list[Any]:
        """The current answer of a query, e.g. `reach(1, y)`: a list of rows.

        `plan` picks the join strategy: `auto` (delta queries with worst-case
        optimal joins for bodies of three or more atoms), `wcoj` or `binary`.
        `as_of=E`: the answer at the end of epoch E, by its rules (`datalog.db.history`).
        """
        with self.lock, self._read_only(text):
            updates, checked = self._answer(text, plan, as_of)
            return to_rows(updates.columns, checked.answer_types, self.symbols, len(updates))

    def query_columns(self, text: str, plan: JoinPlan = "auto", as_of: int | None = None) -> Any:
        """The current answer (or, with `as_of`, a past one) as numpy columns by answer
        variable (no Python rows). Symbol columns come back as arrays of strings. A
        query without variables (`tc(1, 2)`) has no columns: ask `query` or
        `query_arrow` whether its fact holds."""
        return self._columns(text, plan, as_of)[0]

    def query_arrow(self, text: str, plan: JoinPlan = "auto", as_of: int | None = None) -> Any:
        """The answer (`as_of`: a past one) as a `pyarrow.Table` whose columns are named
        after the query's variables (symbols as strings); `.to_pandas()` from there. A
        query without variables gives a table without columns of one row if its fact
        holds, else of none."""
        import pyarrow as pa

        columns, rows = self._columns(text, plan, as_of)
        if not columns:
            return pa.Table.from_struct_array(pa.array([{}] * rows, type=pa.struct([])))
        return pa.table({name: pa.array(column) for name, column in columns.items()})

    def query_many(self, texts: Sequence[str], plan: JoinPlan = "auto") -> list[Answer]:
        """Answers of several queries, what they read evaluated once (ADR 0061)."""
        with self.lock, self._read_only(*texts):
            asked = [self._check_query(text, plan) for text in texts]
            return answers(self.queries, self.symbols, asked, plan)

    def _columns(self, text: str, plan: JoinPlan, as_of: int | None) -> tuple[dict[str, Any], int]:
        with self.lock, self._read_only(text):
            found = answer(*self._answer(text, plan, as_of), self.symbols)
            return found.columns, found.size

    @contextmanager
    def _read_only(self, *texts: str) -> Iterator[None]:
        """Symbols a one-shot query interns (its constants, functor results) are
        forgotten when it is done: nothing stored refers to them, and a stream of
        queries with fresh constants would otherwise grow the table forever. (The
        `deltalog.*` relations it reads are refreshed first: they are stored.)"""
        for text in texts:
            self.introspection.prepare(text)
        mark = len(self.symbols)
        try:
            yield
        finally:
            self.symbols.forget_from(mark)

    def _answer(self, text: str, plan: JoinPlan, as_of: int | None) -> tuple[Updates, Any]:
        """The consolidated answer and the checked query: live, one-shot or of the past."""
        past = self._past()
        epoch = past.past_epoch(as_of)
        key, checked = self._check_query(text, plan)
        if epoch is not None:
            return past.answer(text, key, plan, epoch)
        return self.queries.answer(key, checked, plan), checked

    def subscribe(
        self,
        text: str,
        callback: Callback,
        plan: JoinPlan = "auto",
        granularity: dict[str, float] | None = None,
    ) -> Subscription:
        """Call `callback` with the current answer, then with every epoch's changes, or
        (with `granularity={"epochs": N}` or `{"seconds": S}`) with the changes
        consolidated at most every N epochs and at most every S seconds (both: the
        later bound decides), as the server paces them (`datalog.db.pacing`).
        Subscribing never advances the epoch: the snapshot is labelled with the epoch
        it reflects."""
        with self.lock:
            self.queries.refuse_in_callback("subscribe")
            pacing = Pacing.of(granularity, self.engine.epoch, self.clock.now)
            self.introspection.prepare(text)
            key, checked = self._check_query(text, plan)
            sub = self.queries.subscribe(key, text, checked, plan, callback, pacing)
            sub.unsubscribe = self.unsubscribe  # `sub.close()` takes the lock too
            return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self.lock:
            self.queries.unsubscribe(sub)

    def explain(
        self, text: str, plan: JoinPlan = "auto", format: str = "text", passes: bool = False
    ) -> str:
        """The strata, rule plans and shared arrangements of a query ("dot": a graph),
        printed from its plan (`datalog.plan.plan`); `passes=True`: the plan after
        each planning pass, in order (docs/adr/0051)."""
        with self.lock, self._read_only(text):
            key, checked = self._check_query(text, plan)
            pragmas = self.program.pragmas
            return self._explanations().explain(key, checked, plan, format, passes, pragmas)

    def why(self, fact: str, as_of: int | None = None) -> Derivation:
        """Why the ground `fact` (`"reach(1, 4)"`) holds now, or at the end of epoch
        `as_of`: a proof of minimal height (`datalog.db.provenance`; computed on demand
        from the base relations of that epoch)."""
        return self._explanations().why(fact, as_of)

    def why_not(
        self, fact: str, as_of: int | None = None, depth: int = 3, size: int = 100
    ) -> WhyNot:
        """Why the ground `fact` (`"reach(1, 9)"`) does not hold now, or did not at the
        end of epoch `as_of`: for each rule whose head unifies with it, the premises
        that hold under its best candidate bindings and the first that fails, missing
        derived tuples explained in turn `depth` levels deep, at most `size` rules
        tried in all (`datalog.db.whynot`, docs/adr/0045). A fact that holds raises
        `FactHoldsError` (`why` explains it)."""
        return self._explanations().why_not(fact, as_of, depth, size)

    def subscribe_why(
        self,
        fact: str,
        callback: WhyCallback,
        granularity: dict[str, float] | None = None,
        budget: float | None = None,
        clock: Clock | None = None,
    ) -> WhySubscription:
        """Call `callback` with a `WhyChange` holding the ground `fact`'s explanation
        now (`why`'s `Derivation` while it holds, else `why_not`'s `WhyNot`), then
        again at every epoch where the explanation changes, paced by `granularity` as
        `subscribe` is. An epoch that writes no relation the fact depends on and gives
        none new rules costs nothing; `budget` (seconds) bounds each explanation again
        (one that fails is kept in `errors` and tried at the next epoch). `clock`
        paces it instead of the database's (a server's event loop). Takes no epoch
        (`datalog.db.whywatch`, docs/adr/0045)."""
        clock = clock or self.clock
        return self._explanations().subscribe_why(fact, callback, granularity, budget, clock)

    def unsubscribe_why(self, sub: WhySubscription) -> None:
        self._explanations().unsubscribe_why(sub)

    def stats(self) -> dict[str, object]:
        with self.lock:
            stats = self.engine.stats()
            stats["queries"] = {
                k: {
                    "subscribers": len(v.subscribers),
                    "answer_tuples": len(v.answer()),
                    "last_commit": self.queries.adaptive.last_commit(k),
                }
                for k, v in self.queries.by_key.items()
            }
            return stats

    # -- internals ---------------------------------------------------------------

    def _check_query(self, text: str, plan: JoinPlan = "auto") -> tuple[str, CheckedQuery]:
        """The query checked, and its key: normalized text (and plan, unless `auto`)."""
        if plan not in ("auto", "wcoj", "binary"):
            raise UnsupportedError(f"unknown plan {plan!r}: use 'auto', 'wcoj' or 'binary'")
        parsed: Query = parse_query(text)
        checked = check_query(parsed, self.checked.schema)
        key = format_query(replace(parsed, source=""))
        return (key if plan == "auto" else f"{key} [plan={plan}]"), checked

    def _explanations(self) -> Explanations:
        """Made per call, holding bound methods of this database: kept, it would make
        a cycle that outlives `del db` (its directory released only by the collector)."""
        return Explanations(self.lock, self.queries, self.functors, self._past,
                            self._answer, self._read_only)  # fmt: skip

    def _past(self) -> Past:
        return Past(self.engine, self.state.versions, self.symbols, self.functors)

    @contextmanager
    def budget(self, seconds: float | None = None, rows: int | None = None) -> Iterator[None]:
        """Within the block, this database's work in this thread (a query, subscription,
        definition, commit, `why`, `explain`, `as_of` read, the functors and subscriber
        callbacks it runs) stops at its next check point once `seconds` have passed,
        and a step that would build more than `rows` rows (a join's output, counted
        before it is built) is refused. Either raises `BudgetExceeded` (a refusal:
        `RowLimitExceeded`) and, like any failure, leaves the database as it was.
        Other databases and other threads are not bound; nested budgets add up (the
        tighter of each binds). None: no such limit."""
        with self.lock.budget.limit(seconds, rows):
            yield

    def interrupt(self) -> None:
        """Stop this database's running work at its next check point (within about a
        second), whichever thread runs it, with `BudgetExceeded`, and refuse all its
        later work the same way: for shutting down. Safe from any thread and from a
        signal handler; takes no lock. Other databases are not affected."""
        self.lock.budget.interrupt()

    def checkpoint(self) -> None:
        """Snapshot the base relations and the program now, and drop the log they cover."""
        with self.lock:
            if self.store is None:
                raise TransactionError("checkpoint needs a durable database: Database(path)")
            durable.checkpoint(self.log, self.engine, self.state, self.symbols)

    # -- what `datalog.db.durable` replays through (`durable.Durable`) -------------------

    def restore_program(self, text: str) -> None:
        """A snapshot's program, installed without its facts (the snapshot holds the
        relations) and without an epoch."""
        change = definitions.defined(self.state, text)
        change = replace(change, facts=())
        self.epochs.commit(Write("restore", _no_record, change=change, new_epoch=False))

    def replay_commit(self, record: Record) -> int:
        """A logged transaction, applied again: the epoch it reached."""
        assert isinstance(record, Commit)
        if not record.changes and not record.redefinitions:  # a subscription's epoch in a
            return self.engine.commit({})  # log of before ADR 0041, or one for deltalog.*
        with self.transaction() as tx:
            for relation, text in record.redefinitions:
                tx.redefine(relation, text)
            for change in record.changes:
                rows: Any = change.columns
                if not self.checked.schema.types(change.relation):  # nullary: `()` rows
                    rows = [()] * len(change.columns[0])
                (tx.insert if change.inserting else tx.retract)(change.relation, rows)
        return self.engine.epoch

    def detach_log(self) -> None:
        """Write nothing more to the log, without closing it: for a forked copy of the
        database (a server's worker) whose changes must never reach the parent's log.
        The copy goes on in memory; the parent's log and lock are untouched."""
        self.log.store = None

    def close(self) -> None:
        """Close the store and release its lock (the database stays usable in memory)."""
        if self.log.store is not None:
            self.log.store.close()
            self.log.store = None

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f" at {self.store.dir}" if self.store is not None else ""
        relations = sum(1 for name in self.checked.schema if not name.startswith("deltalog."))
        return (
            f"<Database{where}: epoch {self.engine.epoch}, {relations} relations, "
            f"{len(self.queries.by_key)} live queries>"
        )


def _no_record(epoch: int) -> Record:
    raise AssertionError("a restored program is not logged")
