"""Names the engine uses internally cannot be reached from a program: relations
beginning with `__` (the engine's `__unit__`) are reserved, and the variables the
planner invents never collide with a program's own."""

from __future__ import annotations

import pytest

from datalog import Database
from datalog.eval.reference import evaluate
from datalog.lang.checks import check_program
from datalog.lang.errors import DatalogError, DatalogSemanticError, UnknownNameError
from datalog.lang.parser import parse_program

RESERVED = "names beginning with `__` belong to the engine's own relations"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (".decl __unit__(x: number)", 1),  # aliased the engine's one-tuple relation
        (".decl e(x: number)\n__unit__(1).", 2),
        (".decl e(x: number)\n.decl __mine(x: number)\n__mine(x) :- e(x).", 2),
        (".decl e(x: number)\ne(1) :- __unit__().", 2),
        (".comp C { .decl a(x: number) }\n.init __c = C", 1),
    ],
)
def test_a_name_beginning_with_two_underscores_is_refused_where_it_is_used(
    text: str, line: int
) -> None:
    db = Database()
    db.define(".decl kept(x: number)")
    with pytest.raises(DatalogError, match=RESERVED) as caught:
        db.define(text)
    assert caught.value.line == line
    assert db.checked.schema.names() == (*Database().checked.schema.names(), "kept")
    assert "__unit__" not in db.checked.schema.names()


def test_the_internal_relation_is_out_of_reach_of_queries_and_transactions() -> None:
    db = Database()
    db.define(".decl e(x: number)")
    with pytest.raises(DatalogSemanticError, match=RESERVED):
        db.query("e(x), __unit__()")
    with pytest.raises(UnknownNameError):
        db.insert("__unit__", [()])


PROGRAM = """
.decl r(x: number, y: number)
.decl q(x: number, n: number)
r(1, 2). r(1, 3). r(2, 2).
"""


@pytest.mark.parametrize("name", ["_agg0", "_agg1", "_w0", "_t0", "_e0", "_g0", "_v0", "_v1"])
@pytest.mark.parametrize(
    "rule",
    [
        "q({v}, s) :- r({v}, _), s = count : {{ r({v}, w) }}.",
        "q({v}, s) :- r({v}, _), s = sum y : {{ r({v}, y) }}.",
        "q(x, {v}) :- r(x, y), {v} = y + 1.",
        "q(x, {v}) :- r(x, _), {v} = range(0, 2).",
        "q({v}, y) :- r({v}, y), r(y, {v}).",
        "q(x, y) :- r(x, y), {v} = 5, y < {v} + x.",
    ],
)
def test_variables_named_like_the_planners_own_keep_their_meaning(name: str, rule: str) -> None:
    """The planner named its fresh variables `_agg0`, `_w0`...: a program's variable
    of that name was confused with them (`count` of `r(1, _)` gave 1, not 2)."""
    text = PROGRAM + rule.format(v=name)
    db = Database()
    db.define(text)
    expected = evaluate(check_program(parse_program(text)), {})["q"]
    assert set(db.query("q(a, b)")) == expected
    assert set(db.query(f"q(a, b), {name} = a")) == {(a, b, a) for a, b in expected}


def test_the_reference_and_the_engine_agree_on_the_example_of_the_collision() -> None:
    db = Database()
    db.define(PROGRAM + "q(_agg0, s) :- r(_agg0, _), s = count : { r(_agg0, _w0) }.")
    assert sorted(db.query("q(a, b)")) == [(1, 2), (2, 1)]
    with pytest.raises(DatalogError):
        db.define("q(1, 2) :- __unit__().")
