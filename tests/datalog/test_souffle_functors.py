"""Soufflé's `range`, `as` and `ord` (ADR 0027): the engine against the reference
evaluator through inserts and retractions, and the column-wise code against the
scalar definitions of `datalog.lang.functions`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from datalog.db.database import Database
from datalog.eval import reference
from datalog.eval.conversions import convert_column
from datalog.eval.generators import expand_range
from datalog.eval.symbols import SymbolTable
from datalog.lang import functions
from datalog.lang.ast import ColumnType
from datalog.lang.checks import check_program, check_query
from datalog.lang.errors import FunctorError
from datalog.lang.parser import parse_program, parse_query
from tests.datalog.answers import Accumulated

pytestmark = pytest.mark.usefixtures("small_path")

PROGRAM = """
.decl size(name: symbol, n: number)
.decl slot(name: symbol, i: number)
slot(s, i) :- size(s, n), i = range(0, n).
.decl even_slot(name: symbol, i: number)
even_slot(s, i) :- slot(s, i), i = range(0, 10, 2).
.decl half(name: symbol, h: number, f: float, u: unsigned)
half(s, as(as(n, float) / 2, number), as(n, float), as(n, unsigned)) :- size(s, n).
.decl tag(name: symbol, o: number)
tag(s, ord(s)) :- size(s, _).
.decl hops(i: number)
hops(0).
hops(j) :- hops(i), size(_, n), j = range(i + 1, n, 1).
"""
QUERIES = ("slot(s, i)", "even_slot(s, i)", "half(s, h, f, u)", "tag(s, o)", "hops(i)")
TRANSACTIONS: list[tuple[str, list[tuple[str, int]]]] = [
    ("insert", [("a", 3), ("b", 0), ("c", -2)]),
    ("insert", [("d", 5)]),
    ("retract", [("a", 3)]),  # its three slots and their even ones go
    ("retract", [("d", 5)]),  # and the hops up to 4
    ("insert", [("a", 4), ("d", 5)]),
]


def test_range_as_and_ord_equal_the_reference_through_retractions() -> None:
    checked = check_program(parse_program(PROGRAM))
    db = Database()
    db.define(PROGRAM)
    subs = {q: Accumulated() for q in QUERIES}
    for q, acc in subs.items():
        db.subscribe(q, acc)
    facts: set[tuple[str, int]] = set()
    for op, rows in TRANSACTIONS:
        (db.insert if op == "insert" else db.retract)("size", rows)
        facts = facts | set(rows) if op == "insert" else facts - set(rows)
        relations = reference.evaluate(checked, {"size": facts})
        for q, acc in subs.items():
            expected = reference.answer(check_query(parse_query(q), checked.schema), relations)
            assert acc.rows() == expected, f"after {op} {rows}: `{q}`"
            assert set(db.query(q)) == expected, f"after {op} {rows}: one-shot `{q}`"


def test_retracting_the_fact_that_feeds_a_range_removes_its_rows() -> None:
    db = Database()
    db.define(PROGRAM)
    acc = Accumulated()
    db.subscribe("slot(s, i)", acc)
    db.insert("size", [("a", 3), ("b", 1)])
    assert acc.rows() == {("a", 0), ("a", 1), ("a", 2), ("b", 0)}
    db.retract("size", [("a", 3)])
    assert acc.rows() == {("b", 0)}
    assert sorted(db.query("slot(s, i)")) == [("b", 0)]


def test_ord_is_the_same_whatever_order_symbols_arrive_in() -> None:
    first, second = Database(), Database()
    for db in (first, second):
        db.define(PROGRAM)
    first.insert("size", [("x", 1), ("y", 2)])
    second.insert("size", [("y", 2)])
    second.insert("size", [("x", 1)])
    assert sorted(first.query("tag(s, o)")) == sorted(second.query("tag(s, o)"))
    assert dict(first.query("tag(s, o)"))["x"] == functions.ordinal("x")


def test_queries_generate_and_cast_to_the_programs_types() -> None:
    db = Database()
    db.define(".type Celsius <: float\n" + PROGRAM)
    db.insert("size", [("a", 2)])
    assert sorted(db.query("size(s, n), i = range(0, n)")) == [("a", 2, 0), ("a", 2, 1)]
    assert db.query("size(s, n), c = as(n, Celsius) / 4") == [("a", 2, 0.5)]


def test_a_range_too_long_is_an_error_and_changes_nothing() -> None:
    db = Database()
    db.define(PROGRAM)
    slots = Accumulated()
    db.subscribe("slot(s, i)", slots)
    with pytest.raises(FunctorError, match="more than"):
        db.insert("size", [("huge", 10**12)])
    assert db.query("size(s, n)") == [] and slots.rows() == set()


# -- the column-wise code against the scalar definitions ------------------------------

DTYPES: dict[str, type[np.generic]] = {
    "number": np.int64,
    "unsigned": np.uint64,
    "float": np.float64,
}
SMALL_INTEGERS = st.integers(-12, 12)
EDGE_NUMBERS = st.sampled_from([-(2**63), 2**63 - 1, 0, 1, -1, 2**62])


def _bounds(kind: str) -> st.SearchStrategy[Any]:
    if kind == "number":
        return st.one_of(SMALL_INTEGERS, EDGE_NUMBERS)
    if kind == "unsigned":
        return st.one_of(st.integers(0, 12), st.sampled_from([2**64 - 1, 2**63, 0]))
    return st.one_of(
        st.floats(-20, 20), st.sampled_from([0.1, 0.3, -0.7, 0.0, math.nan, 3.0, -1e-300])
    )


def _steps(kind: str) -> st.SearchStrategy[Any]:
    if kind == "number":
        return st.one_of(st.integers(-5, 5), st.sampled_from([2**62, -(2**63)]))
    if kind == "unsigned":
        return st.one_of(st.integers(0, 5), st.just(2**63))
    return st.sampled_from([0.1, -0.1, 0.0, 0.7, -1.3, 3.0, 0.25])


@st.composite
def range_rows(draw: st.DrawFn) -> tuple[ColumnType, list[list[Any]]]:
    kind: ColumnType = draw(st.sampled_from(("number", "unsigned", "float")))
    arity = draw(st.sampled_from((2, 3)))
    rows = []
    for _ in range(draw(st.integers(0, 6))):
        row = [draw(_bounds(kind)), draw(_bounds(kind))]
        if arity == 3:
            row.append(draw(_steps(kind)))
        rows.append(row)
    return kind, rows if rows else []


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
        for x, y in zip(a, b, strict=True)
    )


@given(range_rows())
def test_expanding_columns_gives_each_rows_range_values(
    case: tuple[ColumnType, list[list[Any]]],
) -> None:
    kind, rows = case
    arity = len(rows[0]) if rows else 2
    columns = [np.array([row[i] for row in rows], dtype=DTYPES[kind]) for i in range(arity)]
    try:
        wanted = [functions.range_values(row, kind) for row in rows]
    except FunctorError:
        with pytest.raises(FunctorError):
            expand_range(columns, kind, None)
        return
    origins, values = expand_range(columns, kind, None)
    got: list[list[Any]] = [[] for _ in rows]
    for origin, value in zip(origins.tolist(), values.tolist(), strict=True):
        got[origin].append(value)
    for row, want, have in zip(rows, wanted, got, strict=True):
        assert _same(want, have), f"range{tuple(row)}"


CASTS = [
    (source, target)
    for source in ("number", "unsigned", "float", "symbol")
    for target in ("number", "unsigned", "float", "symbol")
    if functions.castable(source, target)  # type: ignore[arg-type]
]
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "number": st.integers(-(2**63), 2**63 - 1),
    "unsigned": st.integers(0, 2**64 - 1),
    "float": st.one_of(st.floats(), st.sampled_from([2.0**63, -(2.0**63), 2.0**64, -0.5])),
    "symbol": st.text(max_size=4),
}


@given(st.sampled_from(CASTS).flatmap(lambda c: st.tuples(st.just(c), st.lists(VALUES[c[0]]))))
def test_converting_columns_agrees_with_convert(
    case: tuple[tuple[ColumnType, ColumnType], list[Any]],
) -> None:
    (source, target), values = case
    symbols = SymbolTable()
    if source == "symbol":
        column = symbols.intern_many(values) if values else np.empty(0, dtype=np.int64)
    else:
        column = np.array(values, dtype=DTYPES[source])
    converted, valid = convert_column(column, source, target, symbols)
    for index, value in enumerate(values):
        expected = functions.convert(value, source, target)
        if expected is None:
            assert valid is not None and not valid[index], f"as({value!r}, {target})"
        else:
            assert valid is None or valid[index], f"as({value!r}, {target})"
            got = converted[index].item()
            if target == "symbol":
                got = symbols.string(got)
            assert _same([got], [expected]), f"as({value!r}, {target})"
