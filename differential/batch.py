"""Columnar updates and their consolidation.

Layer: differential (bottom). Imports numpy and `differential.time`.

An update is `(data, time, diff)`: a tuple of data columns (int64 or float64
numpy arrays of equal length), a time column of shape `(depth, n)` and an int64
diff column. `Updates` holds many of them; it is a value, never mutated.
Consolidation sorts by (data, time), sums the diffs of equal entries and drops
zeros, all on whole columns. A sort of many rows runs in parts (`TUNING.sort_part`),
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
from differential.time import Time, Times, column, uniform_times
from differential.tuning import TUNING

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
        """The updates selected by an index or mask, in that order (one repeated time or
        diff stays one: `uniform`)."""
        return Updates(
            tuple(c[index] for c in self.columns),
            take_times(self.times, index),
            take_diffs(self.diffs, index),
        )

    def select(self, mask: npt.NDArray[np.bool_]) -> Updates:
        """The updates where `mask` holds; `self` itself when it holds everywhere
        (a few rows are checked in Python: cheaper than a numpy reduction)."""
        if len(mask) <= TUNING.few:
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
        _concat_times([p.times for p in nonempty]),
        _concat_diffs([p.diffs for p in nonempty]),
    )


def _concat_times(parts: Sequence[Times]) -> Times:
    """Time columns one after the other: one repeated time if every part repeats it."""
    first = parts[0]
    if all(uniform(t) for t in parts) and all((t[:, 0] == first[:, 0]).all() for t in parts):
        return uniform_times(tuple(first[:, 0].tolist()), sum(t.shape[1] for t in parts))
    return np.concatenate(parts, axis=1)


def _concat_diffs(parts: Sequence[Diffs]) -> Diffs:
    if all(uniform(d) for d in parts) and len({int(d[0]) for d in parts}) == 1:
        return uniform_diffs(int(parts[0][0]), sum(len(d) for d in parts))
    return np.concatenate(parts)


def _taken(index: Index | npt.NDArray[np.bool_]) -> int:
    """How many rows an index or a mask selects."""
    return int(np.count_nonzero(index)) if index.dtype == np.bool_ else len(index)


def take_times(times: Times, index: Index | npt.NDArray[np.bool_]) -> Times:
    """`times[:, index]`, one repeated time staying one (`uniform`)."""
    if uniform(times):
        return uniform_times(tuple(times[:, 0].tolist()), _taken(index))
    return times[:, index]


def take_diffs(diffs: Diffs, index: Index | npt.NDArray[np.bool_]) -> Diffs:
    """`diffs[index]`, one repeated diff staying one (`uniform`)."""
    if uniform(diffs):
        return uniform_diffs(int(diffs[0]), _taken(index))
    return diffs[index]


def joined_times(a: Times, b: Times) -> Times:
    """The lattice join (least upper bound) of two time columns, row by row: one time
    when both are one (a join of a round's changes with a relation loaded at once)."""
    if uniform(a) and uniform(b):
        return uniform_times(tuple(np.maximum(a[:, 0], b[:, 0]).tolist()), a.shape[1])
    return np.maximum(a, b)


def entered_times(times: Times) -> Times:
    """The times with one more coordinate, 0 (entering an iteration scope): one time
    staying one (`uniform`), so a relation loaded at once enters without a copy."""
    if uniform(times):
        return uniform_times((*times[:, 0].tolist(), 0), times.shape[1])
    return np.concatenate([times, np.zeros((1, times.shape[1]), dtype=np.int64)])


def multiplied(a: Diffs, b: Diffs) -> Diffs:
    """Diffs multiplied row by row: one diff when both are one."""
    if uniform(a) and uniform(b):
        return uniform_diffs(int(a[0]) * int(b[0]), len(a))
    return a * b


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
        if uniform(col) or not n:
            lo = hi = int(col[0]) if n else 0
        else:
            lo, hi = int(col.min()), int(col.max())
        if hi >= 1 << 63:
            return None
        width = (hi - lo).bit_length()
        total += width
        if total > 63:
            return None
        specs.append((lo, width))
    return _packed_key(columns, specs, n), specs


def _packed_key(
    columns: Sequence[Column], specs: list[tuple[int, int]], n: int
) -> npt.NDArray[np.int64]:
    """`sum((col - lo) << shift)`, computed as `sum(col << shift) - sum(lo << shift)` in
    wrapping int64 arithmetic: exact, since the result fits in 63 bits (`pack` checked
    the ranges), with one array allocated instead of one per column."""
    key: npt.NDArray[np.int64] | None = None
    offset = 0
    for col, (lo, width) in zip(columns, specs, strict=True):
        if not width:
            continue
        same_bits = col.view(np.int64) if col.dtype == np.uint64 else col
        if key is None:
            key = same_bits.astype(np.int64)  # a copy: ours to shift
        else:
            key <<= width
            np.add(key, same_bits, out=key, casting="unsafe")
        offset = (offset << width) + lo
    if key is None:
        return np.zeros(n, dtype=np.int64)
    wrapped = offset % (1 << 64)
    key -= np.int64(wrapped - (1 << 64) if wrapped >= 1 << 63 else wrapped)
    return key


def unpack(
    key: npt.NDArray[np.int64], specs: list[tuple[int, int]], dtypes: Sequence[np.dtype]
) -> list[Column]:
    """The columns that `pack` packed into `key` (in any row order)."""
    out: list[Column] = []
    shift = 0
    for (lo, width), dtype in zip(reversed(specs), reversed(list(dtypes)), strict=True):
        if width:
            part = np.right_shift(key, shift) if shift else key.copy()
            if shift + width < 63:  # not the leading column: the bits above are others'
                np.bitwise_and(part, (1 << width) - 1, out=part)
            if lo:
                part += lo
            shift += width
        else:
            part = np.full(len(key), lo, dtype=np.int64)
        out.append(part if dtype == np.int64 else part.astype(dtype))
    return out[::-1]


def sort_order(
    columns: Sequence[Column], times: Times | None = None, stable: bool = False, runs: bool = False
) -> Index:
    """The permutation sorting rows by (columns..., time) lexicographically.

    Integer columns whose ranges fit in 63 bits are packed and sorted as one
    key; failing that, the first column (a hash, say) stays apart and the rest
    are packed; the general case is `np.lexsort`. Ties keep their input order
    when `stable`. More than `TUNING.sort_part` rows are sorted in parts, the budget
    checked between them (`_sort_in_parts`), unless they are a few sorted `runs`
    (batches being merged), which one stable sort merges in about linear time.
    """
    keys: list[Column] = list(columns)
    if times is not None:
        keys.extend(times[i] for i in range(times.shape[0]))
    if keys and len(keys[0]) > TUNING.sort_part and not runs:
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
    """`_sort_keys` of many rows with no numpy call over much more than `TUNING.sort_part`
    rows, checking the budget between any two (a sample sort).

    Splitters drawn from an evenly spaced sample of the leading key (all keys packed
    into one when they fit) cut its range into about `n / TUNING.sort_part` ranges; each
    part of the rows is distributed into the ranges (a stable sort of small range
    numbers, linear), then each range is sorted on its own. Rows of one range keep
    their input order until their own sort, so the result is stable. Many rows with
    one leading key (no packing, a skewed first column) make one range large: its
    sort is then one call over them."""
    packed = pack(keys)
    lead = keys[0] if packed is None else packed[0]
    n = len(lead)
    ranges = -(-n // TUNING.sort_part)
    sample = np.sort(lead[:: max(1, n // (ranges * 64))])
    splitters = np.unique(sample[64::64])
    pieces: list[list[Index]] = [[] for _ in range(len(splitters) + 1)]
    for start in range(0, n, TUNING.sort_part):
        check_budget()
        where = np.searchsorted(splitters, lead[start : start + TUNING.sort_part], side="right")
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
        if not uniform(c):
            starts[1:] |= c[1:] != c[:-1]
    if times is not None and not uniform(times):
        starts[1:] |= np.any(times[:, 1:] != times[:, :-1], axis=0)
    return starts


def consolidate(updates: Updates) -> Updates:
    """Sort by (data, time), sum the diffs of equal entries, drop zero diffs. Rows
    already in that order (`in_order`) are not sorted again."""
    if len(updates) == 0:
        return updates
    if len(updates) <= TUNING.few and integral(updates.columns):
        return _consolidate_few(updates)
    if len(updates) >= TUNING.sorted_from:
        found = order_of([*updates.columns, *updates.times])
        if found >= 0:
            return consolidate_sorted(updates, distinct=found > 0)
    uniform = uniform_diff(updates.diffs)
    if uniform is not None:
        fast = consolidate_packed(updates, uniform)
        if fast is not None:
            return fast
    order = sort_order(updates.columns, updates.times)
    cols = tuple(c[order] for c in updates.columns)
    times = updates.times[:, order]
    diffs = updates.diffs[order]
    return consolidate_sorted(Updates(cols, times, diffs))


def consolidate_sorted(updates: Updates, distinct: bool = False) -> Updates:
    """`consolidate` of updates sorted by (data, time) already (`distinct`: no two
    alike): one pass, and no copy when no two agree and no diff is zero."""
    cols, times, diffs = updates.columns, updates.times, updates.diffs
    first = None if distinct else run_starts(cols, times)
    if first is not None and not first.all():
        starts = np.flatnonzero(first)
        diffs = np.add.reduceat(diffs, starts)
        cols = tuple(c[starts] for c in cols)
        times = times[:, starts]
    if uniform(diffs) and diffs[0] != 0:
        return Updates(cols, times, diffs)
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
    if first == 0:
        return None
    return first if uniform(diffs) or bool((diffs == first).all()) else None


def consolidate_packed(updates: Updates, diff: int) -> Updates | None:
    """All diffs equal: sort the packed rows themselves and count the runs."""
    keys = [*updates.columns, *(updates.times[i] for i in range(updates.depth))]
    packed = pack(keys)
    if packed is None:
        return None
    ordered = sorted_values(packed[0])  # `pack` made it: ours to sort in place
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    dtypes = [c.dtype for c in updates.columns] + [np.dtype(np.int64)] * updates.depth
    cols = unpack(ordered[starts], packed[1], dtypes)
    arity, n = updates.arity, len(starts)
    if updates.depth and all(width == 0 for _, width in packed[1][arity:]):
        times = uniform_times(tuple(lo for lo, _ in packed[1][arity:]), n)  # one time
    elif updates.depth:
        times = np.stack(cols[arity:]).astype(np.int64, copy=False)
    else:
        times = np.empty((0, n), np.int64)
    if n == len(ordered):  # no two rows agree: every count is one
        return Updates(tuple(cols[:arity]), times, uniform_diffs(diff, n))
    counts = np.diff(np.append(starts, len(ordered)))
    return Updates(tuple(cols[:arity]), times, counts.astype(np.int64) * diff)


# -- sorted input, uniform columns -----------------------------------------------------


def in_order(keys: Sequence[Column]) -> bool:
    """Whether the rows of `keys` (compared lexicographically, first column first) are
    in non-decreasing order (`order_of`)."""
    return order_of(keys) >= 0


def order_of(keys: Sequence[Column]) -> int:
    """-1 when the rows of `keys` (compared lexicographically) are not in order, 0 when
    they are but some row equals the one before it, 1 when they strictly increase
    (no two alike: nothing to consolidate). Checked in blocks of `TUNING.probe` rows, the
    first block first: an unsorted input is usually told by its first rows, and the
    temporaries stay in cache."""
    n = len(keys[0]) if len(keys) else 0
    found = 1
    for start in range(0, n - 1, TUNING.probe):
        block = [k[start : start + TUNING.probe + 1] for k in keys]  # one row of overlap
        found = min(found, _order(block))
        if found < 0:
            return found
    return found


def _order(keys: Sequence[Column]) -> int:
    """`order_of` one block."""
    tied: npt.NDArray[np.bool_] | None = None  # rows equal to their predecessor so far
    for key in keys:
        if uniform(key):
            continue
        before, after = key[:-1], key[1:]
        down: npt.NDArray[np.bool_] = np.less(after, before)
        if tied is not None:
            down &= tied
        if down.any():
            return -1
        same = after == before
        tied = same if tied is None else np.logical_and(tied, same, out=tied)
        if not tied.any():
            return 1
    return 0


def sorted_values(key: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """`key` sorted (values, not a permutation: a third of an argsort's cost), in place
    when it has at most `TUNING.value_sort_part` rows; the caller must own `key`.

    A larger array is sorted in parts, checking the budget between any two: parts
    of `TUNING.value_sort_part` rows are sorted in place, splitters drawn from them cut
    every part into ranges by binary search, and each range, gathered from the
    parts into its place in the result, is sorted on its own."""
    n = len(key)
    if n <= TUNING.value_sort_part:
        key.sort()
        return key
    bounds = [*range(0, n, TUNING.value_sort_part), n]
    parts = [key[lo:hi] for lo, hi in itertools.pairwise(bounds)]
    for part in parts:
        check_budget()
        part.sort()
    ranges = len(parts)
    sample = np.sort(np.concatenate([p[:: max(1, len(p) // (ranges * 64))] for p in parts]))
    splitters = np.unique(sample[len(sample) // ranges :: max(1, len(sample) // ranges)])
    cuts = [np.concatenate([[0], p.searchsorted(splitters), [len(p)]]) for p in parts]
    out = np.empty_like(key)
    at = 0
    for r in range(len(splitters) + 1):
        check_budget()
        start = at
        for part, cut in zip(parts, cuts, strict=True):
            lo, hi = int(cut[r]), int(cut[r + 1])
            out[at : at + hi - lo] = part[lo:hi]
            at += hi - lo
        out[start:at].sort()
    return out


def distinct_rows(columns: Sequence[Column]) -> tuple[Column, ...]:
    """The distinct rows of `columns`, sorted lexicographically: what a set keeps of
    a bag of rows. Rows in order already are not sorted again; integer rows that
    pack into one int64 are sorted as values (`sorted_values`)."""
    n = len(columns[0])
    if n >= TUNING.sorted_from and in_order(columns):
        ordered = tuple(columns)
    else:
        packed = pack(columns)
        if packed is not None:
            key = sorted_values(packed[0])
            first = np.ones(len(key), dtype=bool)
            np.not_equal(key[1:], key[:-1], out=first[1:])
            kept = key if first.all() else key[first]
            return tuple(unpack(kept, packed[1], [c.dtype for c in columns]))
        order = sort_order(columns)
        ordered = tuple(c[order] for c in columns)
    starts = run_starts(ordered)
    return ordered if starts.all() else tuple(c[starts] for c in ordered)


def uniform(values: Column) -> bool:
    """Whether `values` is one value repeated without memory (`uniform_times`,
    `uniform_diffs`): its last axis has stride 0."""
    return values.ndim > 0 and values.shape[-1] > 1 and values.strides[-1] == 0


def uniform_diffs(diff: int, n: int) -> Diffs:
    """`n` copies of one diff, read-only, without memory per row (a set's +1s)."""
    return np.broadcast_to(np.int64(diff), (n,))


def compact_uniform(times: Times, diffs: Diffs) -> tuple[Times, Diffs]:
    """A stored batch's times and diffs, each as one repeated value (`uniform`) where
    all its rows agree: after compaction every entry of a base relation has one time
    and, in a set, one diff, which then cost no memory per row."""
    n = len(diffs)
    if n < TUNING.sorted_from:
        return times, diffs
    if times.shape[0] and not uniform(times) and bool((times == times[:, :1]).all()):
        times = uniform_times(tuple(times[:, 0].tolist()), n)
    if not uniform(diffs) and bool((diffs == diffs[0]).all()):
        diffs = uniform_diffs(int(diffs[0]), n)
    return times, diffs
