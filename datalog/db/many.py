"""Several queries answered by one evaluation (`Database.query_many`, ADR 0061).

Layer: datalog (API). Imports `datalog.db.change` (`Answer`), the live queries'
owner (`datalog.db.queries`, read only), the planner's options and `differential`.

Each one-shot query builds and runs its own dataflow over everything it reads, so
asking for the relations of one recursive group one at a time computes the group
once per relation (`deltalog run` printing three of CSPA's relations did so). Here
the live queries among them are read as they stand and the others are answered by
one one-shot dataflow (`Planner.build_many`), started and retired as a one-shot
query's is.
"""

from __future__ import annotations

from collections.abc import Sequence

from datalog.db.change import Answer
from datalog.db.queries import LiveQueries
from datalog.eval.symbols import SymbolTable
from datalog.lang.checks import CheckedQuery
from datalog.plan.plan import JoinPlan, Options
from differential.batch import Updates


def answer_many(
    queries: LiveQueries, asked: Sequence[tuple[str, CheckedQuery]], plan: JoinPlan
) -> list[Updates]:
    """The current answers of `asked` (key, checked query): live states where live,
    the others from one one-shot dataflow whose strata are built and run once."""
    queries.repair_if_suspect()
    live = [queries.by_key.get(key) for key, _ in asked]
    answers = {i: q.answer() for i, q in enumerate(live) if q is not None}
    rest = [i for i, q in enumerate(live) if q is None]
    if rest:
        options = Options(plan, share="reuse", one_shot=True)
        checked = [asked[i][1] for i in rest]
        program = queries.program.checked
        built = queries.planner.build_many(program, checked, "answers", options)
        answers.update(zip(rest, built.start(queries.engine), strict=True))
        queries.engine.retire(built.dataflow)  # (a failed start dropped it already)
    return [answers[i] for i in range(len(asked))]


def answers(
    queries: LiveQueries,
    symbols: SymbolTable,
    asked: Sequence[tuple[str, CheckedQuery]],
    plan: JoinPlan,
) -> list[Answer]:
    """`answer_many` as `Answer`s: columns by variable (symbols decoded) and sizes."""
    found = answer_many(queries, asked, plan)
    return [answer(u, checked, symbols) for u, (_, checked) in zip(found, asked, strict=True)]


def answer(updates: Updates, checked: CheckedQuery, symbols: SymbolTable) -> Answer:
    """A query's consolidated answer as columns by answer variable, symbols decoded."""
    named = zip(checked.answer_vars, updates.columns, checked.answer_types, strict=True)
    columns = {v: symbols.strings(c) if k == "symbol" else c for v, c, k in named}
    return Answer(columns, len(updates))
