"""Aggregates used as expressions, as in Soufflé: a head argument, an argument of a
body atom (or a negated one), inside arithmetic; the engine, live under inserts and
retractions, against the reference evaluator and hand-computed answers, and the
errors that point at the aggregate."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datalog import Change, Database
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.errors import DatalogError, DatalogSemanticError, TypeMismatchError
from datalog.lang.parser import parse_program, parse_query
from tests.budget import examples

DECLS = """
.decl A(n: number, p: number)
.decl B(n: number, p: number)
.decl D(n: number)
"""

# Each program uses aggregates as expressions; `same` is the rule written the old
# way (the aggregate bound to a variable in the body), which must give the same rows.
CASES = [
    (  # a head argument, grouped by a variable of the body (Soufflé's docs)
        ".decl C(n: number, c: number)\nC(n, count : { A(n, _) }) :- D(n).",
        ".decl C(n: number, c: number)\nC(n, c) :- D(n), c = count : { A(n, _) }.",
    ),
    (  # inside arithmetic in the head
        ".decl C(n: number, c: number)\nC(n, 1 + 2 * max p : { A(n, p) }) :- D(n).",
        ".decl C(n: number, c: number)\nC(n, 1 + 2 * m) :- D(n), m = max p : { A(n, p) }.",
    ),
    (  # an argument of a body atom
        ".decl C(n: number)\nC(n) :- D(n), B(n, max p : { A(n, p) }).",
        ".decl C(n: number)\nC(n) :- D(n), B(n, m), m = max p : { A(n, p) }.",
    ),
    (  # an argument of a negated atom
        ".decl C(n: number)\nC(n) :- D(n), !B(n, min p : { A(n, p) }).",
        ".decl C(n: number)\nC(n) :- D(n), !B(n, m), m = min p : { A(n, p) }.",
    ),
    (  # inside arithmetic on both sides of a comparison (Soufflé's docs)
        ".decl C(n: number, m: number)\n"
        "C(n, m) :- B(n, m), 2 * m + 1 = 2 * sum s : { A(n, s) } + 1.",
        ".decl C(n: number, m: number)\nC(n, m) :- B(n, m), t = sum s : { A(n, s) }, m = t.",
    ),
    (  # an aggregate in an atom inside another aggregate's body
        ".decl C(c: number)\nC(count : { D(n), B(n, max p : { A(n, p) }) }) :- D(_).",
        ".decl C(c: number)\n.decl M(n: number)\n"
        "M(n) :- D(n), B(n, m), m = max p : { A(n, p) }.\n"
        "C(c) :- D(_), c = count : { M(_) }.",
    ),
    (  # the same aggregate twice, and in the head of a recursive relation
        ".decl C(n: number, c: number)\n"
        "C(n, count : { A(n, _) }) :- D(n), count : { A(n, _) } > 0.\n"
        "C(n, c + 1) :- C(n, c), c < 3.",
        ".decl C(n: number, c: number)\n"
        "C(n, c) :- D(n), c = count : { A(n, _) }, c > 0.\n"
        "C(n, c + 1) :- C(n, c), c < 3.",
    ),
]

STEPS = st.lists(
    st.tuples(
        st.booleans(), st.sampled_from("ABD"), st.tuples(st.integers(0, 3), st.integers(0, 4))
    ),
    max_size=12,
)


def _facts_of(current: dict[str, set[tuple[int, ...]]]) -> dict[str, list[tuple[int, ...]]]:
    return {name: sorted(rows) for name, rows in current.items()}


def _row(relation: str, pair: tuple[int, int]) -> tuple[int, ...]:
    return (pair[0],) if relation == "D" else pair


@pytest.mark.parametrize(("text", "same"), CASES)
@settings(max_examples=examples(40), deadline=None)
@given(steps=STEPS)
def test_aggregates_as_expressions_equal_the_rule_written_with_a_variable(
    text: str, same: str, steps: list[tuple[bool, str, tuple[int, int]]]
) -> None:
    """The engine, live after every commit, equals the reference evaluator of the
    same program and of the program written the old way."""
    program, old = (
        check_program(parse_program(DECLS + text)),
        check_program(parse_program(DECLS + same)),
    )
    asked = "C(x, y)" if ".decl C(n: number, " in text else "C(x)"
    query = check_query(parse_query(asked), old.schema)
    db = Database()
    db.define(DECLS + text)
    live: Counter[tuple[Any, ...]] = Counter()

    def seen(change: Change) -> None:
        for row, diff in zip(change.rows, change.diffs, strict=True):
            live[row] += diff

    db.subscribe(asked, seen)
    current: dict[str, set[tuple[int, ...]]] = {"A": set(), "B": set(), "D": set()}
    for inserting, relation, pair in steps:
        row = _row(relation, pair)
        if inserting:
            db.insert(relation, [row])
            current[relation].add(row)
        else:
            db.retract(relation, [row])
            current[relation].discard(row)
        expected = reference.answer(query, reference.evaluate(old, _facts_of(current)))
        assert reference.evaluate(program, _facts_of(current))["C"] == expected
        assert set(db.query(asked)) == expected
        assert {row for row, n in live.items() if n} == expected
        assert all(n in (0, 1) for n in live.values())


def test_a_head_aggregate_computes_the_documented_answer() -> None:
    db = Database()
    db.define(DECLS + ".decl C(n: number, c: number)\nC(n, count : { A(n, _) }) :- D(n).")
    db.insert("D", [(1,), (2,)])
    db.insert("A", [(1, 5), (1, 6), (3, 7)])
    assert sorted(db.query("C(x, y)")) == [(1, 2), (2, 0)]
    db.retract("A", [(1, 5)])
    assert sorted(db.query("C(x, y)")) == [(1, 1), (2, 0)]


def test_an_aggregate_in_a_query_atom() -> None:
    db = Database()
    db.define(DECLS)
    db.insert("A", [(1, 2), (1, 3), (2, 4)])
    db.insert("B", [(1, 3), (2, 3)])
    assert sorted(db.query("B(n, max p : { A(n, p) })")) == [(1,)]


@pytest.mark.parametrize(
    ("text", "error", "caret"),
    [
        (  # a symbol column cannot hold a count: the error points at the aggregate
            ".decl C(n: number, s: symbol)\nC(n, count : { A(n, _) }) :- D(n).",
            TypeMismatchError,
            "count : { A(n, _) }",
        ),
        (  # aggregating over the relation being defined is recursion through it
            ".decl C(n: number, c: number)\nC(n, max c : { C(n, c) }) :- D(n).",
            DatalogSemanticError,
            "C(n, c)",
        ),
        (  # the group variable is bound nowhere outside the aggregate: local to it
            ".decl C(n: number, c: number)\nC(n, count : { A(n, _) }) :- D(_).",
            DatalogError,
            "n",
        ),
        (  # a fact has no body to bind an aggregate in
            ".decl C(c: number)\nC(count : { D(_) }).",
            DatalogSemanticError,
            "count : { D(_) }",
        ),
    ],
)
def test_misused_aggregates_are_precise_errors(
    text: str, error: type[DatalogError], caret: str
) -> None:
    with pytest.raises(error) as raised:
        check_program(parse_program(DECLS + text))
    message = str(raised.value)
    line = next(line for line in message.splitlines() if "^" in line)
    source = message.splitlines()[message.splitlines().index(line) - 1]
    start = line.index("^")
    assert source[start : start + len(caret)] == caret, message
