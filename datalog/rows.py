"""Rows in and out: user data to typed columns, columns back to Python rows.

Layer: datalog. Imports numpy, pyarrow (lazily) and the datalog schema/symbols.

Input accepted for a relation of arity `n`: an iterable of `n`-tuples, a 2-D
numpy array, a sequence of `n` column arrays, a dict of column name -> array,
a pyarrow Table or RecordBatch (columns by position), or a pandas/Spark-like
object with `to_arrow()`. Columns are converted whole: numbers to int64,
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
    if hasattr(data, "to_arrow") and not hasattr(data, "column"):
        data = data.to_arrow()
    elif hasattr(data, "toArrow") and hasattr(data, "sparkSession"):  # a Spark (>= 4) DataFrame
        data = data.toArrow()
    if hasattr(data, "num_columns") and hasattr(data, "column"):
        return [data.column(i).to_numpy(zero_copy_only=False) for i in range(data.num_columns)]
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


def _columns_of_rows(info: RelationInfo, data: object) -> list[Any]:
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


def _typed(info: RelationInfo, i: int, col: Any, kind: ColumnType, symbols: SymbolTable) -> Array:
    col = np.asarray(col)
    where = f"column {i + 1} (`{info.column_names[i]}`, {kind}) of `{info.name}`"
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
    try:
        return col.astype(dtype)
    except (OverflowError, ValueError, TypeError) as exc:
        raise TransactionError(f"{where}: {exc}") from None


def to_rows(
    columns: Sequence[Array], types: Sequence[ColumnType], symbols: SymbolTable, n: int
) -> list[tuple[Any, ...]]:
    """`n` rows of typed columns as Python tuples (symbols decoded to strings)."""
    decoded = [
        symbols.strings(c).tolist() if kind == "symbol" else c.tolist()
        for c, kind in zip(columns, types, strict=True)
    ]
    return list(zip(*decoded, strict=True)) if decoded else [()] * n
