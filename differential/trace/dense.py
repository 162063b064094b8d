"""A batch's pairs of small integers as a bitmap: membership without a hash.

Layer: differential (trace). Imports numpy only.

A worst-case optimal join validates each proposed value by looking the pair
`(key, value)` up in the relation arranged by both columns (ADR 0008): a mixed
hash, a probe of the batch's hash index, a comparison of the key columns, and
the entry's time and diff gathered. When the batch holds only such pairs, of
non-negative integers in a small range, and all its entries share one time and
one diff (a relation loaded at once, as a one-shot query reads it), a bitmap
over the grid `[0, x_max] x [0, y_max]` answers the lookup: one gather per
candidate, and every match has the batch's time and diff (a consolidated batch
holds a pair once per time). The grid may take at most `TUNING.dense_bytes_per_entry` bytes
per entry and `TUNING.dense_max_bytes` in all (wiki-Vote's 100k edges over 8,300 nodes:
8.6 MB, 85 bytes per entry; ADR 0028).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from differential.batch import Column
from differential.tuning import TUNING


class DensePairs:
    """The pairs `(x[i], y[i])` as bits `x * width + y` of a byte array."""

    def __init__(self, x: Column, y: Column) -> None:
        self.x_max = int(x.max())
        self.y_max = int(y.max())
        self.width = self.y_max + 1
        self.bits = np.zeros((_cells(self.x_max, self.y_max) + 7) >> 3, dtype=np.uint8)
        at = x.astype(np.int64, copy=False) * self.width + y.astype(np.int64, copy=False)
        np.bitwise_or.at(self.bits, at >> 3, np.left_shift(1, at & 7).astype(np.uint8))

    @staticmethod
    def of(
        columns: Sequence[Column], times: npt.NDArray[np.int64], diffs: npt.NDArray[np.int64]
    ) -> DensePairs | None:
        """The bitmap of a batch's two key columns, if they are all its columns, its
        entries agree on time and diff, and the grid is small enough; else None."""
        n = len(diffs)
        if len(columns) != 2 or not n or any(c.dtype.kind not in "iu" for c in columns):
            return None
        if int(columns[0].min()) < 0 or int(columns[1].min()) < 0:
            return None
        cells = _cells(int(columns[0].max()), int(columns[1].max()))
        if cells > 8 * min(TUNING.dense_max_bytes, TUNING.dense_bytes_per_entry * n):
            return None
        if not (bool((diffs == diffs[0]).all()) and bool((times == times[:, :1]).all())):
            return None
        return DensePairs(columns[0], columns[1])

    def arrays(self) -> list[npt.NDArray[np.generic]]:
        """The arrays it holds (for measuring its memory)."""
        return [self.bits]

    def contains(self, x: Column, y: Column) -> npt.NDArray[np.bool_]:
        """Whether each query pair `(x[i], y[i])` is held."""
        inside = _within(x, self.x_max) & _within(y, self.y_max)
        at = x.astype(np.int64, copy=False) * self.width + y.astype(np.int64, copy=False)
        at[~inside] = 0
        shift = (at & 7).astype(np.uint8)
        np.right_shift(at, 3, out=at)
        held = self.bits[at]
        held >>= shift
        held &= 1
        return held.view(np.bool_) & inside


def _within(column: Column, bound: int) -> npt.NDArray[np.bool_]:
    """`0 <= column <= bound` in one comparison: a negative value viewed unsigned
    is beyond any bound."""
    if column.dtype.kind == "u":
        return np.less_equal(column, bound)
    return np.less_equal(column.astype(np.int64, copy=False).view(np.uint64), bound)


def _cells(x_max: int, y_max: int) -> int:
    return (x_max + 1) * (y_max + 1)
