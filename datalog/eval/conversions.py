"""`as(x, type)` over columns: the vectorized counterpart of `functions.convert`.

Layer: datalog. Imports numpy and the datalog language modules (ast, functions,
symbols). Must agree with `functions.convert` row by row (ADR 0027): number <->
unsigned reinterpret the 64 bits (two's complement wraparound), integers round to
the nearest float, floats truncate toward zero and have no value out of range or
NaN, and a symbol becomes its `ord` (one fingerprint per distinct symbol).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import ColumnType
from datalog.lang.functions import ordinal

Array = npt.NDArray[Any]
Mask = npt.NDArray[np.bool_]

# Where float -> integer conversion is defined: [low, high) after truncation.
_BOUNDS: dict[str, tuple[float, float]] = {
    "number": (-(2.0**63), 2.0**63),
    "unsigned": (0.0, 2.0**64),
}


def convert_column(
    values: Array, source: ColumnType, target: ColumnType, symbols: SymbolTable
) -> tuple[Array, Mask | None]:
    """`as(values, target)` for a column of type `source`, and where it has a value."""
    if source == target:
        return values, None
    if source == "symbol":
        return ordinals(values, symbols), None
    if target == "float":
        return values.astype(np.float64), None
    if source == "float":
        return _truncated(values, target)
    return values.view(np.uint64 if target == "unsigned" else np.int64), None


def ordinals(ids: Array, symbols: SymbolTable) -> Array:
    """`ord` of each symbol id: a Python fingerprint per distinct symbol only."""
    distinct, inverse = np.unique(ids, return_inverse=True)
    texts = symbols.strings(distinct).tolist()
    found = np.fromiter((ordinal(text) for text in texts), np.int64, len(texts))
    result: Array = found[inverse.reshape(-1)]
    return result


def _truncated(values: Array, target: ColumnType) -> tuple[Array, Mask | None]:
    low, high = _BOUNDS[target]
    with np.errstate(invalid="ignore"):
        whole = np.trunc(values)
        valid = (whole >= low) & (whole < high)  # False for NaN
    safe = np.where(valid, whole, 0.0)
    return safe.astype(np.uint64 if target == "unsigned" else np.int64), (
        None if valid.all() else valid
    )
