"""Columnar updates and their consolidation.

Layer: differential (bottom). Imports numpy and `differential.time`.

An update is `(data, time, diff)`: a tuple of data columns (int64 or float64
numpy arrays of equal length), a time column of shape `(depth, n)` and an int64
diff column. `Updates` holds many of them; it is a value, never mutated.
Consolidation sorts by (data, time), sums the diffs of equal entries and drops
zeros, all on whole columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from differential.time import Time, Times, column, lex_sort_keys

Column = npt.NDArray[np.generic]
Diffs = npt.NDArray[np.int64]
Index = npt.NDArray[np.intp]


@dataclass(frozen=True, eq=False)
class Updates:
    """A bag of updates: `columns[i][j]` is column i of update j."""

    columns: tuple[Column, ...]
    times: Times
    diffs: Diffs

    def __post_init__(self) -> None:
        n = len(self.diffs)
        assert self.times.ndim == 2 and self.times.shape[1] == n, "times must be (depth, n)"
        assert all(len(c) == n for c in self.columns), "columns must match diffs"

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


def sort_order(columns: Sequence[Column], times: Times | None = None) -> Index:
    """The permutation sorting rows by (columns..., time) lexicographically."""
    keys: list[Column] = [*lex_sort_keys(times)] if times is not None else []
    keys.extend(reversed(columns))
    if len(keys) == 1:
        return np.argsort(keys[0], kind="stable")
    packed = _packed(keys)
    if packed is not None:
        return np.argsort(packed, kind="stable")
    return np.lexsort(keys)


def _packed(keys: Sequence[Column]) -> npt.NDArray[np.int64] | None:
    """The lexsort `keys` (last is primary) as one int64 with the same order, or None.

    Possible when every key is an integer column and the product of their value
    spans fits in 63 bits (small domains, as for times and dense ids); one stable
    argsort then does the work of a multi-key lexsort in about half the time.
    """
    if not len(keys[0]) or any(k.dtype.kind not in "iu" for k in keys):
        return None
    lows = [k.min() for k in keys]
    total = 1
    for k, low in zip(keys, lows, strict=True):
        total *= int(k.max()) - int(low) + 1
        if total >= 1 << 63:
            return None
    packed = np.zeros(len(keys[0]), dtype=np.int64)
    scale = 1
    for k, low in zip(keys, lows, strict=True):
        if k.dtype.kind == "u":  # k >= low: no wrap; the difference fits 63 bits
            offset = (k - low).astype(np.int64)
        else:
            offset = k.astype(np.int64, copy=False) - np.int64(low)
        packed += offset * np.int64(scale)
        scale *= int(k.max()) - int(low) + 1
    return packed


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
    order, starts = _sorted_runs(updates.columns, updates.times)
    diffs = updates.diffs[order]
    if len(starts) < len(diffs):
        diffs = np.add.reduceat(diffs, starts)
    rows = order[starts]  # the first update of each run of equal (data, time)
    keep = diffs != 0
    if not keep.all():
        rows, diffs = rows[keep], diffs[keep]
    return Updates(tuple(c[rows] for c in updates.columns), updates.times[:, rows], diffs)


def _sorted_runs(columns: Sequence[Column], times: Times) -> tuple[Index, Index]:
    """The sorting permutation of rows by (columns, time) and where its runs start.

    With a packed key (see `_packed`) runs are found on that one column, so only
    the first row of each run of the data columns is ever gathered.
    """
    keys: list[Column] = [*lex_sort_keys(times)]
    keys.extend(reversed(columns))
    packed = _packed(keys) if len(keys) > 1 else None
    if packed is None:
        order = sort_order(columns, times)
        sorted_times = times[:, order]
        starts = run_starts([c[order] for c in columns], sorted_times)
        return order, np.flatnonzero(starts)
    order = np.argsort(packed, kind="stable")
    ordered = packed[order]
    starts = np.empty(len(order), dtype=bool)
    starts[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    return order, np.flatnonzero(starts)
