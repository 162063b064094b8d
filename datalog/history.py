"""Time travel: answers and proofs as of an earlier epoch (docs/adr/0024).

Layer: datalog (API). Imports the language, the planner and `differential`;
`Database.query`, `query_columns`, `query_arrow` and `why` call it for `as_of`.

The engine keeps the base relations' history (`Engine(history=N)`: each input's
state trace compacts no further than the oldest readable epoch), and
`ProgramVersions` keeps the program in force from each epoch on. An answer as of
a past epoch E is computed from scratch, like a one-shot query: the base
relations the query depends on, accumulated at E, are loaded into a throwaway
engine, and the query's dataflow, planned over the program of epoch E, runs
there once. Recursion, negation, aggregates and subsumption need nothing more,
and the live dataflows never see history (they read arrangements that compact
to the current epoch).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from numbers import Integral
from typing import TYPE_CHECKING

from datalog.checks import CheckedProgram, CheckedQuery, check_query, dependencies
from datalog.errors import EpochError, HistoryCompactedError, UnknownNameError
from datalog.parser import parse_query
from datalog.plan.body import UNIT
from datalog.plan.build import Planner, _relations_read
from datalog.plan.wcoj import JoinPlan
from differential.batch import Updates
from differential.engine import Engine

if TYPE_CHECKING:
    from datalog.database import Database

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


class ProgramVersions:
    """The checked program in force from each epoch on, oldest first.

    A definition that adds rules is an epoch of its own (docs/adr/0014): its
    program is recorded at that epoch, so an earlier epoch is answered with the
    rules it had. Versions older than the oldest readable epoch are forgotten.
    """

    def __init__(self, epoch: int, checked: CheckedProgram) -> None:
        self.epochs = [epoch]
        self.programs = [checked]

    def record(self, epoch: int, checked: CheckedProgram, oldest: int) -> None:
        """`checked` is in force from the end of `epoch` on; forget versions that
        no epoch from `oldest` on reads."""
        if self.epochs[-1] == epoch:
            self.programs[-1] = checked
        else:
            self.epochs.append(epoch)
            self.programs.append(checked)
        first = max(0, bisect_right(self.epochs, oldest) - 1)
        del self.epochs[:first], self.programs[:first]

    def at(self, epoch: int) -> CheckedProgram:
        """The program in force at the end of `epoch` (a readable epoch)."""
        return self.programs[max(0, bisect_right(self.epochs, epoch) - 1)]


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


def epoch_view(db: Database, as_of: object | None) -> EpochView:
    """The database at the end of epoch `as_of` (the current epoch if None)."""
    epoch = db.epoch if as_of is None else readable(db, as_of)
    return EpochView(epoch, db.programs.at(epoch), db.engine)


def past_epoch(db: Database, as_of: object | None) -> int | None:
    """`as_of` checked, if it names an epoch before the current one (else None)."""
    if as_of is None:
        return None
    epoch = readable(db, as_of)
    return epoch if epoch != db.epoch else None


def readable(db: Database, as_of: object) -> int:
    """`as_of` as an epoch whose state the database still has, or a clear error."""
    oldest, current = db.engine.oldest_readable(), db.epoch
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
        raise HistoryCompactedError(_compacted(db, epoch, oldest), oldest, current)
    return epoch


def _compacted(db: Database, epoch: int, oldest: int) -> str:
    """Why `epoch` cannot be read, naming the oldest epoch that can."""
    engine = db.engine
    head = f"epoch {epoch} is older than the history this database keeps: "
    head += f"the oldest readable epoch is {oldest}"
    if epoch == 0:
        return f"{head} (epoch 0 is before the database's first commit)"
    if oldest == engine.floor > 1:
        return f"{head} (a reopened database reads back to its snapshot, taken at epoch {oldest})"
    setting = engine.history
    kept = f"the last {setting} epochs" if (setting or 0) > 1 else "only the current epoch"
    return f"{head} (Database(history={setting}) keeps {kept})"


def answer_as_of(
    db: Database, text: str, plan: JoinPlan, epoch: int
) -> tuple[Updates, CheckedQuery]:
    """The answer of query `text` at the end of the readable past `epoch`."""
    key, _ = db._check_query(text, plan)  # the plan, and a query valid now
    view = epoch_view(db, epoch)
    try:
        checked = check_query(parse_query(text), view.checked.schema)
    except UnknownNameError as error:  # valid now: declared after `epoch`
        message = f"{error.message} at epoch {epoch} (it was declared later)"
        raise UnknownNameError(message, error.span, error.source) from None
    return _evaluate(db, view, checked, f"{key} as of {epoch}", plan), checked


def _evaluate(
    db: Database, view: EpochView, query: CheckedQuery, name: str, plan: JoinPlan
) -> Updates:
    """Run the query's dataflow once over the base relations of `view`."""
    engine = Engine()
    for relation in [UNIT, *view.checked.schema.relations]:
        source = db.engine.inputs[relation]
        engine.create_input(relation, source.dtypes, source.semantics)
    needed = dependencies(view.checked, _relations_read(query)) | {UNIT}
    contents = {}
    for relation in needed & set(engine.inputs):
        state = view.state(relation)
        assert state is not None
        contents[relation] = (state.columns, state.diffs)
    engine.load(contents, view.epoch)
    planner = Planner(engine, view.checked, db.symbols, plan, functors=db.functors, one_shot=True)
    built = planner.build(query, name)
    return built.start(engine)
