"""The checker: what a checked program holds, and which errors it reports.

Exact error texts live in the golden catalogue (`golden/semantic`); these tests
check structure and error kinds.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from datalog.lang.ast import Comparison, Disjunction, Program, Query
from datalog.lang.checks import check_program, check_query
from datalog.lang.errors import (
    ArityError,
    DatalogError,
    DatalogErrors,
    DuplicateDeclarationError,
    RangeRestrictionError,
    TypeMismatchError,
    UnknownNameError,
)
from datalog.lang.parser import parse_program, parse_query
from tests.datalog.strategies import programs, queries

BASE = """
.type Id <: number
.type Name = symbol
.type Key = Id | number
.decl person(id: Id, name: Name)
.decl knows(a: Id, b: Key)
.decl age(id: number, years: unsigned) last_write_wins
.decl score(id: number, s: float)
"""


def errors_of(source: str) -> list[DatalogError]:
    with pytest.raises(DatalogError) as caught:
        check_program(parse_program(BASE + source))
    error = caught.value
    return error.errors if isinstance(error, DatalogErrors) else [error]


def kinds(source: str) -> list[type[DatalogError]]:
    return [type(e) for e in errors_of(source)]


def test_type_names_are_erased_to_primitive_bases() -> None:
    checked = check_program(parse_program(BASE))
    assert checked.schema["person"].types == ("number", "symbol")
    assert checked.schema["knows"].types == ("number", "number")
    assert checked.schema["person"].column_names == ("id", "name")
    assert checked.schema["age"].semantics == "last_write_wins"
    assert checked.schema.arity("score") == 2


def test_disjunctions_are_distributed_and_facts_set_apart() -> None:
    source = (
        'person(1, "a").\nknows(x, y) :- person(x, _), (knows(y, x) ; person(y, "b"), x < y).\n'
    )
    checked = check_program(parse_program(BASE + source))
    assert len(checked.facts) == 1
    assert len(checked.rules) == 2
    for rule in checked.rules:
        assert not any(isinstance(lit, Disjunction) for lit in rule.body)
    assert isinstance(checked.rules[1].body[-1], Comparison)
    assert checked.strata[0].relations == {"knows"}


def test_variable_types_are_inferred_through_equalities_and_functors() -> None:
    source = """
    .decl out(n: number, s: symbol, f: float)
    out(n, s, f) :- person(i, name), score(i, g), k = i + 1, n = strlen(t), t = cat(name, "!"),
                    s = to_string(k), f = g * 2.
    """
    checked = check_program(parse_program(BASE + source))
    types = checked.types_of(checked.rules[0])
    assert types == {
        "n": "number", "s": "symbol", "f": "float", "i": "number", "name": "symbol",
        "g": "float", "k": "number", "t": "symbol",
    }  # fmt: skip
    assert checked.variable_types == (types,)


def test_integer_literals_take_the_type_their_column_expects() -> None:
    check_program(
        parse_program(BASE + "score(1, 2).\nage(1, 3).\nscore(i, 1) :- age(i, y), y > 2.\n")
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (".decl person(x: number)", [DuplicateDeclarationError]),
        (".decl r(x: Nmae)", [UnknownNameError]),
        (".decl r(x: number, y: number, z: number) last_write_wins", [DatalogError]),
        ("person(x, y) :- persn(x, y).", [UnknownNameError]),
        (".output persn", [UnknownNameError]),
        ("person(x, y) :- person(x, y, 1).", [ArityError]),
        ("person(x, y) :- person(x, z), y = catt(z, z).", [UnknownNameError]),
        ('person(x, y) :- person(x, y), x = "a".', [TypeMismatchError]),
        ("person(x, y) :- person(x, y), knows(y, x).", [TypeMismatchError]),
        ("person(x, y) :- person(x, z), y = z + 1.", [TypeMismatchError]),
        ("person(x, y) :- person(x, y), z = cat(x, y).", [TypeMismatchError]),
        ("person(x, y) :- person(x, y), y < 3.", [TypeMismatchError]),
        ("score(x, y) :- score(x, z), y = z band 1.", [TypeMismatchError]),
        ("person(x, y) :- person(x, _).", [RangeRestrictionError]),
        ("person(x, y) :- person(x, y), !knows(x, z).", [RangeRestrictionError]),
        ("person(x, y) :- person(x, y), z > 3.", [RangeRestrictionError]),
        ("person(x, _) :- person(x, _).", [RangeRestrictionError]),
        ('person(x, "a").', [RangeRestrictionError]),
        ("knows(x, n) :- person(x, _), n = sum y : { person(x, _) }.", [RangeRestrictionError]),
    ],
)
def test_each_kind_of_error_is_reported(source: str, expected: list[type[DatalogError]]) -> None:
    found = errors_of(source)
    assert len(found) == len(expected), found
    for error, kind in zip(found, expected, strict=True):
        assert isinstance(error, kind)
        assert error.source  # renders with the source line and caret
        assert "^" in str(error)


def test_equality_chains_bind_variables_in_either_direction() -> None:
    check_program(
        parse_program(BASE + "knows(x, z) :- knows(x, y), y * 2 = v, w = v - 1, z = w.\n")
    )


def test_all_errors_are_reported_together_in_source_order() -> None:
    found = errors_of(
        "person(x, y) :- persn(x, y).\nknows(x, y) :- knows(x).\nknows(x, y) :- knows(x, _).\n"
    )
    assert [type(e) for e in found] == [
        UnknownNameError,
        RangeRestrictionError,  # the head's `y` on line 2 comes before its body
        ArityError,
        RangeRestrictionError,
    ]
    assert [e.line for e in found] == sorted(e.line for e in found)


def test_errors_of_one_rule_are_not_repeated_per_disjunct() -> None:
    assert kinds("person(x, y) :- persn(x, y), (knows(x, _) ; person(_, y)).\n") == [
        UnknownNameError
    ]


def test_check_query_types_and_orders_the_answer_variables() -> None:
    schema = check_program(parse_program(BASE)).schema
    query = check_query(parse_query('person(p, "Alice"), knows(p, q), score(q, s)'), schema)
    assert query.answer_vars == ("p", "q", "s")
    assert query.answer_types == ("number", "number", "float")
    assert len(query.bodies) == 1
    query = check_query(parse_query("knows(1, y) ; knows(y, 1)"), schema)
    assert len(query.bodies) == 2 and query.answer_vars == ("y",)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("persn(x, y)", UnknownNameError),
        ("person(x)", ArityError),
        ('person("a", y)', TypeMismatchError),
        ("person(x, y), !knows(x, z)", RangeRestrictionError),
        ("knows(1, y) ; knows(z, 1)", RangeRestrictionError),
    ],
)
def test_check_query_reports_errors(text: str, kind: type[DatalogError]) -> None:
    schema = check_program(parse_program(BASE)).schema
    with pytest.raises(DatalogError) as caught:
        check_query(parse_query(text), schema)
    error = caught.value
    assert all(
        isinstance(e, kind) for e in (error.errors if isinstance(error, DatalogErrors) else [error])
    )


@given(program=programs)
def test_the_checker_never_fails_with_anything_but_a_datalog_error(program: Program) -> None:
    try:
        check_program(program)
    except DatalogError as error:
        assert str(error)


@given(query=queries)
def test_query_checking_never_fails_with_anything_but_a_datalog_error(query: Query) -> None:
    schema = check_program(parse_program(BASE)).schema
    try:
        check_query(query, schema)
    except DatalogError as error:
        assert str(error)


def test_eqrel_needs_a_binary_relation_of_one_type() -> None:
    with pytest.raises(DatalogError, match="eqrel") as caught:
        check_program(parse_program(".decl same(a: number, b: symbol) eqrel"))
    assert caught.value.line == 1
