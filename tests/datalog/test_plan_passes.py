"""The plan as data (docs/adr/0051): named passes build an immutable `Plan`, `explain`
prints it, `explain(passes=True)` dumps it after each pass, and every caller (live
and one-shot queries, tenants, views, reads of the past) plans through one
`Planner` with `Options`."""

from __future__ import annotations

import dataclasses

import pytest

from datalog.db.database import Database
from datalog.lang.checks import check_query
from datalog.lang.errors import UnsupportedError
from datalog.lang.parser import parse_query
from datalog.plan.explain import plan_notes
from datalog.plan.plan import DeltaQuery, Join, Options, Plan, Scan, SetJoin
from datalog.plan.planner import PASSES, Planner

PROGRAM = """
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
.decl tri(x: number, y: number, z: number)
.decl hop(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
tri(x, y, z) :- edge(x, y), edge(y, z), edge(z, x).
hop(x, z) :- edge(x, y), edge(y, z).
"""


@pytest.fixture
def db() -> Database:
    database = Database()
    database.define(PROGRAM)
    database.insert("edge", [(1, 2), (2, 3), (3, 1)])
    return database


def _built(db: Database, text: str, options: Options) -> tuple[Plan, ...]:
    checked = check_query(parse_query(text), db.checked.schema)
    built = Planner(db.engine, db.symbols, db.functors).build(db.checked, checked, text, options)
    db.engine.retire(built.dataflow)
    return built.stages


def test_the_passes_run_in_order_and_each_stage_is_a_new_frozen_plan(db: Database) -> None:
    stages = _built(db, "reach(1, y)", Options())
    assert [s.passes[-1] for s in stages] == [*PASSES, "lowering"]
    assert [len(s.passes) for s in stages] == [1, 2, 3, 4, 5, 6, 7]
    assert stages[0].specialized is not None and stages[0].specialized.to == "query"
    assert "reach@bf" in stages[0].program.schema.relations  # the magic rewrite
    assert stages[2].computed >= {"reach@bf", "magic@reach@bf"}  # sharing decided it
    assert [s.relations for s in stages[3].strata] == [("magic@reach@bf",), ("reach@bf",)]
    assert not stages[3].strata[1].lowered  # the strata pass makes no body plan
    chosen, ordered, lowered = (s.strata[1].lowered[0].rules[1] for s in stages[4:])
    assert chosen.choice is not None and not chosen.order and not chosen.steps
    assert ordered.order and not ordered.steps  # order_joins orders, lowering builds
    assert lowered.steps and lowered.order == ordered.order
    with pytest.raises(dataclasses.FrozenInstanceError):
        stages[-1].name = "changed"  # type: ignore[misc]


def test_lowering_records_each_body_as_typed_steps(db: Database) -> None:
    lowered = _built(db, "tri(x, y, z)", Options())[-1]
    (stratum,) = lowered.strata
    (relation,) = stratum.lowered
    (rule,) = relation.rules
    assert isinstance(rule.steps[0], DeltaQuery)  # three atoms: worst-case optimal
    assert rule.steps[0].bindings == ("edge(x, y)", "edge(y, z)", "edge(z, x)")
    binary = _built(db, "hop(x, z)", Options("binary"))[-1]
    steps = binary.strata[0].lowered[0].rules[0].steps
    assert steps == (Scan("edge", "(x, y)"), Join("edge", "(y, z)", ("y",), True))
    assert binary.bodies[0].steps == (Scan("hop", "(x, z)"),)
    assert not any(isinstance(s, SetJoin) for s in binary.strata[0].lowered[0].finish)


def test_explain_text_is_printed_from_the_plan(db: Database) -> None:
    stages = _built(db, "reach(x, y)", Options(share="reuse"))
    text = db.explain("reach(x, y)")
    notes = [f"  {line}" for line in plan_notes(stages[-1])]
    lines = text.splitlines()
    assert lines[2 : 2 + len(notes)] == notes
    assert "  rule reach(x, z) :- reach(x, y), edge(y, z)." in notes


def test_explain_passes_dumps_the_plan_after_each_pass(db: Database) -> None:
    dump = db.explain("reach(1, y)", passes=True)
    headers = [line for line in dump.splitlines() if line.startswith("-- after pass")]
    names = [*PASSES, "lowering"]
    assert headers == [f"-- after pass {n}: {name} --" for n, name in enumerate(names, 1)]
    magic = dump.split("-- after pass 2")[0]
    assert "rule reach@bf(x, z) :- magic@reach@bf(x), reach@bf(x, y), edge(y, z)." in magic
    sharing = dump.split("-- after pass 3: sharing --")[1].split("-- after pass 4")[0]
    assert "derived relations computed here: magic@reach@bf, reach@bf" in sharing
    strata = dump.split("-- after pass 4: strata --")[1].split("-- after pass 5")[0]
    assert "stratum ['reach@bf'], recursive: one iteration scope" in strata
    assert dump.split("-- after pass 7: lowering --\n")[1] == db.explain("reach(1, y)")


def test_explain_passes_is_text_only(db: Database) -> None:
    with pytest.raises(UnsupportedError, match="passes=True"):
        db.explain("reach(x, y)", format="dot", passes=True)
    assert not db.engine.dataflows  # nothing was left running


def test_a_tenant_plans_with_options_not_by_mutating_a_planner(db: Database) -> None:
    db.subscribe("reach(1, y)", lambda change: None)
    (tenant,) = db.queries.tenants.by_key.values()
    assert tenant.plan is not None
    plan = tenant.plan.plan
    assert plan.options.magic == "tenant"
    assert plan.specialized is not None and plan.specialized.to == "tenant"
    assert "specialized to the parameter relation (magic sets)" in plan_notes(plan)


def test_a_view_is_planned_unspecialized_and_its_reader_prints_its_plan(db: Database) -> None:
    db.queries.tenants.enabled = False  # two plain live queries computing reach: a view
    db.subscribe("reach(x, y)", lambda change: None)
    db.subscribe("reach(x, y), x > 0", lambda change: None)
    (view,) = db.engine.views
    assert view.notes[0] == "recursive stratum ['reach']: one iteration scope"
    text = db.explain("reach(x, y), x > 1")
    assert "derived relation reach: read from the shared view `reach [view]`" in text
    assert "    recursive stratum ['reach']: one iteration scope" in text


def test_the_dot_graph_of_a_query_reading_a_view_names_the_view(db: Database) -> None:
    # The shared arrangement of a view's input is named `reach [view][0, 1]/2`: its
    # label was cut at the first bracket (a ValueError) before the plan held the graph.
    db.queries.tenants.enabled = False
    db.subscribe("reach(x, y)", lambda change: None)
    db.subscribe("reach(x, y), x > 0", lambda change: None)
    dot = db.explain("reach(x, y), x > 1", format="dot")
    assert 'label="reach [view] by [0, 1]\\nshared arrangement, read by 2 other queries"' in dot


def test_a_read_of_the_past_plans_one_shot_with_the_same_planner(db: Database) -> None:
    before = db.engine.epoch
    db.insert("edge", [(3, 4)])
    assert sorted(db.query("reach(1, y)", as_of=before)) == [(1,), (2,), (3,)]
    assert sorted(db.query("reach(1, y)")) == [(1,), (2,), (3,), (4,)]
