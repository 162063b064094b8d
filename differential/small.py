"""Kernels for a handful of rows, in plain Python.

Layer: differential (bottom). Imports the standard library only.

A numpy call costs about a microsecond whatever its size, and sorting and
consolidating a batch takes a dozen or more of them: for the few rows that a
small change moves through a dataflow (one edge, one new fact per iteration),
that fixed cost is the whole cost. Below `TUNING.few` rows the callers switch to these
functions, which work on Python lists (`ndarray.tolist()`) and return the
positions to gather, so their results are identical to the numpy path's: the
same order, the same consolidation, the same hashes. Only integer columns take
this path (Python's sort has no total order for NaN).

ADR 0012 records the threshold and the figures.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

_MASK64 = (1 << 64) - 1
_MOD, _HALF = 1 << 64, 1 << 63
_SEED = 0x2545F4914F6CDD1D
_MIX = 0x9E3779B97F4A7C15
_FINAL = 0xBF58476D1CE4E5B9


def consolidated_runs(keys: Sequence[list[int]], diffs: list[int]) -> tuple[list[int], list[int]]:
    """Rows sorted by `keys` (columns, compared lexicographically), one per run of
    equal keys: `(first row of each run, its summed diff)`, zero sums dropped.

    Sums are Python integers, so they are exact whatever their size.
    """
    rows = list(zip(*keys, strict=True)) if keys else [()] * len(diffs)
    order = sorted(range(len(diffs)), key=rows.__getitem__)
    firsts: list[int] = []
    sums: list[int] = []
    previous: tuple[int, ...] | None = None
    for i in order:
        row = rows[i]
        if row == previous:
            sums[-1] += diffs[i]
        else:
            firsts.append(i)
            sums.append(diffs[i])
            previous = row
    kept = [k for k, total in enumerate(sums) if total]
    if len(kept) == len(sums):
        return firsts, sums
    return [firsts[k] for k in kept], [sums[k] for k in kept]


# Bits per column of a key of several integer columns whose values all fit: the key is
# then hashed to its columns packed side by side (order-preserving), 46 bits in all.
_PACKED_BITS = 46


def packed_width(columns: int) -> int:
    """Bits per column of a packed key hash of `columns` (two or more) columns."""
    return _PACKED_BITS // columns


def mixed_hash(columns: Sequence[list[int]], n: int) -> list[int]:
    """`differential.trace.batch.key_hash` of several columns, row by row: the columns
    packed side by side where every value fits in `packed_width` bits (two columns
    or more), else the 44-bit mix.

    `columns` hold each column's 64-bit pattern as unsigned Python integers.
    """
    out = []
    width = packed_width(len(columns)) if len(columns) > 1 else 0
    limit = 1 << width
    for row in range(n):
        if width and all(col[row] < limit for col in columns):
            acc = 0
            for col in columns:
                acc = (acc << width) | col[row]
            out.append(acc)
            continue
        acc = _SEED
        for col in columns:
            acc = ((acc ^ col[row]) * _MIX) & _MASK64
        acc ^= acc >> 31
        acc = (acc * _FINAL) & _MASK64
        acc ^= acc >> 29
        out.append(acc >> 20)
    return out


def key_hashes(rows: Sequence[tuple[int, ...]], identity: bool) -> list[int]:
    """`differential.trace.batch.key_hash` of integer keys given as Python rows
    (`identity`: one column, its value as an int64; else the mixed hash of the
    columns' 64-bit patterns)."""
    if identity:
        return [r[0] if r[0] < _HALF else r[0] - _MOD for r in rows]
    width = len(rows[0]) if rows else 0
    return mixed_hash([[r[c] & _MASK64 for r in rows] for c in range(width)], len(rows))


def row_hash(identity: bool, signed: bool) -> Callable[[tuple[int, ...]], int]:
    """`differential.trace.batch.key_hash` of one integer key given as a Python row:
    the key itself as an int64 (`identity`: one column; `signed`: an int64 one),
    else its mixed hash."""
    if identity and signed:
        return operator.itemgetter(0)
    if identity:
        return lambda row: row[0] if row[0] < _HALF else row[0] - _MOD
    return lambda row: mixed_hash([[value & _MASK64] for value in row], 1)[0]
