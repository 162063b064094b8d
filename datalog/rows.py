"""Rows in and out: user data to typed columns, columns back to Python rows.

Layer: datalog. Imports numpy, pyarrow (lazily) and the datalog schema/symbols.

Input accepted for a relation of arity `n`: an iterable of `n`-tuples, a 2-D
numpy array, a sequence of `n` column arrays, a dict of column name -> array,
a pyarrow Table or RecordBatch, a pandas or polars DataFrame, or another object
with `to_arrow()` (a Spark DataFrame's `toArrow()`). Tables and frames match
their columns to the relation's attributes by name when they have them all,
else by position. Columns are converted whole: numbers to int64,
unsigned to uint64, floats to float64, symbols interned through the
database's symbol table. A value of the wrong type raises `TransactionError`
naming the relation, column and row, before anything is applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from datalog.ast import ColumnType
from datalog.errors import TransactionError
from datalog.expressions import DTYPES
from datalog.schema import RelationInfo
from datalog.symbols import SymbolTable

Array = npt.NDArray[Any]


def to_columns(info: RelationInfo, data: object, symbols: SymbolTable) -> tuple[Array, ...]:
    """`data` as one typed numpy column per attribute of `info`."""
    raw = _raw_columns(info, data)
    if len(raw) != info.arity:
        raise TransactionError(
            f"`{info.name}` has {info.arity} columns, but the rows have {len(raw)}"
        )
    lengths = {len(c) for c in raw}
    if len(lengths) > 1:
        raise TransactionError(f"columns for `{info.name}` have different lengths {lengths}")
    return tuple(
        _typed(info, i, col, kind, symbols)
        for i, (col, kind) in enumerate(zip(raw, info.types, strict=True))
    )


def _raw_columns(info: RelationInfo, data: object) -> list[Any]:
    if hasattr(data, "iloc") and hasattr(data, "columns"):  # a pandas DataFrame
        return _frame_columns(info, data)
    if hasattr(data, "to_arrow") and not hasattr(data, "column"):  # polars, and the like
        data = data.to_arrow()
    elif hasattr(data, "toArrow") and hasattr(data, "sparkSession"):  # a Spark (>= 4) DataFrame
        data = data.toArrow()
    if hasattr(data, "num_columns") and hasattr(data, "column") and hasattr(data, "schema"):
        return [_arrow_column(data.column(i)) for i in _positions(info, data.schema.names)]
    if isinstance(data, Mapping):
        missing = [n for n in info.column_names if n not in data]
        if missing:
            raise TransactionError(f"`{info.name}` rows lack columns {missing}")
        return [np.asarray(data[n]) for n in info.column_names]
    if isinstance(data, np.ndarray):
        if data.ndim == 1 and info.arity == 1:
            return [data]
        if data.ndim != 2:
            raise TransactionError(f"rows for `{info.name}` must be a 2-D array")
        return [data[:, i] for i in range(data.shape[1])]
    return _columns_of_rows(info, data)


def _frame_columns(info: RelationInfo, frame: Any) -> list[Any]:
    """A pandas DataFrame's columns (see `_positions`)."""
    names = [str(c) for c in frame.columns]
    return [frame.iloc[:, i].to_numpy() for i in _positions(info, names)]


def _positions(info: RelationInfo, names: Sequence[str]) -> list[int]:
    """Which columns of a table with column `names` hold the relation's attributes:
    those of the same names when it has them all, else all, by position."""
    if set(info.column_names) <= set(names):
        return [list(names).index(name) for name in info.column_names]
    return list(range(len(names)))


def _columns_of_rows(info: RelationInfo, data: object) -> list[Any]:
    if isinstance(data, str | bytes):  # not three rows of one letter each
        raise TransactionError(
            f"rows for `{info.name}` must be a collection of rows, not a string: {data!r:.40}"
        )
    if not isinstance(data, Iterable):
        raise TransactionError(f"rows for `{info.name}` must be iterable, not {type(data)}")
    items = list(data)
    if items and isinstance(items[0], np.ndarray) and len(items) == info.arity:
        return items  # a sequence of columns
    rows: list[Sequence[object]] = []
    for n, row in enumerate(items):
        if isinstance(row, str | bytes) or not isinstance(row, Sequence):
            row = (row,)
        if len(row) != info.arity:
            raise TransactionError(
                f"row {n} of `{info.name}` has {len(row)} values, expected {info.arity}: {row!r}"
            )
        rows.append(row)
    if not rows:
        return [np.empty(0, dtype=object) for _ in range(info.arity)]
    return [np.array([r[i] for r in rows], dtype=object) for i in range(info.arity)]


def _arrow_column(column: Any) -> Any:
    """An Arrow column as numpy, except strings: they stay Arrow for interning."""
    import pyarrow as pa

    from datalog.arrow import to_numpy  # with pyarrow: not loaded with `datalog`

    is_string_view = getattr(pa.types, "is_string_view", None)  # pyarrow >= 16
    if is_string_view is not None and is_string_view(column.type):  # polars may export these
        return column.cast(pa.large_string())
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return column
    return to_numpy(column)


def _typed(info: RelationInfo, i: int, col: Any, kind: ColumnType, symbols: SymbolTable) -> Array:
    where = f"column {i + 1} (`{info.column_names[i]}`, {kind}) of `{info.name}`"
    if hasattr(col, "null_count"):  # Arrow strings (see `_arrow_column`)
        if kind != "symbol":
            raise TransactionError(f"{where} needs {kind} values, got strings")
        if col.null_count:
            raise TransactionError(f"{where} holds nulls, which are not values")
        return symbols.intern_many(col)
    col = np.asarray(col)
    if kind == "symbol":
        if len(col) and col.dtype.kind not in "UOST":
            raise TransactionError(f"{where} needs strings, got {col.dtype}")
        bad = [v for v in col[:1000] if not isinstance(v, str)] if col.dtype.kind == "O" else []
        if bad:
            raise TransactionError(f"{where} needs strings, got {bad[0]!r}")
        return symbols.intern_many(col.astype(str) if col.dtype.kind == "S" else col)
    return _numeric(col, kind, where)


def _numeric(col: Array, kind: ColumnType, where: str) -> Array:
    dtype = np.dtype(DTYPES[kind])
    if col.dtype.kind == "O":
        for v in col:
            if isinstance(v, str | bytes | bool) or not isinstance(v, int | float | np.number):
                raise TransactionError(f"{where} needs {kind} values, got {v!r}")
            # as for float arrays below: only integral floats may enter an integer column
            if kind != "float" and isinstance(v, float | np.floating) and not float(v).is_integer():
                raise TransactionError(f"{where} needs {kind} values, got {v!r}")
    elif (col.dtype.kind not in "iuf" or (kind != "float" and col.dtype.kind == "f")) and not (
        len(col) == 0 or (col.dtype.kind == "f" and bool(np.all(np.mod(col, 1) == 0)))
    ):
        raise TransactionError(f"{where} needs {kind} values, got {col.dtype}")
    typed_input = col.dtype.kind in "iuf"
    if typed_input and len(col):  # before the cast: it would wrap or warn
        _check_range(col, kind, where)
    try:
        typed = col.astype(dtype)
    except (OverflowError, ValueError, TypeError) as exc:
        raise TransactionError(f"{where}: {exc}") from None
    if not typed_input and kind == "float" and len(col):
        _check_range(typed, kind, where)
    return typed


_LIMITS: dict[str, tuple[int, int]] = {"number": (-(2**63), 2**63 - 1), "unsigned": (0, 2**64 - 1)}


def _check_range(col: Array, kind: ColumnType, where: str) -> None:
    """Typed columns are cast only when every value fits: no silent wrap-around, and
    no NaN (it equals nothing, itself included, so a set could neither hold it once
    nor ever retract it)."""
    if col.dtype.kind == "f":
        nan = np.flatnonzero(np.isnan(col))
        if len(nan):
            raise TransactionError(f"{where}: row {nan[0]} is NaN, which is not a value")
    if kind == "float":
        return
    low, high = _LIMITS[kind]
    if col.dtype.kind == "f":  # integral floats: within the range, exactly
        bad = np.flatnonzero((col < float(low)) | (col >= float(high) + 1))
    elif col.dtype.kind == "i":
        bad = np.flatnonzero(col < low) if low == 0 else np.empty(0, np.intp)
    else:
        bad = np.flatnonzero(col > np.uint64(high)) if high < 2**64 - 1 else np.empty(0, np.intp)
    if len(bad):
        raise TransactionError(f"{where}: row {bad[0]} holds {col[bad[0]]}, out of range")


def to_rows(
    columns: Sequence[Array], types: Sequence[ColumnType], symbols: SymbolTable, n: int
) -> list[tuple[Any, ...]]:
    """`n` rows of typed columns as Python tuples (symbols decoded to strings)."""
    decoded = [
        symbols.strings(c).tolist() if kind == "symbol" else c.tolist()
        for c, kind in zip(columns, types, strict=True)
    ]
    return list(zip(*decoded, strict=True)) if decoded else [()] * n
