"""Calling user-defined functors: the Python functions bound to `.functor`s.

Layer: datalog. Imports numpy and the datalog language modules (ast, errors,
symbols); `datalog.eval.expressions` calls it over columns, `datalog.eval.reference` over
single values, and both must agree (a property test checks it).

The calling convention (ADR 0015). A plain functor is called once per distinct
argument tuple of a batch with Python values: `int` for number and unsigned,
`float` for float, `str` for symbol; it returns one value. A vectorized functor
is called once per batch with one numpy array per parameter (int64, uint64,
float64, and for symbols an object array of `str`) and returns an array-like of
as many values. Rows where an argument has no value (a division by zero inside
it, say) are not passed at all, and a functor is never called with zero rows.

Every returned value must fit the declared result type exactly, as a fact
inserted into a column of that type must: a `str` for a symbol (without a lone
surrogate: symbols are UTF-8 text when logged or served); an integer, or
an integral float, in range for number and unsigned; a finite or infinite float
for float. `bool`, None and NaN are no values. A value that does not fit, or an
exception raised by the function, is a `FunctorError` naming the functor and the
arguments of the row (for a vectorized functor, its first row).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import Call, ColumnType, UserFunctor
from datalog.lang.errors import FunctorError, UnboundFunctorError
from differential.budget import Interrupted, check_budget

Array = npt.NDArray[Any]
Mask = npt.NDArray[np.bool_]
Value = int | float | str

_DTYPES: dict[str, type[np.generic]] = {
    "number": np.int64,
    "unsigned": np.uint64,
    "float": np.float64,
    "symbol": np.int64,
}
_LIMITS: dict[str, tuple[int, int]] = {"number": (-(2**63), 2**63 - 1), "unsigned": (0, 2**64 - 1)}
_SURROGATE = re.compile("[\ud800-\udfff]")


def call_columns(
    call: Call, args: list[Array], ok: Mask | None, symbols: SymbolTable, size: int
) -> tuple[Array, Mask | None]:
    """`call` over `size` rows of argument columns; valid where the arguments are."""
    functor = bound(call)
    rows = np.arange(size) if ok is None else np.flatnonzero(ok)
    values = np.zeros(size, dtype=_DTYPES[functor.result])
    if len(rows):
        taken = [arg[rows] for arg in args]
        if functor.vectorized:
            values[rows] = _vectorized(call, functor, taken, symbols)
        else:
            values[rows] = _per_row(call, functor, taken, symbols, len(rows))
    return values, ok


def call_values(call: Call, args: Sequence[Value]) -> Value:
    """`call` on one row of Python values (the reference evaluator's form)."""
    functor = bound(call)
    row = tuple(args)
    if not functor.vectorized:
        return checked_value(call, row, _invoke(call, functor.function, row, row))
    columns = [
        np.array([value], dtype=object if kind == "symbol" else _DTYPES[kind])
        for value, kind in zip(args, functor.params, strict=True)
    ]
    result = _shaped(call, row, _invoke(call, functor.function, columns, row), 1)
    return checked_value(call, row, result.tolist()[0])


def bound(call: Call) -> UserFunctor:
    """The functor of `call` with its Python function (a query binds it first)."""
    functor = call.functor
    if functor is None or functor.function is None:
        raise UnboundFunctorError(f"functor `{call.function}` is not bound", call.span)
    return functor


# -- plain functors: once per distinct argument tuple ---------------------------------


def _per_row(
    call: Call, functor: UserFunctor, args: list[Array], symbols: SymbolTable, n: int
) -> Array:
    first, inverse = _distinct(args, n)
    kinds = functor.params
    columns = [_python(arg[first], k, symbols) for arg, k in zip(args, kinds, strict=True)]
    rows: list[tuple[Value, ...]] = [()] * len(first)
    if columns:
        rows = list(zip(*columns, strict=True))
    fn = functor.function
    results = [checked_value(call, row, _invoke(call, fn, row, row)) for row in rows]
    if functor.result == "symbol":
        distinct = symbols.intern_many([str(value) for value in results])
    else:
        distinct = np.array(results, dtype=_DTYPES[functor.result])
    return distinct[inverse]


def _distinct(args: list[Array], n: int) -> tuple[Array, Array]:
    """The first of `n` rows of each distinct argument tuple, and each row's tuple
    index (by bit pattern: every column is 8 bytes wide)."""
    if not args:
        return np.zeros(1, dtype=np.intp), np.zeros(n, dtype=np.intp)
    bits = [np.ascontiguousarray(arg).view(np.int64) for arg in args]
    keys = bits[0] if len(bits) == 1 else np.stack(bits, axis=1)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def _python(column: Array, kind: ColumnType, symbols: SymbolTable) -> list[Value]:
    values: list[Value] = (symbols.strings(column) if kind == "symbol" else column).tolist()
    return values


def _invoke(
    call: Call, fn: Callable[..., Any] | None, args: Sequence[Any], row: Sequence[Value]
) -> Any:
    """`fn(*args)`; an exception becomes a `FunctorError` showing `row`."""
    assert fn is not None
    check_budget()  # a slow function over many rows stops between two of them
    try:
        return fn(*args)
    except Interrupted:  # a budget met inside the function: its work stops, no fault
        raise
    except Exception as error:
        message = f"{_show(call, row)} raised {type(error).__name__}: {error}"
        raise FunctorError(message, call.span) from error


def checked_value(call: Call, row: Sequence[Value], value: object) -> Value:
    """`value` as a value of the functor's result type, or a `FunctorError`."""
    assert call.functor is not None
    fits, reason = _fit(value, call.functor.result)
    if reason:
        raise FunctorError(f"{_show(call, row)} returned {value!r}: {reason}", call.span)
    return fits


def _fit(value: object, kind: ColumnType) -> tuple[Value, str]:
    """`value` in `kind`, or a reason why it is not a value of that type."""
    if kind == "symbol":
        if not isinstance(value, str):
            return 0, "expected a symbol (a str)"
        if not value.isascii() and _SURROGATE.search(value):
            return 0, "a lone surrogate is not a character"
        return str(value), ""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        return 0, f"expected a {kind}"
    if isinstance(value, float | np.floating) and math.isnan(value):
        return 0, "NaN is not a value"
    if kind == "float":
        try:
            return float(value), ""
        except OverflowError:
            return 0, "out of the range of float"
    if isinstance(value, float | np.floating) and not float(value).is_integer():
        return 0, f"expected a {kind}, got a fraction"
    number = int(value)
    low, high = _LIMITS[kind]
    return (number, "") if low <= number <= high else (0, f"out of the range of {kind}")


# -- vectorized functors: once per batch ----------------------------------------------


def _vectorized(call: Call, functor: UserFunctor, args: list[Array], symbols: SymbolTable) -> Array:
    kinds = functor.params
    columns = [symbols.strings(a) if k == "symbol" else a for a, k in zip(args, kinds, strict=True)]
    first = _first_row(columns)
    result = _shaped(call, first, _invoke(call, functor.function, columns, first), len(args[0]))
    bad = _first_misfit(result, functor.result)
    if bad is not None:  # raises, showing that row
        row = [column[bad : bad + 1].tolist()[0] for column in columns]
        checked_value(call, row, result[bad : bad + 1].tolist()[0])
    if functor.result == "symbol":
        return symbols.intern_many(result.astype(object))
    return result.astype(_DTYPES[functor.result])


def _shaped(call: Call, row: Sequence[Value], out: object, n: int) -> Array:
    """A vectorized functor's result as an array of `n` values (a list stays objects,
    so numpy does not turn `[1, "a"]` into strings)."""
    if isinstance(out, list | tuple):
        result = np.empty(len(out), dtype=object)
        result[:] = out
    else:
        result = np.asarray(out)
    if result.shape != (n,):
        message = f"{_show(call, row)} (vectorized over {n} rows) returned shape {result.shape}"
        raise FunctorError(f"{message}, not ({n},)", call.span)
    return result


def _first_misfit(result: Array, kind: ColumnType) -> int | None:
    """The index of the first value that does not fit `kind`, or None."""
    if result.dtype.kind == "O" or (kind == "symbol") != (result.dtype.kind == "U"):
        for index, value in enumerate(result.tolist()):
            if _fit(value, kind)[1]:
                return index
        return None
    if kind == "symbol":  # numpy strings: UTF-32 code units, a surrogate is one of them
        codes = result.view(np.uint32).reshape(len(result), -1)
        bad = np.flatnonzero(((codes >= 0xD800) & (codes <= 0xDFFF)).any(axis=1))
        return int(bad[0]) if len(bad) else None
    if result.dtype.kind not in "iuf":
        return 0
    bad = _misfits(result, kind)
    return int(bad[0]) if len(bad) else None


def _misfits(result: Array, kind: ColumnType) -> Array:
    if result.dtype.kind == "f":
        wrong = np.isnan(result)
        if kind != "float":
            low, high = _LIMITS[kind]
            outside = (result < float(low)) | (result >= float(high) + 1)
            wrong |= ~np.isfinite(result) | (np.mod(result, 1) != 0) | outside
        return np.flatnonzero(wrong)
    if kind == "number" and result.dtype.kind == "u":
        return np.flatnonzero(result > np.uint64(2**63 - 1))
    if kind == "unsigned" and result.dtype.kind == "i":
        return np.flatnonzero(result < 0)
    return np.empty(0, dtype=np.intp)


# -- messages --------------------------------------------------------------------------


def _first_row(columns: Sequence[Array]) -> list[Value]:
    return [column[:1].tolist()[0] for column in columns]


def _show(call: Call, row: Sequence[object]) -> str:
    """`@f(1, "a")`: the call with one row's arguments, as Datalog text."""
    shown = (json.dumps(v) if isinstance(v, str) else repr(v) for v in row)
    return f"`{call.function}({', '.join(shown)})`"
