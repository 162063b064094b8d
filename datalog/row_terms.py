"""Terms and comparisons compiled to functions of one Python row.

Layer: datalog. Imports the datalog language modules (ast, functions,
passes.term_types); never `differential`.

The row-at-a-time counterpart of `datalog.expressions.compile_term` for the few
rows an iteration round moves (one new fact per round of a counter recursion):
a row is the tuple of its columns' Python values (`ndarray.tolist()`), and a
compiled term maps it to the value, or to None where the term has none. The
values are those of the scalar semantics (`datalog.functions`, which the numpy
path agrees with row by row): integers wrap around like int64 and uint64, floats
are IEEE doubles as numpy's. Only numeric terms over variables of the term's own
type compile; anything else (symbols, functor calls, mixed types) gives None, and
its operator keeps only the numpy path.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence

from datalog import functions
from datalog.ast import BUILTIN_PREDICATES, BinOp, ColumnType, Comparison, Const, Neg, Term, Var
from datalog.passes.term_types import comparison_type, resolve_type

Row = tuple[object, ...]
RowTerm = Callable[[Row], object]
RowTest = Callable[[Row], bool]

_NUMERIC: tuple[ColumnType, ...] = ("number", "unsigned", "float")
_FLOAT_OPS: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
}
_INTEGER_OPS = frozenset({"+", "-", "*", "band", "bor", "bxor", "/", "%"})
_ORDERINGS: dict[str, Callable[[object, object], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_LOW, _HIGH = -(1 << 63), 1 << 63


def row_term(
    term: Term,
    names: Sequence[str],
    types: Mapping[str, ColumnType],
    expected: ColumnType | None = None,
) -> RowTerm | None:
    """`term`'s value for one row with the columns of `names`, as a value of
    `expected` (None: the term has no row form, or its type is not `expected`)."""
    kind = resolve_type(term, types, expected)
    if expected is not None and kind != expected:
        return None
    return _compile(term, kind, tuple(names), types)


def row_test(
    comparison: Comparison, names: Sequence[str], types: Mapping[str, ColumnType]
) -> RowTest | None:
    """Whether `comparison` holds for one row (False where a side has no value)."""
    if comparison.op in BUILTIN_PREDICATES:
        return None
    shared = comparison_type(comparison.left, comparison.right, types)
    left = _compile(comparison.left, shared, tuple(names), types)
    right = _compile(comparison.right, shared, tuple(names), types)
    holds = _ORDERINGS.get(comparison.op)
    if left is None or right is None or holds is None:
        return None

    def test(row: Row) -> bool:
        a, b = left(row), right(row)
        return a is not None and b is not None and holds(a, b)

    return test


def _compile(
    term: Term, kind: ColumnType, names: tuple[str, ...], types: Mapping[str, ColumnType]
) -> RowTerm | None:
    if kind not in _NUMERIC:
        return None
    if isinstance(term, Var):
        if types.get(term.name) != kind or term.name not in names:
            return None
        return operator.itemgetter(names.index(term.name))
    if isinstance(term, Const):
        value = functions.constant(term.value, kind)
        return None if isinstance(value, str) else (lambda row: value)
    if isinstance(term, Neg):
        operand = _compile(term.operand, kind, names, types)
        return None if operand is None else _negation(operand, kind)
    if isinstance(term, BinOp):
        left = _compile(term.left, kind, names, types)
        right = _compile(term.right, kind, names, types)
        if left is None or right is None:
            return None
        return _binop(term.op, left, right, kind)
    return None


def _negation(operand: RowTerm, kind: ColumnType) -> RowTerm:
    def negate(row: Row) -> object:
        value = operand(row)
        return None if value is None else functions.negate(value, kind)  # type: ignore[arg-type]

    return negate


def _binop(op: str, left: RowTerm, right: RowTerm, kind: ColumnType) -> RowTerm | None:
    if kind == "float":
        return _float_binop(_FLOAT_OPS[op], left, right) if op in _FLOAT_OPS else None
    if op not in _INTEGER_OPS:
        return None
    if op == "+" and kind == "number":  # the counter's step: no call on the way
        return _number_sum(left, right)

    def apply(row: Row) -> object:
        a, b = left(row), right(row)
        if a is None or b is None:
            return None
        return functions.arithmetic(op, a, b, kind)  # type: ignore[arg-type]

    return apply


def _float_binop(fn: Callable[[float, float], float], left: RowTerm, right: RowTerm) -> RowTerm:
    def apply(row: Row) -> object:
        a, b = left(row), right(row)
        return None if a is None or b is None else fn(a, b)  # type: ignore[arg-type]

    return apply


def _number_sum(left: RowTerm, right: RowTerm) -> RowTerm:
    def add(row: Row) -> object:
        a, b = left(row), right(row)
        if a is None or b is None:
            return None
        total: int = a + b  # type: ignore[operator]
        return total if _LOW <= total < _HIGH else functions.wrap(total, "number")

    return add
