"""Row forms of filters and maps agree, row by row, with the numpy path.

`datalog.eval.row_terms` compiles what it can of a term to one Python expression
over a row; wherever it compiles, every row's value (or filter outcome) must be
the numpy path's (`compile_term`, `compile_comparison`): integers wrapped the
same, floats the same doubles. Terms it cannot compile must give None.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from datalog.eval.expressions import compile_comparison, compile_term
from datalog.eval.row_terms import row_filter, row_map
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import BinOp, ColumnType, Comparison, Const, Neg, Term
from datalog.lang.functions import Value
from tests.datalog.test_expressions import TYPES, _columns, _leaves, tables, terms

NAMES = tuple(TYPES)
KINDS: list[ColumnType] = ["number", "unsigned", "float"]
ORDERINGS = ["=", "!=", "<", "<=", ">", ">="]


@functools.cache
def row_terms(kind: ColumnType, depth: int = 3) -> st.SearchStrategy[Term]:
    """Terms the row compiler accepts: `+ - *`, bit operations on integers, minus."""
    if depth == 0:
        return _leaves(kind)
    sub = row_terms(kind, depth - 1)
    ops = ["+", "-", "*"] if kind == "float" else ["+", "-", "*", "band", "bor", "bxor"]
    return st.one_of(
        _leaves(kind), st.builds(BinOp, st.sampled_from(ops), sub, sub), st.builds(Neg, sub)
    )


def _rows(columns: dict[str, np.ndarray]) -> list[tuple[object, ...]]:
    return list(zip(*(columns[name].tolist() for name in NAMES), strict=True))


def _same(row_value: object, numpy_value: Value) -> bool:
    if isinstance(numpy_value, float):
        if math.isnan(numpy_value):
            return isinstance(row_value, float) and math.isnan(row_value)
        return (
            type(row_value) is float
            and math.copysign(1, row_value) == math.copysign(1, numpy_value)
            and row_value == numpy_value
        )
    return type(row_value) is int and row_value == numpy_value


def _check_term(term: Term, kind: ColumnType, table: dict[str, list[Value]]) -> bool:
    """Whether `term` compiled to a row form (and then, that it agrees)."""
    symbols = SymbolTable()
    columns = _columns(table, symbols)
    mapping = row_map([term], [kind], NAMES, TYPES, keep=False)
    if mapping is None:
        return False
    values, valid = compile_term(term, NAMES, TYPES, symbols, kind)(
        [columns[n] for n in NAMES], len(columns["n1"])
    )
    assert valid is None or bool(valid.all()), "row forms only for terms that always have a value"
    for row, expected in zip(_rows(columns), values.tolist(), strict=True):
        image = mapping(row)
        assert image is not None and len(image) == 1
        assert _same(image[0], expected), (term, row, image[0], expected)
    return True


@given(st.sampled_from(KINDS).flatmap(lambda k: st.tuples(st.just(k), row_terms(k))), tables())
def test_row_terms_agree_with_numpy(case: tuple[ColumnType, Term], table: dict) -> None:
    kind, term = case
    assert _check_term(term, kind, table), f"{term} should have a row form"


@given(st.sampled_from(KINDS).flatmap(lambda k: st.tuples(st.just(k), terms(k))), tables())
def test_any_term_has_no_row_form_or_agrees(case: tuple[ColumnType, Term], table: dict) -> None:
    kind, term = case
    _check_term(term, kind, table)


@given(
    st.sampled_from(KINDS).flatmap(
        lambda k: st.builds(Comparison, st.sampled_from(ORDERINGS), row_terms(k), row_terms(k))
    ),
    tables(),
)
def test_row_filters_agree_with_numpy(comparison: Comparison, table: dict) -> None:
    symbols = SymbolTable()
    columns = _columns(table, symbols)
    keep = row_filter(comparison, NAMES, TYPES)
    assert keep is not None
    mask = compile_comparison(comparison, NAMES, TYPES, symbols)(
        [columns[n] for n in NAMES], len(columns["n1"])
    )
    for row, holds in zip(_rows(columns), mask.tolist(), strict=True):
        assert (keep(row) is row) == holds, (comparison, row)


def test_a_head_keeps_or_extends_the_row() -> None:
    step = BinOp("+", _var("n1"), Const(1, "number"))
    head = row_map([step, _var("n2")], ["number", "number"], NAMES, TYPES, keep=False)
    bound = row_map([step], ["number"], NAMES, TYPES, keep=True)
    assert head is not None and bound is not None
    row = (2**63 - 1, 5, 0, 0.0, 0.0, 0, 0)
    assert head(row) == (-(2**63), 5)  # wraps around like int64
    assert bound(row) == (*row, -(2**63))


def test_symbols_and_division_have_no_row_form() -> None:
    assert row_map([_var("s1")], ["symbol"], NAMES, TYPES, keep=False) is None
    half = BinOp("/", _var("n1"), Const(2, "number"))
    assert row_map([half], ["number"], NAMES, TYPES, keep=False) is None
    assert row_filter(Comparison("<", _var("s1"), _var("s2")), NAMES, TYPES) is None


def _var(name: str) -> Term:
    from datalog.lang.ast import Var

    return Var(name)
