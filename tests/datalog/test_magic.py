"""Specialization (magic sets): constants in a query are pushed into the rules.

The specialized plan must give the unspecialized answer, stay correct under
changes, and explore less.
"""

from __future__ import annotations

import numpy as np
import pytest

from datalog import Change, Database
from datalog.lang.ast import Program
from datalog.lang.checks import CheckedProgram, CheckedQuery
from datalog.lang.errors import BudgetExceeded
from datalog.plan import magic
from datalog.plan.magic import Specialized
from differential.tuning import TUNING, tuned

PROGRAM = """
.decl edge(x: number, y: number)
.decl left(x: number, y: number)
.decl right(x: number, y: number)
.decl blocked(x: number)
.decl open(x: number, y: number)
left(x, y) :- edge(x, y).
left(x, z) :- left(x, y), edge(y, z).
right(x, y) :- edge(x, y).
right(x, z) :- edge(x, y), right(y, z).
open(x, y) :- edge(x, y), !blocked(y).
"""


def _database(seed: int = 0, nodes: int = 60, edges: int = 90) -> Database:
    db = Database()
    db.define(PROGRAM)
    rng = np.random.default_rng(seed)
    db.insert("edge", [rng.integers(0, nodes, edges), rng.integers(0, nodes, edges)])
    return db


def _filtered(db: Database, relation: str, position: int, value: int) -> set[tuple[int, ...]]:
    rows = db.query(f"{relation}(x, y)")
    return {
        tuple(v for i, v in enumerate(r) if i != position) for r in rows if r[position] == value
    }


def test_specialized_answers_equal_filtered_full_answers_for_each_binding_pattern() -> None:
    db = _database()
    for relation in ("left", "right"):
        for node in range(0, 60, 7):
            assert set(db.query(f"{relation}({node}, y)")) == _filtered(db, relation, 0, node)
            assert set(db.query(f"{relation}(x, {node})")) == _filtered(db, relation, 1, node)


def test_the_explain_of_a_query_with_a_constant_shows_the_magic_rules() -> None:
    db = _database()
    plan = db.explain("left(3, y)")
    assert "magic sets" in plan
    assert "magic@left@bf" in plan
    assert "magic" not in db.explain("left(x, y)")


def test_a_rule_with_negation_is_specialized_and_answers_as_unspecialized() -> None:
    db = _database()
    db.insert("blocked", [(1,), (2,)])
    assert "magic@open@bf" in db.explain("open(3, y)")
    assert set(db.query("open(3, y)")) == _filtered(db, "open", 0, 3)


def test_inserted_facts_of_a_derived_relation_reach_its_specialized_copy() -> None:
    db = _database()
    db.insert("left", [(3, 999)])
    assert (999,) in db.query("left(3, y)")


def test_a_specialized_subscription_follows_inserts_and_retractions() -> None:
    db = _database(seed=1)
    state: dict[tuple[int, ...], int] = {}

    def accumulate(change: Change) -> None:
        for row, diff in zip(change.rows, change.diffs, strict=True):
            state[row] = state.get(row, 0) + diff
            assert state[row] in (0, 1)

    db.subscribe("left(5, y)", accumulate)
    rng = np.random.default_rng(2)
    for _ in range(15):
        with db.transaction() as tx:
            tx.insert("edge", [tuple(rng.integers(0, 60, 2).tolist())])
            present = db.query("edge(x, y)")
            tx.retract("edge", [present[int(rng.integers(len(present)))]])
        assert {r for r, n in state.items() if n} == _filtered(db, "left", 0, 5)


def test_a_query_asked_again_is_specialized_once_and_anew_after_a_definition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The planner remembers a query's specialization for its program
    (`Tuning.memo_specializations`): asked again, the same plan and answers without
    rewriting again; a definition is a new program, specialized anew; off (the
    twin), every read rewrites and plans the same."""
    rewrites: list[str] = []
    real = magic._specialize  # (what `specialize` calls, looked up when called)

    def counted(p: CheckedProgram, q: CheckedQuery, tenant: bool) -> Specialized | None:
        rewrites.append(q.source)
        return real(p, q, tenant)

    monkeypatch.setattr(magic, "_specialize", counted)
    db = _database()
    first = [db.explain("left(3, y)"), db.query("left(3, y)")]
    for _ in range(3):
        assert [db.explain("left(3, y)"), db.query("left(3, y)")] == first
    assert rewrites.count("left(3, y)") == 1
    assert sorted(first[1]) == sorted((y,) for (y,) in _filtered(db, "left", 0, 3))
    with tuned(TUNING.but(memo_specializations=False)):
        assert [db.explain("left(3, y)"), db.query("left(3, y)")] == first
    assert rewrites.count("left(3, y)") == 3
    db.define("left(x, y) :- right(y, x).")
    after = db.query("left(3, y)")
    assert rewrites.count("left(3, y)") == 4 and db.query("left(3, y)") == after
    assert sorted(after) == sorted((y,) for (y,) in _filtered(db, "left", 0, 3))
    assert rewrites.count("left(3, y)") == 4


def test_a_budget_that_runs_out_while_a_query_is_specialized_stops_it_and_is_not_remembered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by the server's fairness test under the specialization memo: a budget
    that ran out inside the check of the rewritten program (a `BudgetExceeded` is a
    `DatalogError`) was taken for a rewrite the checker rejects, so the query was
    planned unspecialized, and the memo kept that for the next read. It stops the
    request; the next read is specialized."""
    real = magic.check_program
    runs_out = [True]

    def check(program: Program) -> CheckedProgram:
        if runs_out and runs_out.pop():
            raise BudgetExceeded("the request's budget ran out")
        return real(program)

    monkeypatch.setattr(magic, "check_program", check)
    db = _database()
    with pytest.raises(BudgetExceeded):
        db.explain("left(3, y)")
    assert "specialized to the query's constants" in db.explain("left(3, y)")
    assert sorted(db.query("left(3, y)")) == sorted((y,) for (y,) in _filtered(db, "left", 0, 3))
