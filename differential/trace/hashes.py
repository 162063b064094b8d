"""Key hashes: one int64 per row identifying a batch's key (`key_hash`), the hash that
orders keys like their rows (`ordered_hash`), and the key columns read back from it
(`rows_of_hashes`).

Layer: differential (trace). Imports numpy and `differential.small`/`batch`/`tuning`.

`hash` is the key itself when the key is one integer column; the columns packed side
by side when they all fit (`packed_hash`: order-preserving); otherwise a 44-bit mix of
the key columns. Lookups confirm the key columns, so collisions cost time, never
correctness.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from differential import small
from differential.batch import Column
from differential.tuning import TUNING

Hashes = npt.NDArray[np.int64]

_MIX = np.uint64(0x9E3779B97F4A7C15)
_FINAL = np.uint64(0xBF58476D1CE4E5B9)


def _as_int64(col: Column) -> npt.NDArray[np.int64]:
    if col.dtype == np.int64:
        return col  # type: ignore[return-value]
    if col.dtype.kind == "f":
        normalized = np.where(col == 0, 0.0, col).astype(np.float64)
        return normalized.view(np.int64)
    return col.astype(np.int64)


def key_hash(columns: Sequence[Column]) -> Hashes:
    """One int64 per row identifying its key; identity for one integer column.

    A key of several columns whose values (their 64-bit patterns) each fit in
    `46 // k` bits is hashed to the columns packed side by side, first column
    most significant (`packed_hash`): order-preserving, so a batch keyed by all the
    columns of a relation is sorted like the rows themselves, and shares them with
    the arrangement keyed by the first column (ADR 0044). Other keys get a 44-bit
    mix of their columns. Either is small enough that a batch's sort key `(hash,
    values, time)` often packs into one int64 (one argsort instead of a lexsort),
    and wide enough that collisions are rare. Collisions cost a comparison, never
    correctness: lookups confirm the key columns.
    """
    if len(columns) == 1 and columns[0].dtype.kind in "iu":
        return _as_int64(columns[0])
    if not columns:
        return np.zeros(0, dtype=np.int64)
    n = len(columns[0])
    if n <= TUNING.few:
        bits = [_as_int64(col).view(np.uint64).tolist() for col in columns]
        return np.array(small.mixed_hash(bits, n), dtype=np.int64)
    patterns = [_as_int64(col).view(np.uint64) for col in columns]
    if len(columns) == 1:
        return _mixed(patterns)
    width = np.uint64(small.packed_width(len(columns)))
    if all(int(p.max()) >> int(width) == 0 for p in patterns):
        return _packed(patterns, width)
    fits = np.ones(n, dtype=bool)
    for p in patterns:
        fits &= (p >> width) == 0
    return np.where(fits, _packed(patterns, width), _mixed(patterns))


def ordered_hash(columns: Sequence[Column]) -> Hashes | None:
    """`key_hash(columns)`, as a new array, when it orders the keys like their rows
    (one integer column below 2**63, or integer columns whose every value fits the
    packed hash); else None. Sorting it sorts the rows (`rows_of_hashes`)."""
    if not columns or any(c.dtype.kind not in "iu" for c in columns):
        return None
    if len(columns) == 1:
        column = columns[0]
        if column.dtype.kind == "u" and len(column) and int(column.max()) >> 63:
            return None
        return column.astype(np.int64)  # a copy
    width = small.packed_width(len(columns))
    patterns = [_pattern(col, width) for col in columns]
    if len(columns[0]) and not all(int(p.max()) >> width == 0 for p in patterns):
        return None
    return _packed(patterns, np.uint64(width))


def _pattern(col: Column, width: int) -> npt.NDArray[np.unsignedinteger]:
    """The column's bit patterns, unsigned, for the packed hash: at the column's own
    width when every value below `2**width` reads the same there as in 64 bits and
    every other value reads as at least `2**width` (a negative int32 as 2**31 or
    more, when `width` is below 31), so that an int32 column packs without a widened
    copy (ADR 0073); else of the column widened to 64 bits."""
    bits = col.dtype.itemsize * 8
    if bits < 64 and (col.dtype.kind == "u" or (col.dtype.kind == "i" and bits > width)):
        return col.view(f"u{col.dtype.itemsize}")
    return _as_int64(col).view(np.uint64)


def rows_of_hashes(hashes: Hashes, dtypes: Sequence[np.dtype]) -> tuple[Column, ...]:
    """The key columns (of `dtypes`) whose `ordered_hash` is `hashes`: one integer
    column is its hash (shared, when int64), several are unpacked."""
    if len(dtypes) == 1:
        return (hashes if dtypes[0] == np.int64 else hashes.astype(dtypes[0]),)
    width = small.packed_width(len(dtypes))
    out: list[Column] = []
    for i, dtype in enumerate(dtypes):
        shift = width * (len(dtypes) - 1 - i)
        if not i:  # the leading column has nothing above it
            part = np.right_shift(hashes, shift) if shift else hashes.copy()
        elif shift:
            part = np.right_shift(hashes, shift)
            np.bitwise_and(part, (1 << width) - 1, out=part)
        else:  # the last column: one pass, not a copy and then a mask (ADR 0069)
            part = np.bitwise_and(hashes, (1 << width) - 1)
        out.append(part if dtype == np.int64 else part.astype(dtype))
    return tuple(out)


def _packed(patterns: Sequence[npt.NDArray[np.uint64]], width: np.uint64) -> Hashes:
    """The columns side by side, `width` bits each (only rows that fit are meaningful)."""
    if len(patterns) == 1:
        return patterns[0].copy().view(np.int64)
    acc = np.left_shift(patterns[0], width)  # shifted as copied: one pass, not two
    for i, p in enumerate(patterns[1:]):
        if i:
            acc <<= width
        acc |= p
    return acc.view(np.int64)


def _mixed(patterns: Sequence[npt.NDArray[np.uint64]]) -> Hashes:
    acc = np.full(len(patterns[0]), 0x2545F4914F6CDD1D, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for p in patterns:  # absorb each column by an invertible step
            acc ^= p
            acc *= _MIX
        acc ^= acc >> np.uint64(31)  # then mix the high bits into the kept ones
        acc *= _FINAL
        acc ^= acc >> np.uint64(29)
    return (acc >> np.uint64(20)).view(np.int64)
