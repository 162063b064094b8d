"""The new extenders at work inside delta queries (targeted, with spies).

The property tests in test_delta_query.py show that plans using unary
proposers, constants and negated bindings agree with the binary plan and the
reference; these show that the extenders really do the work they are there
for: a small unary set proposes instead of a key with a huge fan-out
(categorical skew), `x = c` proposes its one value, and a negated relation's
own changes run through its pipeline, with no antijoin after the delta query.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from datalog.db.database import Database
from datalog.plan.wcoj import JoinPlan
from joins.extenders import ConstantExtender, Prefixes, Proposals, UnaryExtender
from joins.pipeline import Pipeline
from tests.datalog.answers import Accumulated

DECLS = """
.decl e(x: number, y: number)
.decl f(x: number, y: number)
.decl v(x: number)
"""

HUB = 0  # e(HUB, y) for 200 values of y: a key with a huge fan-out


@pytest.fixture
def proposed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Candidates proposed by unary and constant extenders, by kind."""
    seen: Counter[str] = Counter()
    for kind, cls in (("unary", UnaryExtender), ("constant", ConstantExtender)):
        original = cls.propose

        def spy(
            self: Any, p: Prefixes, rows: Any, time: Any, *, _o: Any = original, _k: str = kind
        ) -> Proposals:
            out: Proposals = _o(self, p, rows, time)
            seen[_k] += len(out)
            return out

        monkeypatch.setattr(cls, "propose", spy)
    yield seen


def _db(query: str) -> tuple[Database, dict[str, Accumulated]]:
    db = Database()
    db.define(DECLS)
    db.insert("e", [(HUB, y) for y in range(1, 201)])
    db.insert("v", [(5,), (7,)])
    plans: tuple[JoinPlan, ...] = ("wcoj", "binary")
    answers: dict[str, Accumulated] = {plan: Accumulated() for plan in plans}
    for plan in plans:
        db.subscribe(query, answers[plan], plan=plan)
    return db, answers


def test_a_small_unary_set_proposes_instead_of_a_hub_with_a_huge_fan_out(
    proposed: Counter[str],
) -> None:
    query = "e(a, b), e(b, c), v(c)"
    db, answers = _db(query)
    assert "c by e(b, c)|unary v(c)" in db.explain(query, plan="wcoj")
    proposed.clear()
    db.insert("e", [(a, HUB) for a in range(300, 350)])  # 50 new paths into the hub
    # From e(a, HUB): v proposes its 2 values per prefix, not the hub's 200.
    assert proposed["unary"] == 50 * 2
    expected = {(a, HUB, c) for a in range(300, 350) for c in (5, 7)}
    assert answers["wcoj"].rows() == answers["binary"].rows() == expected


def test_a_constant_proposes_its_one_value(proposed: Counter[str]) -> None:
    query = "e(a, b), e(b, c), c = 7"
    db, answers = _db(query)
    explained = db.explain(query, plan="wcoj")
    assert "c by const 7|e(b, c)" in explained
    assert "pipeline from de(b, c): check c = 7" in explained  # a source conflict
    proposed.clear()
    db.insert("e", [(a, HUB) for a in range(300, 350)])
    assert proposed["constant"] == 50
    expected = {(a, HUB, 7) for a in range(300, 350)}
    assert answers["wcoj"].rows() == answers["binary"].rows() == expected


def test_a_negated_relation_changing_alone_runs_its_own_pipeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from joins.delta_query import DeltaQueryOp

    runs: Counter[str] = Counter()
    original = DeltaQueryOp._run

    def spy(self: DeltaQueryOp, pipeline: Pipeline, *args: Any) -> Any:
        runs[self.patterns[pipeline.source].show()] += 1
        return original(self, pipeline, *args)

    monkeypatch.setattr(DeltaQueryOp, "_run", spy)
    query = "e(a, b), e(b, c), !f(a, c)"
    db, answers = _db(query)
    db.insert("e", [(1, HUB), (2, HUB)])
    explained = db.explain(query, plan="wcoj")
    assert "antijoin" not in explained
    assert "pipeline from d!f(a, c): b by e(a, b)|e(b, c)" in explained
    edges = {(HUB, y) for y in range(1, 201)} | {(1, HUB), (2, HUB)}
    every = {(a, b, c) for a, b in edges for b2, c in edges if b == b2}
    assert answers["wcoj"].rows() == answers["binary"].rows() == every
    runs.clear()
    db.insert("f", [(1, 5), (2, 7), (9, 9)])
    assert runs == Counter({"!f(a, c)": 1})
    assert answers["wcoj"].rows() == answers["binary"].rows() == every - {(1, HUB, 5), (2, HUB, 7)}
    with db.transaction() as tx:  # the negated relation and a positive one together
        tx.retract("f", [(1, 5)])
        tx.retract("e", [(HUB, 7)])
        tx.insert("f", [(1, 6)])
    edges.remove((HUB, 7))
    now = {(a, b, c) for a, b in edges for b2, c in edges if b == b2} - {(1, HUB, 6)}
    assert answers["wcoj"].rows() == answers["binary"].rows() == now


def test_a_negated_multiset_input_is_read_as_the_set_of_its_present_tuples() -> None:
    db = Database()
    db.define(DECLS + ".decl m(x: number, y: number) multiset\n")
    query = "e(a, b), e(b, c), !m(a, c)"
    answers = {plan: Accumulated() for plan in ("wcoj", "binary")}
    db.subscribe(query, answers["wcoj"], plan="wcoj")
    db.subscribe(query, answers["binary"], plan="binary")
    db.insert("e", [(1, 2), (2, 3), (2, 4)])
    db.insert("m", [(1, 3)])
    db.insert("m", [(1, 3)])  # count 2: still the factor 0, not -1
    assert answers["wcoj"].rows() == answers["binary"].rows() == {(1, 2, 4)}
    db.retract("m", [(1, 3)])
    assert answers["wcoj"].rows() == {(1, 2, 4)}
    db.retract("m", [(1, 3)])
    assert answers["wcoj"].rows() == answers["binary"].rows() == {(1, 2, 3), (1, 2, 4)}
    assert "check !m(a, c)" in db.explain(query, plan="wcoj")


STAR = """
.decl first(p: number, v: symbol)
.decl last(p: number, v: symbol)
.decl age(p: number, v: number)
.decl star(p: number)
star(p) :- first(p, _), last(p, _), age(p, _).
"""


def test_a_star_of_wildcard_atoms_takes_a_delta_query_not_binary_joins() -> None:
    """3DF's own star join: each atom is a projection the delta query takes (no
    fallback to binary joins under plan=wcoj), and answers agree under changes."""
    import random

    rng = random.Random(11)
    db = Database()
    db.define(STAR)
    assert "delta query (worst-case optimal) over first(p, _), last(p, _), age(p, _)" in (
        db.explain("star(p)", plan="wcoj")
    )
    answers = {plan: Accumulated() for plan in ("wcoj", "binary")}
    for plan, answer in answers.items():
        db.subscribe("star(p)", answer, plan=plan)  # type: ignore[arg-type]
    facts: dict[str, set[tuple[Any, ...]]] = {"first": set(), "last": set(), "age": set()}
    for _ in range(150):
        relation = rng.choice(sorted(facts))
        row = (rng.randrange(5), rng.choice(["a", "b"]) if relation != "age" else rng.randrange(2))
        if row in facts[relation]:
            db.retract(relation, [row])
            facts[relation].discard(row)
        else:
            db.insert(relation, [row])
            facts[relation].add(row)
        expected = {(p,) for p in range(5) if all(any(r[0] == p for r in facts[n]) for n in facts)}
        for answer in answers.values():
            assert answer.rows() == expected


def test_explain_says_when_wcoj_was_asked_for_but_not_built() -> None:
    db = Database()
    db.define(DECLS + ".decl r(x: number)\nr(x) :- e(x, _), v(y), x < y.")
    assert "joined binary instead" in db.explain("r(x)", plan="wcoj")


def test_explain_lists_the_operators_actually_built() -> None:
    db = Database()
    db.define(STAR)
    built = db.explain("star(p)", plan="wcoj").split("dataflow (the operators built")[1]
    assert "delta_query(first(p, _), last(p, _), age(p, _))" in built and "join(" not in built
    built = db.explain("star(p)", plan="binary").split("dataflow (the operators built")[1]
    assert "join(" in built and "delta_query" not in built
