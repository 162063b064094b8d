"""Time travel: answers and proofs as of an earlier epoch (docs/adr/0024).

Layer: datalog (API). Imports the language, the planner, `datalog.db.definitions` and
`differential`; `Database.query`, `query_columns`, `query_arrow` and `why` call it
for `as_of`.

The engine keeps the base relations' history (`Engine(history=N)`: each input's
state trace compacts no further than the oldest readable epoch), and
`ProgramVersions` (`datalog.db.definitions`) keeps the program in force from each
epoch on. An answer as of a past epoch E is computed from scratch, like a one-shot query: the base
relations the query depends on, accumulated at E, are loaded into a throwaway
engine, and the query's dataflow, planned over the program of epoch E, runs
there once. Recursion, negation, aggregates and subsumption need nothing more,
and the live dataflows never see history (they read arrangements that compact
to the current epoch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral

from datalog.db.definitions import ProgramVersions
from datalog.eval.functors import FunctorBinding
from datalog.eval.symbols import SymbolTable
from datalog.lang.checks import CheckedProgram, CheckedQuery, check_query, dependencies
from datalog.lang.errors import EpochError, HistoryCompactedError, UnknownNameError
from datalog.lang.parser import parse_query
from datalog.lang.system import UNIT
from datalog.plan.plan import JoinPlan, Options
from datalog.plan.planner import Planner
from differential.batch import Updates
from differential.engine import Engine

DEFAULT_HISTORY = 1000


def history_setting(history: object) -> int | None:
    """`Database(history=...)` checked: None (keep every epoch) or a count >= 0."""
    if history is None:
        return None
    if isinstance(history, bool) or not isinstance(history, Integral) or int(history) < 0:
        raise EpochError(
            f"`history` must be a number of epochs (an integer >= 0) or None, not {history!r}",
            oldest=0,
            current=0,
        )
    return int(history)


@dataclass(frozen=True)
class EpochView:
    """The database as it was at the end of `epoch`: its program and base relations."""

    epoch: int
    checked: CheckedProgram
    engine: Engine

    def state(self, relation: str) -> Updates | None:
        """The relation's rows and counts at `epoch` (None: it has no input)."""
        if relation not in self.engine.inputs:
            return None
        return self.engine.state_as_of(relation, self.epoch)


@dataclass(frozen=True)
class Past:
    """What reading the past needs: the engine (the base relations' history) and the
    program in force at each epoch, with the symbols and functors to plan with."""

    engine: Engine
    versions: ProgramVersions
    symbols: SymbolTable
    functors: Mapping[str, FunctorBinding]

    def view(self, as_of: object | None) -> EpochView:
        """The database at the end of epoch `as_of` (the current epoch if None)."""
        epoch = self.engine.epoch if as_of is None else self.readable(as_of)
        return EpochView(epoch, self.versions.at(epoch), self.engine)

    def past_epoch(self, as_of: object | None) -> int | None:
        """`as_of` checked, if it names an epoch before the current one (else None)."""
        if as_of is None:
            return None
        epoch = self.readable(as_of)
        return epoch if epoch != self.engine.epoch else None

    def readable(self, as_of: object) -> int:
        """`as_of` as an epoch whose state the database still has, or a clear error."""
        oldest, current = self.engine.oldest_readable(), self.engine.epoch
        if isinstance(as_of, bool) or not isinstance(as_of, Integral):
            message = f"`as_of` must be an epoch number (an integer), not {as_of!r}"
            raise EpochError(message, oldest, current)
        epoch = int(as_of)
        if epoch < 0:
            raise EpochError(f"`as_of` must be an epoch >= 0, not {epoch}", oldest, current)
        if epoch > current:
            message = f"epoch {epoch} has not happened yet: the current epoch is {current}"
            raise EpochError(message, oldest, current)
        if epoch < oldest:
            raise HistoryCompactedError(_compacted(self.engine, epoch, oldest), oldest, current)
        return epoch

    def answer(
        self, text: str, name: str, plan: JoinPlan, epoch: int
    ) -> tuple[Updates, CheckedQuery]:
        """The answer of query `text` (valid now) at the end of the readable past `epoch`."""
        view = self.view(epoch)
        try:
            checked = check_query(parse_query(text), view.checked.schema)
        except UnknownNameError as error:  # valid now: declared after `epoch`
            message = f"{error.message} at epoch {epoch} (it was declared later)"
            raise UnknownNameError(message, error.span, error.source) from None
        return self._evaluate(view, checked, f"{name} as of {epoch}", plan), checked

    def _evaluate(self, view: EpochView, query: CheckedQuery, name: str, plan: JoinPlan) -> Updates:
        """Run the query's dataflow once over the base relations of `view`."""
        from datalog.plan.passes import relations_read

        engine = Engine()
        for relation in [UNIT, *view.checked.schema.relations]:
            source = self.engine.inputs[relation]
            engine.create_input(relation, source.dtypes, source.semantics)
        needed = dependencies(view.checked, relations_read(query)) | {UNIT}
        contents = {}
        for relation in needed & set(engine.inputs):
            state = view.state(relation)
            assert state is not None
            contents[relation] = (state.columns, state.diffs)
        engine.load(contents, view.epoch)
        planner = Planner(engine, self.symbols, self.functors)  # over the past's engine
        return planner.build(view.checked, query, name, Options(plan, one_shot=True)).start(engine)


def _compacted(engine: Engine, epoch: int, oldest: int) -> str:
    """Why `epoch` cannot be read, naming the oldest epoch that can."""
    head = f"epoch {epoch} is older than the history this database keeps: "
    head += f"the oldest readable epoch is {oldest}"
    if epoch == 0:
        return f"{head} (epoch 0 is before the database's first commit)"
    if oldest == engine.floor > 1:
        return f"{head} (a reopened database reads back to its snapshot, taken at epoch {oldest})"
    setting = engine.history
    kept = f"the last {setting} epochs" if (setting or 0) > 1 else "only the current epoch"
    return f"{head} (Database(history={setting}) keeps {kept})"
