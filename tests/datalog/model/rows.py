"""The same rows in every form `Transaction.insert` takes (`datalog.eval.rows`).

`narrow`: numeric columns at the narrowest integer type holding them (an int32
column of numbers), which a transaction keeps at that width (ADR 0073).

Tables and frames carry the relation's column names (`c0`, `c1`, ...), so they
are matched by name; numeric columns have their numpy or Arrow type, symbols are
strings. Zero rows are given typed empty columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

FORMS = ("tuples", "list", "numpy", "columns", "narrow", "dict", "arrow", "pandas")
_NUMPY = {"number": np.int64, "unsigned": np.uint64, "float": np.float64, "symbol": object}
_ARROW = {
    "number": pa.int64(),
    "unsigned": pa.uint64(),
    "float": pa.float64(),
    "symbol": pa.string(),
}


def encode(form: str, kinds: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> object:
    """`rows` of a relation with column types `kinds`, as `form`."""
    if form == "tuples":
        return tuple(rows)
    if form == "list":
        return [list(row) for row in rows]
    columns = [[row[i] for row in rows] for i in range(len(kinds))]
    names = [f"c{i}" for i in range(len(kinds))]
    if form == "numpy":
        if len(kinds) == 1 and kinds[0] != "symbol":
            return np.array(columns[0], dtype=_NUMPY[kinds[0]])
        dtype = object if "symbol" in kinds else np.result_type(*(_NUMPY[k] for k in kinds))
        return np.array(rows, dtype=dtype).reshape(len(rows), len(kinds))
    arrays = [np.array(col, dtype=_NUMPY[k]) for col, k in zip(columns, kinds, strict=True)]
    if form == "columns":
        return arrays
    if form == "narrow":  # each integer column at the narrowest type holding it (ADR 0073)
        return [_narrowest(a) for a in arrays]
    if form == "dict":
        return dict(zip(names, arrays, strict=True))
    if form == "arrow":
        return pa.table(
            {n: pa.array(c, type=_ARROW[k]) for n, c, k in zip(names, columns, kinds, strict=True)}
        )
    assert form == "pandas"
    return pd.DataFrame(dict(zip(names, arrays, strict=True)))


def _narrowest(column: np.ndarray) -> np.ndarray:
    """An integer column as the narrowest of int8, int16, int32 and uint32 holding
    every value (as it is if none does, or if it is empty or not integers)."""
    if column.dtype.kind not in "iu" or not len(column):
        return column
    low, high = int(column.min()), int(column.max())
    for dtype in (np.int8, np.int16, np.int32, np.uint32):
        bounds = np.iinfo(dtype)
        if bounds.min <= low and high <= bounds.max:
            return column.astype(dtype)
    return column
