"""Columnar updates and their consolidation.

Layer: differential (bottom). Imports numpy and `differential.time`.

An update is `(data, time, diff)`: a tuple of data columns (int64 or float64
numpy arrays of equal length), a time column of shape `(depth, n)` and an int64
diff column. `Updates` holds many of them; it is a value, never mutated.
Consolidation sorts by (data, time), sums the diffs of equal entries and drops
zeros, all on whole columns. A sort of many rows runs in parts (`_SORT_PART`),
checking the running budget between them (docs/adr/0039).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from differential import small
from differential.budget import check_budget
from differential.time import Time, Times, column

Column = npt.NDArray[np.generic]
Diffs = npt.NDArray[np.int64]
Index = npt.NDArray[np.intp]


@dataclass(eq=False, slots=True)
class Updates:
    """A bag of updates: `columns[i][j]` is column i of update j. A value: never mutated
    (not frozen only because frozen dataclasses cost a microsecond to build)."""

    columns: tuple[Column, ...]
    times: Times
    diffs: Diffs

    def __len__(self) -> int:
        return len(self.diffs)

    @property
    def arity(self) -> int:
        return len(self.columns)

    @property
    def depth(self) -> int:
        return int(self.times.shape[0])

    @staticmethod
    def empty(arity: int, depth: int, dtypes: Sequence[np.dtype] | None = None) -> Updates:
        kinds = dtypes or [np.dtype(np.int64)] * arity
        return Updates(
            tuple(np.empty(0, dtype=k) for k in kinds),
            np.empty((depth, 0), dtype=np.int64),
            np.empty(0, dtype=np.int64),
        )

    @staticmethod
    def at(columns: Sequence[Column], time: Time, diffs: Diffs | int = 1) -> Updates:
        """Updates all at one time; `diffs` may be a scalar."""
        cols = tuple(np.asarray(c) for c in columns)
        n = len(cols[0]) if cols else (len(diffs) if isinstance(diffs, np.ndarray) else 0)
        d = np.full(n, diffs, dtype=np.int64) if isinstance(diffs, int) else diffs
        return Updates(cols, column(time, n), d.astype(np.int64, copy=False))

    def take(self, index: Index | npt.NDArray[np.bool_]) -> Updates:
        """The updates selected by an index or mask, in that order."""
        return Updates(
            tuple(c[index] for c in self.columns), self.times[:, index], self.diffs[index]
        )

    def select(self, mask: npt.NDArray[np.bool_]) -> Updates:
        """The updates where `mask` holds; `self` itself when it holds everywhere
        (a few rows are checked in Python: cheaper than a numpy reduction)."""
        if len(mask) <= small.FEW:
            if all(mask.tolist()):
                return self
        elif mask.all():
            return self
        return self.take(mask)

    def negate(self) -> Updates:
        return Updates(self.columns, self.times, -self.diffs)

    def with_columns(self, columns: Sequence[Column]) -> Updates:
        return Updates(tuple(columns), self.times, self.diffs)

    def with_times(self, times: Times) -> Updates:
        return Updates(self.columns, times, self.diffs)

    def rows(self) -> list[tuple[object, ...]]:
        """Python tuples `(*data, time, diff)`: for tests and debugging only."""
        times = [tuple(int(x) for x in t) for t in self.times.T]
        data = [c.tolist() for c in self.columns]
        return [(*(col[i] for col in data), times[i], int(self.diffs[i])) for i in range(len(self))]


def python_rows(columns: Sequence[Column], n: int) -> list[tuple[object, ...]]:
    """The `n` rows of `columns` as Python tuples (`n` empty ones without columns):
    what the kernels for a few rows work on."""
    return list(zip(*(c.tolist() for c in columns), strict=True)) or [()] * n


def python_times(times: Times) -> list[Time]:
    """A time column as Python tuples, one per update (zipped in C: half the cost of
    a tuple per row of the transposed list for a large batch)."""
    if not len(times):
        return [()] * times.shape[1]
    return list(zip(*times.tolist(), strict=True))


def concat(parts: Sequence[Updates]) -> Updates:
    """All updates of `parts` (same arity and depth) in one `Updates`."""
    nonempty = [p for p in parts if len(p)]
    if len(nonempty) == 1:
        return nonempty[0]
    if not nonempty:
        return parts[0]
    arity = nonempty[0].arity
    return Updates(
        tuple(np.concatenate([p.columns[i] for p in nonempty]) for i in range(arity)),
        np.concatenate([p.times for p in nonempty], axis=1),
        np.concatenate([p.diffs for p in nonempty]),
    )


def pack(columns: Sequence[Column]) -> tuple[npt.NDArray[np.int64], list[tuple[int, int]]] | None:
    """Integer columns packed into one int64 per row, ordered like the rows.

    Each column is offset by its minimum and given just the bits its range
    needs, first column most significant, so sorting the packed keys sorts the
    rows lexicographically. None when a column is not integer or the widths
    add up to more than 63 bits.
    """
    n = len(columns[0]) if columns else 0
    specs: list[tuple[int, int]] = []
    total = 0
    for col in columns:
        if col.dtype.kind not in "iu":
            return None
        lo, hi = (int(col.min()), int(col.max())) if n else (0, 0)
        if hi >= 1 << 63:
            return None
        width = (hi - lo).bit_length()
        total += width
        if total > 63:
            return None
        specs.append((lo, width))
    key = np.zeros(n, dtype=np.int64)
    for col, (lo, width) in zip(columns, specs, strict=True):
        if width:
            key <<= width
            key |= _offset(col, lo)
    return key, specs


def _offset(col: Column, lo: int) -> npt.NDArray[np.int64]:
    """`col - lo` as int64 (it fits: `pack` checked the range)."""
    if col.dtype == np.int64:
        return col - lo  # type: ignore[return-value]
    if col.dtype.kind == "i":
        return col.astype(np.int64) - lo
    return (col.astype(np.uint64) - np.uint64(lo)).astype(np.int64)


def unpack(
    key: npt.NDArray[np.int64], specs: list[tuple[int, int]], dtypes: Sequence[np.dtype]
) -> list[Column]:
    """The columns that `pack` packed into `key` (in any row order)."""
    out: list[Column] = []
    shift = 0
    for (lo, width), dtype in zip(reversed(specs), reversed(list(dtypes)), strict=True):
        if width:
            part = (key >> shift) & ((1 << width) - 1) if shift else key & ((1 << width) - 1)
            if lo:
                part += lo
            shift += width
        else:
            part = np.full(len(key), lo, dtype=np.int64)
        out.append(part if dtype == np.int64 else part.astype(dtype))
    return out[::-1]


# Rows one numpy sort handles at most when a sort is split in parts: about a tenth
# of a second each, so that a budget or an interrupt acts between two of them.
_SORT_PART = 1 << 21


def sort_order(
    columns: Sequence[Column], times: Times | None = None, stable: bool = False, runs: bool = False
) -> Index:
    """The permutation sorting rows by (columns..., time) lexicographically.

    Integer columns whose ranges fit in 63 bits are packed and sorted as one
    key; failing that, the first column (a hash, say) stays apart and the rest
    are packed; the general case is `np.lexsort`. Ties keep their input order
    when `stable`. More than `_SORT_PART` rows are sorted in parts, the budget
    checked between them (`_sort_in_parts`), unless they are a few sorted `runs`
    (batches being merged), which one stable sort merges in about linear time.
    """
    keys: list[Column] = list(columns)
    if times is not None:
        keys.extend(times[i] for i in range(times.shape[0]))
    if keys and len(keys[0]) > _SORT_PART and not runs:
        return _sort_in_parts(keys, stable)
    return _sort_keys(keys, stable)


def _sort_keys(keys: Sequence[Column], stable: bool) -> Index:
    kind: Literal["stable", "quicksort"] = "stable" if stable else "quicksort"
    if len(keys) == 1:
        return np.argsort(keys[0], kind=kind)
    packed = pack(keys)
    if packed is not None:
        return np.argsort(packed[0], kind=kind)
    rest = pack(keys[1:])
    if rest is not None:
        return np.lexsort((rest[0], keys[0]))
    return np.lexsort(keys[::-1])


def _sort_in_parts(keys: Sequence[Column], stable: bool) -> Index:
    """`_sort_keys` of many rows with no numpy call over much more than `_SORT_PART`
    rows, checking the budget between any two (a sample sort).

    Splitters drawn from an evenly spaced sample of the leading key (all keys packed
    into one when they fit) cut its range into about `n / _SORT_PART` ranges; each
    part of the rows is distributed into the ranges (a stable sort of small range
    numbers, linear), then each range is sorted on its own. Rows of one range keep
    their input order until their own sort, so the result is stable. Many rows with
    one leading key (no packing, a skewed first column) make one range large: its
    sort is then one call over them."""
    packed = pack(keys)
    lead = keys[0] if packed is None else packed[0]
    n = len(lead)
    ranges = -(-n // _SORT_PART)
    sample = np.sort(lead[:: max(1, n // (ranges * 64))])
    splitters = np.unique(sample[64::64])
    pieces: list[list[Index]] = [[] for _ in range(len(splitters) + 1)]
    for start in range(0, n, _SORT_PART):
        check_budget()
        where = np.searchsorted(splitters, lead[start : start + _SORT_PART], side="right")
        small_numbers = where.astype(np.uint16) if len(pieces) <= 1 << 16 else where
        order = np.argsort(small_numbers, kind="stable") + start  # linear: a radix sort
        ends = np.cumsum(np.bincount(where, minlength=len(pieces)))
        for piece, (lo, hi) in zip(pieces, itertools.pairwise([0, *ends.tolist()]), strict=True):
            if hi > lo:
                piece.append(order[lo:hi])
    out: list[Index] = []
    for piece in pieces:
        check_budget()
        if piece:
            rows = np.concatenate(piece) if len(piece) > 1 else piece[0]
            sub = [lead[rows]] if packed is not None else [k[rows] for k in keys]
            out.append(rows[_sort_keys(sub, stable)])
    return np.concatenate(out).astype(np.intp, copy=False)


def run_starts(columns: Sequence[Column], times: Times | None = None) -> npt.NDArray[np.bool_]:
    """For sorted rows: True where a row differs from its predecessor (row 0 is True)."""
    n = len(columns[0]) if columns else (times.shape[1] if times is not None else 0)
    starts = np.zeros(n, dtype=bool)
    if n == 0:
        return starts
    starts[0] = True
    for c in columns:
        starts[1:] |= c[1:] != c[:-1]
    if times is not None:
        starts[1:] |= np.any(times[:, 1:] != times[:, :-1], axis=0)
    return starts


def consolidate(updates: Updates) -> Updates:
    """Sort by (data, time), sum the diffs of equal entries, drop zero diffs."""
    if len(updates) == 0:
        return updates
    if len(updates) <= small.FEW and integral(updates.columns):
        return _consolidate_few(updates)
    uniform = uniform_diff(updates.diffs)
    if uniform is not None:
        fast = consolidate_packed(updates, uniform)
        if fast is not None:
            return fast
    order = sort_order(updates.columns, updates.times)
    cols = tuple(c[order] for c in updates.columns)
    times = updates.times[:, order]
    diffs = updates.diffs[order]
    starts = np.flatnonzero(run_starts(cols, times))
    if len(starts) < len(diffs):
        diffs = np.add.reduceat(diffs, starts)
        cols = tuple(c[starts] for c in cols)
        times = times[:, starts]
    keep = diffs != 0
    if keep.all():
        return Updates(cols, times, diffs)
    return Updates(tuple(c[keep] for c in cols), times[:, keep], diffs[keep])


def integral(columns: Sequence[Column]) -> bool:
    """Whether every column holds integers (rows Python can sort like numpy)."""
    return all(c.dtype.kind in "iu" for c in columns)


def _consolidate_few(updates: Updates) -> Updates:
    keys = [*(c.tolist() for c in updates.columns), *updates.times.tolist()]
    rows, sums = small.consolidated_runs(keys, updates.diffs.tolist())
    if rows == list(range(len(updates))):  # already sorted and consolidated
        return updates
    at = np.array(rows, dtype=np.intp)
    return Updates(
        tuple(c[at] for c in updates.columns), updates.times[:, at], np.array(sums, np.int64)
    )


def uniform_diff(diffs: Diffs) -> int | None:
    """The diff every update carries, or None when they differ (or are zero)."""
    first = int(diffs[0])
    return first if first != 0 and bool((diffs == first).all()) else None


def consolidate_packed(updates: Updates, diff: int) -> Updates | None:
    """All diffs equal: sort the packed rows themselves and count the runs."""
    keys = [*updates.columns, *(updates.times[i] for i in range(updates.depth))]
    packed = pack(keys)
    if packed is None:
        return None
    key = packed[0]
    ordered = np.sort(key) if len(key) <= _SORT_PART else key[sort_order([key])]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    counts = np.diff(np.append(starts, len(ordered)))
    dtypes = [c.dtype for c in updates.columns] + [np.dtype(np.int64)] * updates.depth
    cols = unpack(ordered[starts], packed[1], dtypes)
    arity = updates.arity
    times = np.stack(cols[arity:]) if updates.depth else np.empty((0, len(starts)), np.int64)
    return Updates(tuple(cols[:arity]), times.astype(np.int64), counts.astype(np.int64) * diff)
