"""Join ordering and the choice of a delta query are planning passes (docs/adr/0058):
`choose join` and `order joins` record typed steps over variables only, and lowering
builds exactly what the steps say."""

from __future__ import annotations

from dataclasses import replace

import pytest

from datalog.db.database import Database
from datalog.lang.checks import check_query
from datalog.lang.parser import parse_query
from datalog.plan.build import Lowering, QueryPlan
from datalog.plan.plan import (
    Aggregate,
    Antijoin,
    Binary,
    BodyPlan,
    DeltaQuery,
    Filter,
    Join,
    JoinPlan,
    Options,
    Plan,
    Scan,
    Step,
)
from datalog.plan.planner import PASSES, Planner
from tests.datalog.test_explain_golden import PLANS, QUERIES, golden_database

PROGRAM = """
.decl edge(x: number, y: number)
.decl label(x: number, s: symbol)
.decl tri(x: number, y: number, z: number)
tri(x, y, z) :- edge(x, y), edge(y, z), edge(z, x).
"""


@pytest.fixture
def db() -> Database:
    database = Database()
    database.define(PROGRAM)
    database.insert("edge", [(1, 2), (2, 3), (3, 1), (3, 4)])
    database.insert("label", [(1, "a"), (4, "d")])
    return database


def _stages(db: Database, text: str, join_plan: JoinPlan = "auto") -> tuple[Plan, ...]:
    checked = check_query(parse_query(text), db.checked.schema)
    planner = Planner(db.engine, db.symbols, db.functors)
    built = planner.build(db.checked, checked, text, Options(join_plan, share="reuse"))
    db.engine.retire(built.dataflow)
    return built.stages


def _stage(stages: tuple[Plan, ...], name: str) -> Plan:
    (found,) = [s for s in stages if s.passes[-1] == name]
    return found


def _query_body(db: Database, text: str, name: str, join_plan: JoinPlan = "auto") -> BodyPlan:
    (body,) = _stage(_stages(db, text, join_plan), name).bodies
    return body


def test_the_join_passes_run_after_strata_and_before_lowering(db: Database) -> None:
    stages = _stages(db, "tri(x, y, z)")
    assert PASSES[-2:] == ("choose join", "order joins")
    assert [s.passes[-1] for s in stages][-3:] == ["choose join", "order joins", "lowering"]


def test_choose_join_takes_three_connected_atoms_under_auto_and_two_under_wcoj(
    db: Database,
) -> None:
    three = 'edge(x, y), edge(y, z), edge(z, x), x < y, !label(z, "d")'
    choice = _query_body(db, three, "choose join").choice
    assert choice is not None and choice.delta is not None
    assert (choice.delta.atoms, choice.delta.comparisons) == ((0, 1, 2), (3,))
    two = "edge(x, y), edge(y, z)"
    auto = _query_body(db, two, "choose join").choice
    assert auto is not None and auto.delta is None and auto.binary is None
    wcoj = _query_body(db, two, "choose join", "wcoj").choice
    assert wcoj is not None and wcoj.delta is not None and wcoj.delta.atoms == (0, 1)
    apart = _query_body(db, "edge(x, y), edge(z, w)", "choose join", "wcoj").choice
    assert apart == replace(apart, delta=None, binary=Binary("the atoms are not connected"))
    binary = _query_body(db, three, "choose join", "binary").choice
    assert binary is not None and binary.delta is None


def test_choose_join_chooses_inside_an_ungrouped_aggregate_only(db: Database) -> None:
    ungrouped = "n = count : { edge(x, y), edge(y, z), edge(z, x) }"
    choice = _query_body(db, ungrouped, "choose join").choice
    assert choice is not None and choice.delta is None
    (inner,) = choice.inner
    assert inner.delta is not None and inner.delta.atoms == (0, 1, 2)
    grouped = "edge(a, _), n = count : { edge(a, y), edge(y, z), edge(z, a) }"
    choice = _query_body(db, grouped, "choose join").choice
    assert choice is not None
    (inner,) = choice.inner  # it starts from its groups: joined to them
    assert inner.delta is None


def test_order_joins_filters_early_and_joins_the_atom_sharing_most_bound_variables(
    db: Database,
) -> None:
    text = 'label(x, s), edge(y, z), edge(x, y), x < 3, !label(z, "q")'
    order = _query_body(db, text, "order joins", "binary").order
    assert order == (
        Scan("label", "(x, s)"),
        Filter(),  # x < 3 as soon as x is bound
        Join("edge", "(x, y)", ("x",), True),  # shares x: before edge(y, z)
        Join("edge", "(y, z)", ("y",), True),
        Antijoin("label", "(z, …)", ("z",)),
    )
    step = order[1]
    assert isinstance(step, Filter) and step.comparison is not None  # what lowering builds


def test_order_joins_names_fresh_variables_in_the_plan_with_their_types(db: Database) -> None:
    text = "edge(x, _), !edge(x + 1, x), n = count : { edge(x, _) }"
    body = _query_body(db, text, "order joins")
    lines = [line for step in body.order for line in step.lines()]
    # numbered as made: the aggregate lifted, the negation applied, the aggregate's body
    assert "antijoin edge(…, x) on ['_e#1', 'x']" in lines
    (aggregate,) = [s for s in body.order if isinstance(s, Aggregate)]
    assert aggregate.inner == (Join("edge", "(x, _w#2)", ("x",), True),)
    assert body.types["_e#1"] == "number" and body.types["_agg#0"] == "number"


def _flat(steps: tuple[Step, ...]) -> list[Step]:
    """The steps as lowering builds them: an aggregate's body first."""
    out: list[Step] = []
    for step in steps:
        if isinstance(step, Aggregate):
            out += _flat(step.inner)
        out.append(replace(step, pipelines=()) if isinstance(step, DeltaQuery) else step)
    return out


def _bodies(plan: Plan) -> list[BodyPlan]:
    rules = [r for s in plan.strata for rel in s.lowered for r in rel.rules]
    return [*rules, *plan.bodies]


@pytest.mark.parametrize("join_plan", PLANS)
def test_lowering_builds_the_ordered_steps_and_adds_only_pipelines(join_plan: JoinPlan) -> None:
    db = golden_database()
    for text in QUERIES:
        stages = _stages(db, text, join_plan)
        ordered, lowered = _stage(stages, "order joins"), stages[-1]
        for planned, built in zip(_bodies(ordered), _bodies(lowered), strict=True):
            assert _flat(planned.order) == [
                replace(s, pipelines=()) if isinstance(s, DeltaQuery) else s for s in built.steps
            ]


def test_lowering_follows_the_plan_it_is_given(db: Database) -> None:
    """Lowering decides nothing: the same body with its joins planned in another
    order is built in that order, and answers the same."""
    text = "edge(x, y), label(y, s), edge(y, z)"
    stages = _stages(db, text, "binary")
    ordered = _stage(stages, "order joins")
    (body,) = ordered.bodies
    scan, first, second = body.order
    assert isinstance(first, Join) and isinstance(second, Join)
    assert [first.relation, second.relation] == ["label", "edge"]
    swapped = replace(body, order=(scan, second, first))
    other = replace(ordered, bodies=(swapped,))
    built: dict[str, list[str]] = {}
    answers: dict[str, list[tuple[object, ...]]] = {}
    for name, plan in (("planned", ordered), ("swapped", other)):
        dataflow = db.engine.dataflow(name)
        output, lowered = Lowering(db.engine, db.symbols, plan, lambda read: read).query(dataflow)
        built[name] = [step.lines()[0] for step in lowered.bodies[0].steps]
        answer = QueryPlan(dataflow, output, (lowered,)).start(db.engine)
        answers[name] = sorted(zip(*(c.tolist() for c in answer.columns), strict=True))
        db.engine.retire(dataflow)
    assert answers["planned"] == answers["swapped"]  # (symbols as their ids)
    assert len(answers["planned"]) == len(db.query(text, plan="binary")) == 1
    assert built["planned"] == [
        "scan edge(x, y)",
        "join label(y, s) on ['y'] (shared arrangement)",
        "join edge(y, z) on ['y'] (shared arrangement)",
    ]
    assert built["swapped"] == [built["planned"][0], built["planned"][2], built["planned"][1]]
