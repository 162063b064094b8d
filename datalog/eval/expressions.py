"""Vectorized evaluation of terms and comparisons over numpy columns.

Layer: datalog. May import numpy and the datalog language modules (ast, errors,
functions, symbols, passes.term_types); never `differential`, `joins`, `server`.
The column-at-a-time counterpart of `datalog.lang.functions`, and it must agree with
it row by row (a property test checks it).

A column of type `number` is int64, `unsigned` uint64 (an int64 column is
reinterpreted), `float` float64 and `symbol` int64 ids of the database's
`SymbolTable`. Evaluating a term gives its values and a validity mask (None when
every row has a value); a row is invalid where the scalar semantics give no
value (division by zero, `substr` out of range, ...). Values of invalid rows are
unspecified, and never inspected: string functors and symbol orderings look at
valid rows only. String functors work over the distinct inputs (np.unique), so
Python loops run over distinct symbols, never over rows; `as` converts columns
with `datalog.eval.conversions`. `range` is no term: the planner expands it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from datalog.eval.conversions import convert_column
from datalog.eval.functor_calls import call_columns
from datalog.eval.symbols import SymbolTable
from datalog.lang import functions
from datalog.lang.ast import (
    BUILTIN_PREDICATES,
    Aggregate,
    BinOp,
    Call,
    Cast,
    ColumnType,
    Comparison,
    Const,
    Neg,
    Term,
    Var,
    Wildcard,
)
from datalog.lang.errors import UnsupportedError
from datalog.lang.passes.term_types import comparison_type, resolve_type

Array = npt.NDArray[Any]
Mask = npt.NDArray[np.bool_]
Result = tuple[Array, Mask | None]
Columns = Mapping[str, npt.NDArray[np.generic]]

DTYPES: dict[str, type[np.generic]] = {
    "number": np.int64,
    "unsigned": np.uint64,
    "float": np.float64,
    "symbol": np.int64,
}
_ORDERINGS: dict[str, Callable[[Array, Array], Mask]] = {
    "=": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def evaluate_term(
    term: Term,
    columns: Columns,
    types: Mapping[str, ColumnType],
    symbols: SymbolTable,
    expected: ColumnType | None = None,
    *,
    size: int | None = None,
) -> Result:
    """Values of `term` per row, and where they exist (None: everywhere).

    `types` gives each variable's type; `expected` is the type the context
    expects (it decides the type of integer literals); `size` the row count when
    `columns` is empty.
    """
    evaluator = _Evaluator(columns, types, symbols, size)
    return evaluator.term(term, resolve_type(term, types, expected))


def evaluate_comparison(
    comparison: Comparison,
    columns: Columns,
    types: Mapping[str, ColumnType],
    symbols: SymbolTable,
    *,
    size: int | None = None,
) -> Mask:
    """Where `comparison` holds (False where a side has no value)."""
    return _Evaluator(columns, types, symbols, size).comparison(comparison)


def _ndim(value: object) -> int:
    """`np.ndim` without its dispatch (arrays and numpy scalars have `ndim`)."""
    return int(getattr(value, "ndim", 0))


def both(left: Mask | None, right: Mask | None) -> Mask | None:
    """The conjunction of two validity masks (None means all valid)."""
    if left is None:
        return right
    if right is None:
        return left
    return left & right


def as_column(values: npt.ArrayLike, column_type: ColumnType) -> Array:
    """`values` as a column of `column_type` (int64 reinterpreted for unsigned)."""
    array = np.asarray(values)
    if column_type == "unsigned" and array.dtype == np.int64:
        return array.view(np.uint64)
    return array.astype(DTYPES[column_type], copy=False)


class _Evaluator:
    def __init__(
        self,
        columns: Columns,
        types: Mapping[str, ColumnType],
        symbols: SymbolTable,
        size: int | None,
    ) -> None:
        self.columns = columns
        self.types = types
        self.symbols = symbols
        if size is None:
            if not columns:
                raise ValueError("evaluate needs `size` when there are no columns")
            size = len(next(iter(columns.values())))
        self.size = size

    def term(self, term: Term, column_type: ColumnType) -> Result:
        """Evaluate `term`, already resolved to `column_type`."""
        if isinstance(term, Var):
            return as_column(self.columns[term.name], self.types[term.name]), None
        if isinstance(term, Const):
            return self.constant(term, column_type), None
        if isinstance(term, BinOp):
            left, left_ok = self.term(term.left, column_type)
            right, right_ok = self.term(term.right, column_type)
            values, ok = arithmetic(term.op, left, right, column_type)
            return values, both(both(left_ok, right_ok), ok)
        if isinstance(term, Neg):
            operand, ok = self.term(term.operand, column_type)
            with np.errstate(all="ignore"):
                return np.negative(operand), ok
        if isinstance(term, Call):
            return self.call(term, column_type)
        if isinstance(term, Cast):
            assert term.kind is not None, "a checked cast knows its type"
            source = resolve_type(term.value, self.types)
            values, ok = self.term(term.value, source)
            converted, valid = convert_column(values, source, term.kind, self.symbols)
            return converted, both(ok, valid)
        if isinstance(term, Aggregate):
            raise UnsupportedError("aggregates are evaluated by the planner, not as expressions")
        assert isinstance(term, Wildcard)
        raise UnsupportedError("`_` has no value in an expression", term.span)

    def constant(self, term: Const, column_type: ColumnType) -> Array:
        if column_type == "symbol":
            value: int | float = self.symbols.intern(str(term.value))
        else:
            converted = functions.constant(term.value, column_type)
            assert not isinstance(converted, str)
            value = converted
        return np.full(self.size, value, dtype=DTYPES[column_type])

    def operands(
        self, args: Sequence[Term], types: Sequence[ColumnType]
    ) -> tuple[list[Array], Mask | None]:
        values: list[Array] = []
        ok: Mask | None = None
        for arg, arg_type in zip(args, types, strict=True):
            value, arg_ok = self.term(arg, arg_type)
            values.append(value)
            ok = both(ok, arg_ok)
        return values, ok

    def call(self, term: Call, column_type: ColumnType) -> Result:
        if term.functor is not None:  # user-defined (`@f`): a Python function
            args, ok = self.operands(term.args, term.functor.params)
            return call_columns(term, args, ok, self.symbols, self.size)
        functor = functions.FUNCTORS[term.function]
        arg_types: list[ColumnType] = [
            (functor.param(i) if functor.params is not None else column_type)
            or resolve_type(arg, self.types)
            for i, arg in enumerate(term.args)
        ]
        args, ok = self.operands(term.args, arg_types)
        if term.function in ("min", "max"):
            return self.extremum(term.function, args, ok, column_type), ok
        result = functor.result or column_type
        scalar = _scalar_call(term.function, arg_types, result, self.symbols)
        return self.map_unique(args, ok, scalar, result)

    def extremum(
        self, name: str, args: list[Array], ok: Mask | None, column_type: ColumnType
    ) -> Array:
        if len(args) == 1:
            return args[0]
        if column_type != "symbol":  # the first of equal values wins, as in `min()`
            better = np.less if name == "min" else np.greater
            best = args[0]
            for arg in args[1:]:  # -0.0 and 0.0 are equal, but print differently
                wins = better(arg, best)
                if column_type == "float":
                    wins |= np.isnan(arg)  # NaN propagates, as numpy's minimum does
                best = np.where(wins, arg, best)
            return best
        stacked = np.stack(args, axis=1)
        ranks = np.stack(self.symbol_ranks(args, ok), axis=1)
        pick = ranks.argmin(axis=1) if name == "min" else ranks.argmax(axis=1)
        return stacked[np.arange(self.size), pick]

    def map_unique(
        self,
        args: list[Array],
        ok: Mask | None,
        scalar: Callable[..., functions.Value | bool | None],
        result: ColumnType | None,
    ) -> Result:
        """Apply `scalar` to each distinct valid row of `args`; `result` None: bool."""
        rows = np.arange(self.size) if ok is None else np.flatnonzero(ok)
        keys, inverse = _distinct_rows([arg[rows] for arg in args])
        found = [scalar(*key) for key in keys]
        has = np.array([value is not None for value in found], dtype=bool)
        present = [value for value in found if value is not None]
        dtype = np.bool_ if result is None else DTYPES[result]
        distinct = np.zeros(len(found), dtype=dtype)
        if result == "symbol":
            distinct[has] = self.symbols.intern_many([str(v) for v in present])
        elif present:
            distinct[has] = np.array(present, dtype=dtype)
        values = np.zeros(self.size, dtype=dtype)
        values[rows] = distinct[inverse]
        valid = np.zeros(self.size, dtype=bool)
        valid[rows] = has[inverse]
        return values, None if valid.all() else valid

    def symbol_ranks(self, args: list[Array], ok: Mask | None) -> list[Array]:
        """Per symbol column, the rank of each id's string among all valid ids."""
        rows = slice(None) if ok is None else ok
        ids = np.unique(np.concatenate([arg[rows] for arg in args]))
        order = np.argsort(self.symbols.strings(ids), kind="stable")
        rank = np.empty(len(ids), dtype=np.int64)
        rank[order] = np.arange(len(ids))
        ranks = []
        for arg in args:
            position = np.clip(np.searchsorted(ids, arg), 0, max(len(ids) - 1, 0))
            ranks.append(rank[position] if len(ids) else np.zeros(self.size, dtype=np.int64))
        return ranks

    def comparison(self, comparison: Comparison) -> Mask:
        op = comparison.op
        if op in BUILTIN_PREDICATES:
            args, ok = self.operands((comparison.left, comparison.right), ("symbol", "symbol"))
            scalar = _scalar_predicate(op, self.symbols)
            values, valid = self.map_unique(args, ok, scalar, None)
            return values.astype(bool) if valid is None else values.astype(bool) & valid
        shared = comparison_type(comparison.left, comparison.right, self.types)
        args, ok = self.operands((comparison.left, comparison.right), (shared, shared))
        if shared == "symbol" and op not in ("=", "!="):
            args = self.symbol_ranks(args, ok)
        with np.errstate(all="ignore"):
            holds = _ORDERINGS[op](args[0], args[1])
        return holds if ok is None else holds & ok


def arithmetic(op: str, left: Array, right: Array, column_type: ColumnType) -> Result:
    """`left op right` per row in `column_type`, and where it has a value."""
    if op in _WRAPPING and column_type != "float" and (_ndim(left) or _ndim(right)):
        return _integer_arithmetic(op, left, right, column_type)  # arrays wrap silently
    with np.errstate(all="ignore"):
        if column_type == "float":
            return _float_arithmetic(op, left, right)
        return _integer_arithmetic(op, left, right, column_type)


def _integer_arithmetic(op: str, a: Array, b: Array, column_type: ColumnType) -> Result:
    if op in ("/", "%"):
        zero = b == 0
        divisor = np.where(zero, 1, b).astype(a.dtype)
        quotient = np.floor_divide(a, divisor)
        remainder = a - quotient * divisor
        if column_type == "number":  # floor -> truncation toward zero
            fix = (remainder != 0) & ((a < 0) != (divisor < 0))
            quotient = quotient + fix
            remainder = remainder - divisor * fix
        return (quotient if op == "/" else remainder), (~zero if zero.any() else None)
    if op == "^":
        negative = b < 0
        exponent = np.where(negative, 0, b).astype(a.dtype)
        return np.power(a, exponent), (~negative if negative.any() else None)
    if op in ("bshl", "bshr"):
        shift = np.bitwise_and(b, 63).astype(np.uint64)
        if op == "bshl":
            return np.left_shift(a.view(np.uint64), shift).view(a.dtype), None
        return np.right_shift(a, shift.astype(a.dtype)), None
    return _INTEGER_UFUNCS[op](a, b), None


# Integer operations that wrap around without a warning on arrays (numpy warns only
# for scalars), so they need no `errstate`, which costs microseconds to enter.
_WRAPPING = frozenset({"+", "-", "*", "band", "bor", "bxor", "bshl", "bshr"})

_INTEGER_UFUNCS: dict[str, Callable[[Array, Array], Array]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "band": np.bitwise_and,
    "bor": np.bitwise_or,
    "bxor": np.bitwise_xor,
}


def _float_arithmetic(op: str, a: Array, b: Array) -> Result:
    if op in ("/", "%"):
        zero = b == 0.0
        divisor = np.where(zero, 1.0, b)
        values = np.divide(a, divisor) if op == "/" else np.fmod(a, divisor)
        return values, (~zero if zero.any() else None)
    if op == "^":
        return np.power(a, b), None
    return _INTEGER_UFUNCS[op](a, b), None


def _distinct_rows(arrays: list[Array]) -> tuple[list[tuple[int | float, ...]], Array]:
    """The distinct rows of parallel columns (as Python tuples) and each row's index.

    Several columns are always int64 (symbol ids and numbers: `cat`, `substr`, the
    predicates); a float column appears alone (`to_string`).
    """
    if len(arrays) == 1:
        column = arrays[0]
        if column.dtype == np.float64:  # by bit pattern: -0.0 and 0.0 differ
            bits, inverse = np.unique(column.view(np.int64), return_inverse=True)
            return [(value,) for value in bits.view(np.float64).tolist()], inverse.reshape(-1)
        unique, inverse = np.unique(column, return_inverse=True)
        return [(value,) for value in unique.tolist()], inverse.reshape(-1)
    unique, inverse = np.unique(np.stack(arrays, axis=1), axis=0, return_inverse=True)
    return [tuple(row) for row in unique.tolist()], inverse.reshape(-1)


def _scalar_call(
    name: str, arg_types: list[ColumnType], result: ColumnType, symbols: SymbolTable
) -> Callable[..., functions.Value | None]:
    """`functions.call` over raw column values (symbol ids become strings)."""

    def apply(*raw: int | float) -> functions.Value | None:
        args = [
            symbols.string(int(value)) if kind == "symbol" else value
            for value, kind in zip(raw, arg_types, strict=True)
        ]
        return functions.call(name, args, result)

    return apply


def _scalar_predicate(op: str, symbols: SymbolTable) -> Callable[..., bool]:
    def apply(left: int, right: int) -> bool:
        strings = symbols.string(int(left)), symbols.string(int(right))
        return functions.compare(op, *strings)  # type: ignore[arg-type]

    return apply


# -- compiled evaluation ------------------------------------------------------------

# Columns by position (the order of `names` given at compile time) and the row count.
Compiled = Callable[[Sequence[Array], int], Result]
CompiledMask = Callable[[Sequence[Array], int], Mask]


def compile_term(
    term: Term,
    names: Sequence[str],
    types: Mapping[str, ColumnType],
    symbols: SymbolTable,
    expected: ColumnType | None = None,
) -> Compiled:
    """`evaluate_term` prepared once for columns in the order of `names`.

    Types are resolved and variables located now, not for every batch; variables,
    numeric constants and arithmetic become closures, and whatever else (functor
    calls, symbols) is interpreted as `evaluate_term` does. A small change then
    costs a few numpy calls per expression instead of a walk of its syntax tree.
    """
    compiled = _compile(term, resolve_type(term, types, expected), tuple(names), types, symbols)

    def columns_of(columns: Sequence[Array], n: int) -> Result:
        values, valid = compiled(columns, n)
        if _ndim(values) == 0:  # constants stay scalars inside: one column at the end
            values = np.full(n, values)
        if valid is not None and _ndim(valid) == 0:
            valid = np.full(n, bool(valid))
        return values, valid

    return columns_of


def compile_comparison(
    comparison: Comparison,
    names: Sequence[str],
    types: Mapping[str, ColumnType],
    symbols: SymbolTable,
) -> CompiledMask:
    """`evaluate_comparison` prepared once, like `compile_term`."""
    names = tuple(names)
    op = comparison.op
    shared = (
        None
        if op in BUILTIN_PREDICATES
        else comparison_type(comparison.left, comparison.right, types)
    )
    if shared is None or (shared == "symbol" and op not in ("=", "!=")):

        def interpret(columns: Sequence[Array], n: int) -> Mask:
            named = dict(zip(names, columns, strict=True))
            return _Evaluator(named, types, symbols, n).comparison(comparison)

        return interpret
    left = _compile(comparison.left, shared, names, types, symbols)
    right = _compile(comparison.right, shared, names, types, symbols)
    holds = _ORDERINGS[op]

    def compare(columns: Sequence[Array], n: int) -> Mask:
        a, a_ok = left(columns, n)
        b, b_ok = right(columns, n)
        mask = holds(a, b)
        ok = both(a_ok, b_ok)
        mask = mask if ok is None else mask & ok
        return mask if _ndim(mask) else np.full(n, bool(mask))

    return compare


def _compile(
    term: Term,
    kind: ColumnType,
    names: tuple[str, ...],
    types: Mapping[str, ColumnType],
    symbols: SymbolTable,
) -> Compiled:
    if isinstance(term, Var):
        at, own = names.index(term.name), types[term.name]
        return lambda columns, n: (as_column(columns[at], own), None)
    if isinstance(term, Const) and kind != "symbol":
        scalar = np.asarray(functions.constant(term.value, kind), dtype=DTYPES[kind])[()]
        return lambda columns, n: (scalar, None)  # a numpy scalar: operations broadcast it
    if isinstance(term, BinOp):
        left = _compile(term.left, kind, names, types, symbols)
        right = _compile(term.right, kind, names, types, symbols)
        op = term.op

        def binop(columns: Sequence[Array], n: int) -> Result:
            a, a_ok = left(columns, n)
            b, b_ok = right(columns, n)
            values, ok = arithmetic(op, a, b, kind)
            return values, both(both(a_ok, b_ok), ok)

        return binop

    def interpret(columns: Sequence[Array], n: int) -> Result:
        named = dict(zip(names, columns, strict=True))
        return _Evaluator(named, types, symbols, n).term(term, kind)

    return interpret
