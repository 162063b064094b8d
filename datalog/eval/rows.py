"""Rows in and out: user data to typed columns, columns back to Python rows.

Layer: datalog. Imports numpy and the datalog schema/symbols; pyarrow when many strings
or Arrow data come (not with `import datalog`).

Input accepted for a relation of arity `n`: an iterable of `n`-tuples, a 2-D
numpy array, a sequence of `n` column arrays, a dict of column name -> array,
a pyarrow Table or RecordBatch, a pandas or polars DataFrame, or another object
with `to_arrow()` (a Spark DataFrame's `toArrow()`). Named columns (tables,
frames, dicts) are matched to the relation's attributes by name, in any order
(columns it does not declare are left out); a mismatch (`nom` for `name`) is an
error naming the expected and the given columns. Unnamed input (tuples, numpy
arrays) is positional, and so are columns named as their library names unnamed
ones: pandas' 0, 1, ... (a RangeIndex), Spark's _1, _2, ..., polars' column_0,
column_1, ... and Deltalog's own c0, c1, ... (ADR 0036). Columns are converted
whole: numbers to int64, unsigned to uint64, floats to float64, symbols interned
through the database's symbol table (strings only: every row is checked, in
Arrow, and a lone surrogate is no string). A value of the wrong type raises
`TransactionError` naming the relation, column and row, before anything is applied.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from datalog.eval.expressions import DTYPES
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import ColumnType
from datalog.lang.errors import TransactionError
from datalog.lang.schema import RelationInfo
from differential.tuning import TUNING

if TYPE_CHECKING:
    import pyarrow as pa

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
        return [data.column(i) for i in _positions(info, data.schema.names)]
    if isinstance(data, Mapping):
        keys = list(data)
        return [np.asarray(data[keys[i]]) for i in _positions(info, [str(k) for k in keys])]
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


# Column names that say "no name": pandas (and Arrow from pandas) 0, 1...; Spark _1,
# _2...; polars column_0...; Deltalog's own c0, c1...
_UNNAMED = (lambda i: str(i), lambda i: f"_{i + 1}", lambda i: f"column_{i}", lambda i: f"c{i}")


def _positions(info: RelationInfo, names: Sequence[str]) -> list[int]:
    """Which columns of a table with column `names` hold the relation's attributes:
    those of the same names (in any order), or all of them by position when the
    names are a library's names for unnamed columns; else an error."""
    names = list(names)
    if set(info.column_names) <= set(names):
        twice = [name for name in info.column_names if names.count(name) > 1]
        if twice:
            raise TransactionError(f"the rows for `{info.name}` have two columns `{twice[0]}`")
        return [names.index(name) for name in info.column_names]
    if any(names == [unnamed(i) for i in range(len(names))] for unnamed in _UNNAMED):
        return list(range(len(names)))
    expected = ", ".join(info.column_names)
    missing = ", ".join(n for n in info.column_names if n not in names)
    raise TransactionError(
        f"`{info.name}` has columns ({expected}), but the rows' columns are "
        f"({', '.join(names)}): {missing} missing; name the columns as declared "
        "(in any order), or pass rows without names (tuples, a numpy array)"
    )


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


def _typed(info: RelationInfo, i: int, col: Any, kind: ColumnType, symbols: SymbolTable) -> Array:
    where = f"column {i + 1} (`{info.column_names[i]}`, {kind}) of `{info.name}`"
    if hasattr(col, "null_count"):  # an Arrow array (pyarrow is loaded, then)
        from datalog.eval.arrow import to_numpy

        if col.null_count:
            row = int(np.flatnonzero(to_numpy(col.is_null()))[0])
            raise TransactionError(f"{where} holds nulls: row {row} is null, not a value")
        if kind == "symbol":
            return symbols.intern_many(_arrow_strings(col, where))
        if _is_string(col.type):
            raise TransactionError(f"{where} needs {kind} values, got strings (row 0)")
        col = to_numpy(col)
    col = np.asarray(col)
    if kind == "symbol":
        few = _few_strings(col)
        if few is not None:  # a Python loop: no pyarrow to load (ADR 0067)
            return np.fromiter(map(symbols.intern, few), np.int64, len(few))
        return symbols.intern_many(_strings(col, where))
    return _numeric(col, kind, where)


def _is_string(kind: pa.DataType) -> bool:
    import pyarrow as pa

    is_string_view = getattr(pa.types, "is_string_view", None)  # pyarrow >= 16
    view = is_string_view is not None and is_string_view(kind)
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or view)


def _arrow_strings(col: pa.Array | pa.ChunkedArray, where: str) -> pa.Array | pa.ChunkedArray:
    """An Arrow string column, checked: valid UTF-8 (Arrow data from IPC or buffers is
    not), interned without Python strings (`SymbolTable.intern_many`)."""
    import pyarrow as pa

    if not _is_string(col.type):
        raise TransactionError(f"{where} needs strings, got {col.type} (row 0)")
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        col = col.cast(pa.large_string())  # a string view (polars may export them)
    try:
        col.validate(full=True)
    except pa.ArrowInvalid:
        strings = col.cast(pa.large_binary()).to_pylist()
        row = next(n for n, b in enumerate(strings) if not _is_utf8(b))
        raise TransactionError(f"{where}: row {row} is not valid UTF-8 text") from None
    return col


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _strings(col: Array, where: str) -> pa.Array:
    """A numpy column of Python (or numpy) strings as Arrow strings, every row checked
    by Arrow; the first row that is not a string named, if one is not."""
    import pyarrow as pa

    if col.dtype.kind == "S":
        col = col.astype(str)
    if len(col) == 0:
        return pa.array([], pa.large_string())
    if col.dtype.kind not in "UO":
        raise TransactionError(f"{where} needs strings, got {col.dtype} (row 0)")
    try:
        array = pa.array(col, from_pandas=False)  # infers: mixed str and bytes is binary
    except (pa.ArrowException, UnicodeEncodeError, OverflowError, ValueError, TypeError):
        array = None
    if array is None or not _is_string(array.type) or array.null_count:
        raise _not_a_string(col, where)
    return array


_SURROGATE = re.compile("[\ud800-\udfff]")


def _few_strings(col: Array) -> list[str] | None:
    """The values of a column of at most `Tuning.python_symbols` rows as Python strings,
    if every one is a `str` with no lone surrogate (what `_strings` accepts); else
    None: Arrow checks them and names the first bad row."""
    if len(col) > TUNING.python_symbols or col.dtype.kind not in "UO":
        return None
    values = col.reshape(-1).tolist()
    if not all(type(v) is str for v in values) or _SURROGATE.search("".join(values)):
        return None
    return values


def _not_a_string(col: Array, where: str) -> TransactionError:
    """The error for the first row of `col` that is no string (a Python loop: only
    once the column is known to hold one)."""
    for row, value in enumerate(col.tolist()):
        if not isinstance(value, str):
            return TransactionError(f"{where} needs strings: row {row} holds {value!r:.60}")
        found = _SURROGATE.search(value)
        if found:
            code = f"U+{ord(found.group()):04X}"
            message = f"row {row} holds a lone surrogate ({code}), which is not a character"
            return TransactionError(f"{where}: {message}")
    return TransactionError(f"{where} needs strings")


def _numeric(col: Array, kind: ColumnType, where: str) -> Array:
    dtype = np.dtype(DTYPES[kind])
    if col.dtype.kind == "O":
        for row, v in enumerate(col):
            problem = _not_a_number(v, kind)
            if problem:
                raise TransactionError(f"{where} {problem}: row {row} holds {v!r:.60}")
    elif col.dtype.kind not in "iuf" and len(col):
        raise TransactionError(f"{where} needs {kind} values, got {col.dtype} (row 0)")
    elif kind != "float" and col.dtype.kind == "f" and len(col):
        fraction = np.flatnonzero(np.isfinite(col) & (np.mod(col, 1) != 0))
        if len(fraction):
            row = int(fraction[0])
            raise TransactionError(f"{where} needs {kind} values: row {row} holds {col[row]}")
    typed_input = col.dtype.kind in "iuf"
    if typed_input and len(col):  # before the cast: it would wrap or warn
        _check_range(col, kind, where)
    if _narrow(col, dtype):  # kept at its width, widened only if read so (ADR 0073)
        return col if _immutable(col) else col.copy()
    try:
        typed = col.astype(dtype)
    except (OverflowError, ValueError, TypeError) as exc:
        raise TransactionError(f"{where}: {exc}") from None
    if not typed_input and kind == "float" and len(col):
        _check_range(typed, kind, where)
    return typed


def _narrow(col: Array, dtype: np.dtype) -> bool:
    """Whether an integer column (its values checked) is kept narrower than `dtype`
    (`Tuning.narrow_columns`): `Requests` widen it when read at the relation's type."""
    return (
        TUNING.narrow_columns
        and col.dtype.kind in "iu"
        and dtype.kind in "iu"
        and col.dtype.itemsize < dtype.itemsize
    )


def _immutable(col: Array) -> bool:
    """Whether nothing can change `col`'s values while a transaction holds it, so it
    need not be copied: it is read-only, as is every array beneath it, down to one
    that owns its memory (a reader's own column) or to an Arrow buffer (immutable)."""
    base: object = col
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return base is None or type(base).__module__.startswith("pyarrow")


def _not_a_number(value: object, kind: ColumnType) -> str:
    """Why a Python value is no `kind` (a number type), or ""."""
    if isinstance(value, str | bytes | bool) or not isinstance(value, int | float | np.number):
        return f"needs {kind} values"
    if kind == "float":
        try:
            float(value)
        except OverflowError:
            return "is out of range"
        return ""
    # as for float arrays: only integral floats may enter an integer column
    if isinstance(value, float | np.floating) and not float(value).is_integer():
        return f"needs {kind} values"
    if isinstance(value, int | np.integer):
        low, high = _LIMITS[kind]
        if not low <= int(value) <= high:
            return "is out of range"
    return ""


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
