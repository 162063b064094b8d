"""Introspection as relations: the database's own state, queryable with Datalog.

Layer: datalog (API). Imports numpy, `datalog.system`, `datalog.durable` and
`differential` (the engine's inputs and measurements); `datalog.database` owns one
`Introspection` and calls its hooks.

Three reserved relations describe the database (docs/adr/0019):

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
publish what they changed in an epoch of their own. While none does, a commit pays
nothing, and a query reading them refreshes them in place first. What reads them
is left out of what they report: the arrangements of the `deltalog.*` inputs and
the dataflows reading them (and their private arrangements), so publishing the
counts never changes the counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from datalog import durable
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
        for decl in DECLS:
            db.engine.create_input(decl.name, [np.dtype(np.int64)] * decl.arity, late=True)
        db.engine.late_changes = self._late_changes

    # -- hooks --------------------------------------------------------------------

    def prepare(self, text: str) -> None:
        """Before a query, subscription or `why` of `text`: if it reads a `deltalog.*`
        relation that no live dataflow keeps current, refresh them in place."""
        if self.db.engine.reads_late or not self._reads_system(text):
            return
        requests = self._requests()
        if requests:
            self.db.engine.amend(requests)

    def changed(self) -> None:
        """After a subscription, unsubscription or definition: while a live dataflow
        reads `deltalog.*`, what it changed there is an epoch of its own (inside a
        subscriber's callback it waits for the end of the epoch being delivered)."""
        if self.db._delivering:
            self.stale = True
            return
        self.stale = False
        if self.db.engine.reads_late and self._requests():
            self._commit_epoch()

    def after_commit(self) -> None:
        """After an epoch was delivered: publish what its callbacks changed."""
        if self.stale:
            self.changed()

    # -- publishing ---------------------------------------------------------------

    def _late_changes(self, epoch: int) -> Mapping[str, Requests]:
        """The engine's question during a commit, once the other dataflows ran it."""
        return self._requests()

    def _commit_epoch(self) -> None:
        """An epoch that changes only `deltalog.*`, logged (as an empty commit) so that
        replaying the log reproduces the epoch numbers."""
        db = self.db
        offset = durable.log_commit(db, db.engine.epoch + 1, [])
        try:
            epoch = db.engine.commit({})  # the engine asks `late_changes` for the rows
        except BaseException:
            durable.undo(db, offset)
            db._restart_live()
            raise
        db._tick(epoch)

    def _requests(self) -> dict[str, Requests]:
        """Inserts and retractions turning the stored rows into the measured ones."""
        requests = {}
        for name, rows in self.measure().items():
            wanted = {self._ids(row) for row in rows}
            held = self._stored(self.db.engine.inputs[name])
            if wanted != held:
                requests[name] = _requests(wanted - held, held - wanted, ARITIES[name])
        return requests

    def _ids(self, row: Row) -> IdRow:
        symbols = self.db.symbols
        return tuple(symbols.intern(v) if isinstance(v, str) else v for v in row)

    @staticmethod
    def _stored(source: Input) -> set[IdRow]:
        state = source.presence.spine.accumulate(None)
        present = state.diffs > 0
        return set(zip(*(c[present].tolist() for c in state.columns), strict=True))

    # -- measuring ----------------------------------------------------------------

    def measure(self) -> dict[str, set[Row]]:
        """The rows of each `deltalog.*` relation, measured now (nothing changes)."""
        engine, live = self.db.engine, self._reported()
        relations: set[Row] = {
            (name, engine.inputs[name].size)
            for name in self.db.checked.schema.relations
            if not name.startswith(PREFIX) and name in engine.inputs
        }
        arrangements = set(_shared_arrangements(engine.inputs.values()))
        for query in live:
            arrangements.update(_private_arrangements(query.key, query.plan.dataflow))
        dataflows: set[Row] = {
            (q.key, len(q.plan.dataflow.root.all_operators()), len(q.subscribers)) for q in live
        }
        return {RELATION: relations, ARRANGEMENT: arrangements, DATAFLOW: dataflows}

    def _reported(self) -> list[LiveQuery]:
        """The live queries reported: those that read no `deltalog.*` relation."""
        return [q for q in self.db.live.values() if not q.plan.dataflow.late]

    def _reads_system(self, text: str) -> bool:
        """Whether the query `text` reads a `deltalog.*` relation, directly or through
        rules (a bad query is not judged here: its own call reports it)."""
        if not isinstance(text, str) or (PREFIX not in text and not self._rules_read_system()):
            return False
        try:
            return bool(self.db._reads(text) & NAMES)
        except DatalogError:
            return False

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
