"""Literals are values of the type they stand for: out of range is an error at the
literal (never a silent wrap-around, never an error without a position), and a
fact's constant expressions are computed as the language defines them."""

from __future__ import annotations

import pytest

from datalog import Database
from datalog.eval.reference import evaluate
from datalog.lang.checks import check_program
from datalog.lang.errors import DatalogError, TypeMismatchError, UnsupportedError
from datalog.lang.parser import parse_program

DECLS = ".decl r(x: number)\n.decl u(x: unsigned)\n.decl f(x: float)\n.decl q(x: number)\n"
BIG = "99999999999999999999"


@pytest.mark.parametrize(
    ("line", "literal"),
    [
        (f"q({BIG}).", BIG),  # a fact
        (f"q({BIG}) :- r(_).", BIG),  # a rule head: wrapped to 7766279631452241919
        (f"q(x) :- r(x), x = {BIG}.", BIG),  # a body
        (f"q(x) :- r(y), x = y + {BIG}.", BIG),  # inside arithmetic
        ("q(9223372036854775808).", "9223372036854775808"),  # 2**63
        ("q(-9223372036854775809).", "-9223372036854775809"),
        ("q(0x1ffffffffffffffff).", "0x1ffffffffffffffff"),
        ("u(-1).", "-1"),
        ("u(18446744073709551616).", "18446744073709551616"),  # 2**64
        ("u(x) :- r(_), x = 18446744073709551616u.", "18446744073709551616u"),
        ("q(x) :- r(_), x = count : { r(1180591620717411303424) }.", "1180591620717411303424"),
    ],
)
def test_an_out_of_range_integer_literal_is_an_error_at_it(line: str, literal: str) -> None:
    db = Database()
    with pytest.raises(TypeMismatchError, match="out of range") as caught:
        db.define(DECLS + line)
    error = caught.value
    assert f"integer literal {literal} is out of range" in error.message
    assert (error.line, error.column) == (5, line.index(literal) + 1)
    assert error.span.end_column - error.span.column == len(literal)
    assert db.checked.schema.get("q") is None  # nothing was defined


@pytest.mark.parametrize(
    "query", [f"r({BIG})", f"r(x), x < {BIG}", "u(x), x = -5", f"r(x), y = x * {BIG}"]
)
def test_an_out_of_range_literal_in_a_query_is_an_error_at_it(query: str) -> None:
    db = Database()
    db.define(DECLS)
    with pytest.raises(TypeMismatchError, match="out of range") as caught:
        db.query(query)
    assert caught.value.line == 1 and caught.value.column > 1


def test_the_extremes_of_each_type_are_accepted() -> None:
    db = Database()
    db.define(
        DECLS + "q(-9223372036854775808). q(9223372036854775807). q(0x7fffffffffffffff).\n"
        "u(18446744073709551615). u(0xffffffffffffffffu). u(0).\n"
        f"f({BIG}). f(-{BIG})."
    )
    assert sorted(db.query("q(x)")) == [(-(2**63),), (2**63 - 1,)]
    assert sorted(db.query("u(x)")) == [(0,), (2**64 - 1,)]
    assert sorted(db.query("f(x)")) == [(-1e20,), (1e20,)]
    with pytest.raises(TypeMismatchError, match="beyond the largest float"):
        db.define(f"f({2**1024}).")


def test_a_fact_computes_its_constant_expressions_as_the_reference_does() -> None:
    """The engine read `.value` of every argument: `q(1 + 2).` raised AttributeError."""
    text = (
        ".decl p(a: number, b: symbol, c: float, d: unsigned)\n"
        'p(1 + 2 * 3, cat("a", to_string(5)), as(7, float), 0u - 1).\n'
        'p(max(1, 2, -3), substr("abc", 1, 1), 1.5 * 2, as(-1, unsigned)).\n'
        'p(1 / 0, "never", 1.0, 1u).\n'  # no value: holds nothing, as in a rule
    )
    db = Database()
    db.define(text)
    expected = {(7, "a5", 7.0, 2**64 - 1), (2, "b", 3.0, 2**64 - 1)}
    assert set(db.query("p(a, b, c, d)")) == expected
    assert evaluate(check_program(parse_program(text)), {})["p"] == expected


def test_a_fact_calling_a_user_functor_is_refused_at_the_call() -> None:
    db = Database(functors={"f": lambda x: x})
    db.define(".functor f(x: number): number\n.decl p(x: number)")
    with pytest.raises(UnsupportedError, match="a fact cannot call the functor `@f`") as caught:
        db.define("p(1).\np(@f(2)).")
    assert (caught.value.line, caught.value.column) == (2, 3)
    assert db.query("p(x)") == []


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("q(1.5).", "constant 1.5 is float, expected number"),
        ('q("a").', 'constant "a" is symbol, expected number'),
        ('q(as("a", float)).', "`as` cannot convert a symbol to a float"),
        ("q(as(1, symbol)).", "`as` cannot convert a number to a symbol"),
        ("u(-7).", "integer literal -7 is out of range for unsigned"),
    ],
)
def test_value_errors_in_facts_have_a_position(line: str, message: str) -> None:
    with pytest.raises(DatalogError) as caught:
        Database().define(DECLS + line)
    error = caught.value
    assert message in error.message
    assert (error.line, error.column) == (5, 3)
    assert f"\n    {line}\n      ^" in str(error)
