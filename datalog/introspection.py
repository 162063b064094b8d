"""Introspection as relations: the database's own state, queryable with Datalog.

Layer: datalog (API). Imports numpy, `datalog.system`, `datalog.durable` and
`differential` (the engine's inputs and measurements); `datalog.database` owns one
`Introspection` and calls its hooks.

Three reserved relations describe the database (docs/adr/0025):

- `deltalog.relation(name, tuples)`: each declared relation and the distinct
  facts stored in it (inserted by transactions or definitions; what rules derive
  is computed per query, and shows in the arrangements of its dataflow);
- `deltalog.arrangement(name, tuples, batches, readers)`: every arrangement with
  the updates and batches its trace holds and the dataflows reading it: a
  relation's stored state (`edge/state`), its shared indexes (`edge[1, 0]/1`) and
  the private arrangements of each live query (`tc(x, y) #6 arrange(key=1 of 2)`);
- `deltalog.dataflow(query, operators, subscribers)`: every live query.

They are late engine inputs. While a live dataflow reads one, every commit
refreshes them in its own epoch, after the other dataflows ran it (the engine asks
`late_changes`), and subscribing, unsubscribing or declaring, which open no epoch,
publish what they changed in an epoch of their own (a new constant of a shared
query has one already, its parameter's: that epoch publishes the new subscriber,
ADR 0022). While none does, a commit pays nothing, and a query reading them
refreshes them in place first. What reads them
is left out of what they report: the arrangements of the `deltalog.*` inputs and
the dataflows reading them (and their private arrangements), so publishing the
counts never changes the counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from datalog import definitions, durable
from datalog.errors import DatalogError
from datalog.strata import reads
from datalog.system import ARITIES, ARRANGEMENT, DATAFLOW, DECLS, NAMES, PREFIX, RELATION
from differential.engine import Dataflow
from differential.inputs import Input, Requests

if TYPE_CHECKING:
    from datalog.database import Database
    from datalog.live import LiveQuery

Row = tuple[str | int, ...]  # a measured row: symbols as strings
IdRow = tuple[int, ...]  # a stored row: symbols as ids


class Introspection:
    """Keeps the `deltalog.*` relations of one database current (module docstring)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.stale = False  # a change was made while an epoch was being delivered
        self._reading_rules: tuple[object, bool] | None = None  # (program, reads deltalog)
        # The rows each deltalog input holds, and those a commit in flight will make it
        # hold (`(epoch, rows)`, taken once that epoch has committed).
        self._published: dict[str, set[IdRow]] = {name: set() for name in NAMES}
        self._proposed: tuple[int, dict[str, set[IdRow]]] | None = None
        for decl in DECLS:
            db.engine.create_input(decl.name, [np.dtype(np.int64)] * decl.arity, late=True)
        db.engine.late_changes = self._late_changes

    # -- hooks --------------------------------------------------------------------

    def prepare(self, text: str) -> None:
        """Before a query, subscription or `why` of `text`: refresh in place the
        `deltalog.*` relations it reads that no live dataflow keeps current."""
        names = self._system_reads(text) - self._maintained()
        if not names:
            return
        requests, rows = self._changes(names)
        if requests:
            self.db.engine.amend(requests)
            self._published.update(rows)

    def changed(self) -> None:
        """After a subscription, unsubscription or definition: what it changed in the
        `deltalog.*` relations live dataflows read is an epoch of its own (inside a
        subscriber's callback it waits for the end of the epoch being delivered)."""
        if self.db._delivering:
            self.stale = True
            return
        self.stale = False
        names = self._maintained()
        if names and self._changes(names)[0]:
            self._commit_epoch()

    def after_commit(self) -> None:
        """After an epoch was delivered: publish what its callbacks changed."""
        if self.stale:
            self.changed()

    # -- publishing ---------------------------------------------------------------

    def _late_changes(self, epoch: int) -> Mapping[str, Requests]:
        """The engine's question during a commit, once the other dataflows ran it:
        the changes of the relations live dataflows read."""
        requests, rows = self._changes(self._maintained())
        self._proposed = (epoch, rows)
        return requests

    def _commit_epoch(self) -> None:
        """An epoch that changes only `deltalog.*`, logged (as an empty commit) so that
        replaying the log reproduces the epoch numbers."""
        db = self.db
        epoch, end = db.engine.epoch + 1, durable.mark(db)
        try:
            durable.log_commit(db, epoch, [], [])
            epoch = db.engine.commit({})  # the engine asks `late_changes` for the rows
        except BaseException:
            if db.engine.epoch < epoch:  # it did not happen (else: a listener failed)
                durable.undo(db, end)
            db._restart_live()
            raise
        db._tick(epoch)

    def _changes(self, names: set[str]) -> tuple[dict[str, Requests], dict[str, set[IdRow]]]:
        """Inserts and retractions turning the rows `names` hold into those measured
        now, and the rows they will hold then."""
        self._settle()
        requests, rows = {}, {}
        for name, measured in self.measure(names).items():
            wanted, held = {self._ids(row) for row in measured}, self._published[name]
            if wanted != held:
                requests[name] = _requests(wanted - held, held - wanted, ARITIES[name])
                rows[name] = wanted
        return requests, rows

    def _settle(self) -> None:
        """Take the rows of a commit in flight once it committed (an aborted one's epoch
        was never reached: they are dropped)."""
        if self._proposed is not None:
            epoch, rows = self._proposed
            if epoch <= self.db.engine.epoch:
                self._published.update(rows)
            self._proposed = None

    def _ids(self, row: Row) -> IdRow:
        symbols = self.db.symbols
        return tuple(symbols.intern(v) if isinstance(v, str) else v for v in row)

    def _maintained(self) -> set[str]:
        """The `deltalog.*` relations some live dataflow reads."""
        inputs = self.db.engine.inputs
        return {n for n in NAMES if any(a.readers for a in inputs[n].arrangements.values())}

    # -- measuring ----------------------------------------------------------------

    def measure(self, names: Iterable[str] = NAMES) -> dict[str, set[Row]]:
        """The rows of the `deltalog.*` relations `names`, measured now (nothing changes)."""
        measures = {RELATION: self._relations, ARRANGEMENT: self._arrangements,
                    DATAFLOW: self._dataflows}  # fmt: skip
        return {name: measures[name]() for name in names}

    def _relations(self) -> set[Row]:
        inputs = self.db.engine.inputs
        return {
            (name, inputs[name].size)
            for name in self.db.checked.schema.relations
            if not name.startswith(PREFIX) and name in inputs
        }

    def _arrangements(self) -> set[Row]:
        rows = set(_shared_arrangements(self.db.engine.inputs.values()))
        for query in self._reported():
            rows.update(_private_arrangements(query.key, query.plan.dataflow))
        for view in self.db.engine.views:
            rows.update(_private_arrangements(view.input.name, view.dataflow))
        return rows

    def _dataflows(self) -> set[Row]:
        """Live queries with their subscribers, and views (read by dataflows, not
        subscribed: 0)."""
        rows: set[Row] = {
            (q.key, len(q.plan.dataflow.root.all_operators()), len(q.subscribers) + q.arriving)
            for q in self._reported()
        }
        views = self.db.engine.views
        return rows | {(v.input.name, len(v.dataflow.root.all_operators()), 0) for v in views}

    def _reported(self) -> list[LiveQuery]:
        """The live queries reported: those that read no `deltalog.*` relation."""
        return [q for q in self.db.live.values() if not q.plan.dataflow.late]

    def _system_reads(self, text: str) -> set[str]:
        """The `deltalog.*` relations the query `text` reads, directly or through rules
        (a bad query is not judged here: its own call reports it)."""
        if not isinstance(text, str) or (PREFIX not in text and not self._rules_read_system()):
            return set()
        try:
            return definitions.reads(self.db, text) & NAMES
        except DatalogError:
            return set()

    def _rules_read_system(self) -> bool:
        checked = self.db.checked
        if self._reading_rules is None or self._reading_rules[0] is not checked:
            graph = reads(checked.rules)
            reading = any(n.startswith(PREFIX) for body in graph.values() for n in body)
            self._reading_rules = (checked, reading)
        return self._reading_rules[1]


def _shared_arrangements(inputs: Iterable[Input]) -> Iterable[Row]:
    """Each base relation's stored state and shared indexes (not the late inputs'
    nor the database's internal ones)."""
    for source in inputs:
        if source.late or source.name.startswith("__"):
            continue
        for arrangement in (source.presence, *source.arrangements.values()):
            yield (arrangement.name, *arrangement.held(), arrangement.readers)


def _private_arrangements(query: str, dataflow: Dataflow) -> Iterable[Row]:
    """The arrangements a live query's dataflow owns (one reader: the dataflow)."""
    for index, operator, tuples, batches in dataflow.traces():
        yield (f"{query} #{index} {operator}", tuples, batches, 1)


def _requests(inserts: set[IdRow], retracts: set[IdRow], arity: int) -> Requests:
    rows = [*sorted(inserts), *sorted(retracts)]
    columns = tuple(np.array([row[i] for row in rows], dtype=np.int64) for i in range(arity))
    inserting = np.array([True] * len(inserts) + [False] * len(retracts), dtype=bool)
    return Requests(columns, inserting)
