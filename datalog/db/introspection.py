"""Introspection as relations: the database's own state, queryable with Datalog.

Layer: datalog (API). Imports numpy, `datalog.lang.system`, `datalog.db.definitions`,
`datalog.db.queries` and `differential` (the engine's inputs and measurements);
`datalog.db.database` owns one `Introspection` and calls its hooks.

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
`late_changes`): a subscription, an unsubscription or a declaration, which take no
epoch (reads never write), show at the next commit. While none does, a commit pays
nothing, and a query reading them refreshes them in place first. What reads them
is left out of what they report: the arrangements of the `deltalog.*` inputs and
the dataflows reading them (and their private arrangements), so publishing the
counts never changes the counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from datalog.db.definitions import ProgramState
from datalog.db.live import LiveQuery
from datalog.db.queries import LiveQueries
from datalog.eval.symbols import SymbolTable
from datalog.lang.errors import DatalogError
from datalog.lang.strata import reads
from datalog.lang.system import ARITIES, ARRANGEMENT, DATAFLOW, DECLS, NAMES, PREFIX, RELATION
from differential.budget import Interrupted
from differential.engine import Engine
from differential.graph import Dataflow
from differential.inputs import Input, Requests

Row = tuple[str | int, ...]  # a measured row: symbols as strings
IdRow = tuple[int, ...]  # a stored row: symbols as ids


class Introspection:
    """Keeps the `deltalog.*` relations of one database current (module docstring)."""

    def __init__(
        self, engine: Engine, program: ProgramState, live: LiveQueries, symbols: SymbolTable
    ) -> None:
        self.engine, self.program, self.live, self.symbols = engine, program, live, symbols
        self._reading_rules: tuple[object, bool] | None = None  # (program, reads deltalog)
        # The rows each deltalog input holds, and those a commit in flight will make it
        # hold (`(epoch, rows)`, taken once that epoch has committed).
        self._published: dict[str, set[IdRow]] = {name: set() for name in NAMES}
        self._proposed: tuple[int, dict[str, set[IdRow]]] | None = None
        for decl in DECLS:
            engine.create_input(decl.name, [np.dtype(np.int64)] * decl.arity, late=True)
        engine.late_changes = self._late_changes

    # -- hooks --------------------------------------------------------------------

    def prepare(self, text: str) -> None:
        """Before a query, subscription or `why` of `text`: refresh in place the
        `deltalog.*` relations it reads that no live dataflow keeps current."""
        names = self._system_reads(text) - self._maintained()
        if not names:
            return
        requests, rows = self._changes(names)
        if requests:
            self.engine.amend(requests)
            self._published.update(rows)

    # -- publishing ---------------------------------------------------------------

    def _late_changes(self, epoch: int) -> Mapping[str, Requests]:
        """The engine's question during a commit, once the other dataflows ran it:
        the changes of the relations live dataflows read."""
        requests, rows = self._changes(self._maintained())
        self._proposed = (epoch, rows)
        return requests

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
            if epoch <= self.engine.epoch:
                self._published.update(rows)
            self._proposed = None

    def _ids(self, row: Row) -> IdRow:
        symbols = self.symbols
        return tuple(symbols.intern(v) if isinstance(v, str) else v for v in row)

    def _maintained(self) -> set[str]:
        """The `deltalog.*` relations some live dataflow reads."""
        inputs = self.engine.inputs
        return {n for n in NAMES if any(a.readers for a in inputs[n].arrangements.values())}

    # -- measuring ----------------------------------------------------------------

    def measure(self, names: Iterable[str] = NAMES) -> dict[str, set[Row]]:
        """The rows of the `deltalog.*` relations `names`, measured now (nothing changes)."""
        measures = {RELATION: self._relations, ARRANGEMENT: self._arrangements,
                    DATAFLOW: self._dataflows}  # fmt: skip
        return {name: measures[name]() for name in names}

    def _relations(self) -> set[Row]:
        inputs = self.engine.inputs
        return {
            (name, inputs[name].size)
            for name in self.program.checked.schema.relations
            if not name.startswith(PREFIX) and name in inputs
        }

    def _arrangements(self) -> set[Row]:
        rows = set(_shared_arrangements(self.engine.inputs.values()))
        for query in self._reported():
            assert query.plan is not None
            rows.update(_private_arrangements(query.key, query.plan.dataflow))
        for view in self.engine.views:
            rows.update(_private_arrangements(view.input.name, view.dataflow))
        return rows

    def _dataflows(self) -> set[Row]:
        """Live queries with their subscribers, and views (read by dataflows, not
        subscribed: 0)."""
        rows: set[Row] = {
            (q.key, len(q.plan.dataflow.root.all_operators()), len(q.subscribers))
            for q in self._reported()
            if q.plan is not None
        }
        views = self.engine.views
        return rows | {(v.input.name, len(v.dataflow.root.all_operators()), 0) for v in views}

    def _reported(self) -> list[LiveQuery]:
        """The live queries reported: those that read no `deltalog.*` relation."""
        return [q for q in self.live.by_key.values() if q.plan and not q.plan.dataflow.late]

    def _system_reads(self, text: str) -> set[str]:
        """The `deltalog.*` relations the query `text` reads, directly or through rules
        (a bad query is not judged here: its own call reports it)."""
        if not isinstance(text, str) or (PREFIX not in text and not self._rules_read_system()):
            return set()
        try:
            return self.program.reads(text) & NAMES
        except Interrupted:  # a budget ran out: not a bad query
            raise
        except DatalogError:
            return set()

    def _rules_read_system(self) -> bool:
        checked = self.program.checked
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
