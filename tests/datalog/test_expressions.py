"""Vectorized expressions agree, row by row, with the scalar semantics."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from datalog.eval.expressions import (
    compile_comparison,
    compile_term,
    evaluate_comparison,
    evaluate_term,
)
from datalog.eval.reference import Solver
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import BinOp, Call, ColumnType, Comparison, Const, Neg, Term, Var
from datalog.lang.functions import Value
from datalog.lang.schema import Schema

TYPES: dict[str, ColumnType] = {
    "n1": "number",
    "n2": "number",
    "u1": "unsigned",
    "f1": "float",
    "f2": "float",
    "s1": "symbol",
    "s2": "symbol",
}
INT64 = st.integers(-(2**63), 2**63 - 1)
SMALL = st.integers(-9, 9)
WORDS = st.sampled_from(
    ["", "a", "ab", "abc", "b", "12", "-7", "+3", "x1", "é", "9223372036854775808"]
)
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from(
    [0.0, -0.0, 2.5]
)
INT_OPS = ["+", "-", "*", "/", "%", "^", "band", "bor", "bxor", "bshl", "bshr"]
FLOAT_OPS = ["+", "-", "*", "/", "%", "^"]


def _vars(kind: ColumnType) -> st.SearchStrategy[Term]:
    return st.sampled_from([Var(name) for name, t in TYPES.items() if t == kind])


def _leaves(kind: ColumnType) -> st.SearchStrategy[Term]:
    if kind == "symbol":
        constants = WORDS.map(lambda w: Const(w, "symbol"))
    elif kind == "float":
        constants = FLOATS.map(lambda f: Const(f, "float")) | SMALL.map(
            lambda i: Const(i, "number")
        )
    else:
        constants = (INT64 | SMALL).map(lambda i: Const(i, "number"))
    return _vars(kind) | constants


@functools.cache
def terms(kind: ColumnType, depth: int = 3) -> st.SearchStrategy[Term]:
    if depth == 0:
        return _leaves(kind)
    sub = terms(kind, depth - 1)
    options: list[st.SearchStrategy[Term]] = [_leaves(kind)]
    extremum = st.builds(
        Call, st.sampled_from(["min", "max"]), st.lists(sub, min_size=1, max_size=3).map(tuple)
    )
    options.append(extremum)
    if kind == "symbol":
        number = terms("number", depth - 1)
        numeric = st.sampled_from(["number", "unsigned", "float"]).flatmap(
            lambda k: terms(k, depth - 1)
        )
        options += [
            st.builds(Call, st.just("cat"), st.lists(sub, min_size=1, max_size=3).map(tuple)),
            st.builds(lambda s, a, b: Call("substr", (s, a, b)), sub, number, number),
            st.builds(lambda x: Call("to_string", (x,)), numeric),
        ]
    else:
        ops = FLOAT_OPS if kind == "float" else INT_OPS
        options += [st.builds(BinOp, st.sampled_from(ops), sub, sub), st.builds(Neg, sub)]
        if kind == "number":
            symbol = terms("symbol", depth - 1)
            options.append(
                st.builds(
                    lambda s, f: Call(f, (s,)), symbol, st.sampled_from(["strlen", "to_number"])
                )
            )
    return st.one_of(options)


@st.composite
def tables(draw: st.DrawFn) -> dict[str, list[Value]]:
    size = draw(st.integers(0, 8))
    column: dict[ColumnType, st.SearchStrategy[Value]] = {
        "number": INT64 | SMALL,
        "unsigned": st.integers(0, 2**64 - 1) | st.integers(0, 9),
        "float": FLOATS,
        "symbol": WORDS,
    }
    return {
        name: draw(st.lists(column[t], min_size=size, max_size=size)) for name, t in TYPES.items()
    }


def _columns(table: dict[str, list[Value]], symbols: SymbolTable) -> dict[str, np.ndarray]:
    dtypes = {"number": np.int64, "unsigned": np.uint64, "float": np.float64}
    columns: dict[str, np.ndarray] = {}
    for name, values in table.items():
        kind = TYPES[name]
        if kind == "symbol":
            columns[name] = symbols.intern_many([str(v) for v in values])
        else:
            columns[name] = np.array(values, dtype=dtypes[kind])
    return columns


def _same(scalar: Value, vector: Value) -> bool:
    if isinstance(scalar, float) and isinstance(vector, float):
        if math.isnan(scalar) or math.isnan(vector):
            return math.isnan(scalar) and math.isnan(vector)
        return scalar == vector or math.isclose(scalar, vector, rel_tol=1e-12)
    return scalar == vector and type(scalar) is type(vector)


def _scalar_rows(table: dict[str, list[Value]]) -> list[dict[str, Value]]:
    size = len(next(iter(table.values())))
    return [{name: values[i] for name, values in table.items()} for i in range(size)]


def _term(
    mode: str, term: Term, columns: dict[str, np.ndarray], symbols: SymbolTable, kind: ColumnType
) -> tuple[np.ndarray, np.ndarray | None]:
    """Interpreted (`evaluate_term`) or compiled once (`compile_term`), as `mode` says."""
    size = len(columns["n1"])
    if mode == "interpreted":
        return evaluate_term(term, columns, TYPES, symbols, kind, size=size)
    return compile_term(term, list(columns), TYPES, symbols, kind)(list(columns.values()), size)


EVALUATIONS = pytest.mark.parametrize("mode", ["interpreted", "compiled"])


@EVALUATIONS
@pytest.mark.parametrize("kind", ["number", "unsigned", "float", "symbol"])
@given(data=st.data())
def test_vectorized_terms_equal_scalar_semantics(
    mode: str, kind: ColumnType, data: st.DataObject
) -> None:
    term = data.draw(terms(kind), label="term")
    table = data.draw(tables(), label="table")
    symbols = SymbolTable()
    size = len(table["n1"])
    values, valid = _term(mode, term, _columns(table, symbols), symbols, kind)
    assert len(values) == size
    solver = Solver({}, Schema(), TYPES, {})
    for row, env in enumerate(_scalar_rows(table)):
        expected = solver.value(term, env, kind)
        if expected is None:
            assert valid is not None and not valid[row], f"row {row}: {env}"
            continue
        assert valid is None or valid[row], f"row {row}: {env}"
        got = symbols.string(int(values[row])) if kind == "symbol" else values[row].item()
        assert _same(expected, got), f"row {row}: {env}: scalar {expected!r}, vectorized {got!r}"


COMPARISON_OPS = ["=", "!=", "<", "<=", ">", ">="]


@st.composite
def comparisons(draw: st.DrawFn) -> Comparison:
    kind = draw(st.sampled_from(["number", "unsigned", "float", "symbol"]))
    ops = [*COMPARISON_OPS, "contains", "match"] if kind == "symbol" else COMPARISON_OPS
    return Comparison(draw(st.sampled_from(ops)), draw(terms(kind, 2)), draw(terms(kind, 2)))


@EVALUATIONS
@given(comparison=comparisons(), table=tables())
def test_vectorized_comparisons_equal_scalar_semantics(
    mode: str, comparison: Comparison, table: dict[str, list[Value]]
) -> None:
    symbols = SymbolTable()
    size = len(table["n1"])
    columns = _columns(table, symbols)
    if mode == "interpreted":
        holds = evaluate_comparison(comparison, columns, TYPES, symbols, size=size)
    else:
        compiled = compile_comparison(comparison, list(columns), TYPES, symbols)
        holds = compiled(list(columns.values()), size)
    solver = Solver({}, Schema(), TYPES, {})
    for row, env in enumerate(_scalar_rows(table)):
        expected = any(True for _ in solver.compare(comparison, env))
        assert bool(holds[row]) == expected, f"row {row}: {env}"


@pytest.mark.parametrize(
    ("op", "left", "right", "expected"),
    [
        ("/", -7, 2, -3),
        ("%", -7, 2, -1),
        ("/", 7, -2, -3),
        ("%", 7, -2, 1),
        ("/", -(2**63), -1, -(2**63)),
        ("%", -(2**63), -1, 0),
        ("+", 2**63 - 1, 1, -(2**63)),
        ("^", 2, 64, 0),
        ("bshr", -8, 1, -4),
        ("bshl", 1, 65, 2),
    ],
)
def test_integer_corner_cases(op: str, left: int, right: int, expected: int) -> None:
    columns = {"n1": np.array([left]), "n2": np.array([right])}
    term = BinOp(op, Var("n1"), Var("n2"))  # type: ignore[arg-type]
    values, valid = evaluate_term(term, columns, TYPES, SymbolTable())
    assert valid is None
    assert values.tolist() == [expected]


def test_division_by_zero_has_no_value() -> None:
    columns = {"n1": np.array([5, 6]), "n2": np.array([0, 3])}
    for op in ("/", "%"):
        _, valid = evaluate_term(BinOp(op, Var("n1"), Var("n2")), columns, TYPES, SymbolTable())
        assert valid is not None and valid.tolist() == [False, True]


def test_string_functors_intern_their_results() -> None:
    symbols = SymbolTable()
    columns = {"s1": symbols.intern_many(["ab", "cd", "ab"])}
    term = Call("cat", (Var("s1"), Const("!", "symbol")))
    values, valid = evaluate_term(term, columns, TYPES, symbols)
    assert valid is None
    assert symbols.strings(values).tolist() == ["ab!", "cd!", "ab!"]


def test_min_and_max_of_equal_values_give_the_first_as_the_scalar_semantics_do() -> None:
    """-0.0 and 0.0 are equal but print differently: the first argument wins."""
    from datalog import Database

    db = Database()
    db.define(
        ".decl f(k: number, a: float, b: float)\n.decl r(k: number, lo: symbol, hi: symbol)\n"
        "r(k, to_string(min(a, b)), to_string(max(a, b))) :- f(k, a, b)."
    )
    db.insert("f", [(1, 0.0, -0.0), (2, -0.0, 0.0), (3, float("inf"), 1.0)])
    expected = [(1, "0.0", "0.0"), (2, "-0.0", "-0.0"), (3, "1.0", "inf")]
    assert sorted(db.query("r(k, lo, hi)")) == expected
