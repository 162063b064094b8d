"""Columnar updates and their consolidation.

Layer: differential (bottom). Imports numpy, `differential.time` and `sort`.

An update is `(data, time, diff)`: a tuple of data columns (int64 or float64
numpy arrays of equal length), a time column of shape `(depth, n)` and an int64
diff column. `Updates` holds many of them; it is a value, never mutated.
Consolidation sorts by (data, time), sums the diffs of equal entries and drops
zeros, all on whole columns, with the sorts of `differential.sort` (in parts,
checking the running budget between them, docs/adr/0039).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from differential import small
from differential.sort import Column, Index, order_of, pack_parts, run_starts, sort_order
from differential.sort import distinct_rows as distinct_rows  # (re-exported: sorting moved)
from differential.sort import in_order as in_order
from differential.sort import pack as pack  # (re-exported)
from differential.sort import sorted_values as sorted_values
from differential.sort import uniform as uniform
from differential.sort import unique_values as unique_values
from differential.sort import unpack as unpack
from differential.time import Time, Times, column, uniform_times
from differential.tuning import TUNING

Diffs = npt.NDArray[np.int64]


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
    columns: list[Column] = []
    for i in range(arity):  # a column every part shares with an earlier one stays shared
        same = next((j for j in range(i) if all(p.columns[i] is p.columns[j] for p in nonempty)), i)
        columns.append(
            columns[same] if same < i else np.concatenate([p.columns[i] for p in nonempty])
        )
    return Updates(
        tuple(columns),
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
    when both are one (a join of a round's changes with a relation loaded at once), or
    when one is one time and every time of the other is at or before it (a round's
    changes joined with what came before them, in a totally ordered scope)."""
    if uniform(a) and uniform(b):
        return uniform_times(tuple(np.maximum(a[:, 0], b[:, 0]).tolist()), a.shape[1])
    if uniform(a) and _at_or_before(b, a):
        return a
    if uniform(b) and _at_or_before(a, b):
        return b
    return np.maximum(a, b)


def joined_with(times: Times, time: Time) -> Times:
    """Each time of `times` joined with the one `time` (`t ⊔ time`): one repeated time
    when `times` is one, or when every time of it is at or before `time`."""
    return joined_times(times, uniform_times(time, times.shape[1]))


def _at_or_before(times: Times, one: Times) -> bool:
    """Whether every time of `times` is `<=` the time `one` repeats (coordinate-wise)."""
    return bool((times.max(axis=1) <= one[:, 0]).all())


def entered_times(times: Times) -> Times:
    """The times with one more coordinate, 0 (entering an iteration scope): one time
    staying one (`uniform`), so a relation loaded at once enters without a copy."""
    if uniform(times):
        return uniform_times((*times[:, 0].tolist(), 0), times.shape[1])
    return np.concatenate([times, np.zeros((1, times.shape[1]), dtype=np.int64)])


def multiplied(a: Diffs, b: Diffs) -> Diffs:
    """Diffs multiplied row by row: one diff when both are one; the other side itself
    where one side is one repeated 1 (a change joined with a set: no copy)."""
    if uniform(a) and uniform(b):
        return uniform_diffs(int(a[0]) * int(b[0]), len(a))
    if uniform(b) and b[0] == 1:
        return a
    if uniform(a) and a[0] == 1:
        return b
    return a * b


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
    if uniform is not None or TUNING.packed_diffs:
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
    if uniform(diffs):
        return first
    if not bool((diffs[:64] == first).all()):  # (mixed diffs are told by their first rows)
        return None
    return first if len(diffs) <= 64 or bool((diffs == first).all()) else None


def consolidate_packed(updates: Updates, diff: int | None) -> Updates | None:
    """Integer rows and times that pack into one int64: sort the packed rows themselves
    (values, not a permutation: no gathers) and sum each run. `diff`: the diff every
    update carries (each run's count times it); None: the diffs differ and are packed
    too, below the rows, and summed per run (ADR 0057). None when they do not pack.
    A column equal to an earlier one (a reduce's key, repeated in its tuple) is packed
    once and shared by both in the result. Rows that all differ (a merge of batches
    at different times) build no run index and gather nothing; times are unpacked
    into their column in place (ADR 0063)."""
    return consolidate_packed_parts([updates], diff)


def consolidate_packed_parts(
    parts: Sequence[Updates], diff: int | None, runs: bool = False
) -> Updates | None:
    """`consolidate_packed(concat(parts), diff)`, packing each part's rows into place
    rather than concatenating them first (a merge's batches: each time column one
    repeated time, often, never materialized; ADR 0063). `diff`: the diff every
    update of every part carries, or None. `runs`: each part is sorted (a batch)."""
    updates = parts[0]
    copies = _shared_copies(parts)
    own = [i for i, c in enumerate(copies) if c == i]
    depth = updates.depth

    def keys(part: Updates) -> list[Column]:
        rows = [*(part.columns[i] for i in own), *(part.times[i] for i in range(depth))]
        return [*rows, part.diffs] if diff is None else rows

    packed = pack_parts([keys(p) for p in parts])
    if packed is None:
        return None
    merging = runs and len(parts) <= 3  # a merge of a few sorted runs: timsort's case
    ordered = sorted_values(packed[0], merging)  # `pack` made it: ours to sort in place
    specs, sums, width = packed[1], None, 0
    if diff is None:  # the rows are the bits above the diff's
        (low, width), specs = specs[-1], specs[:-1]
    differ = _row_changes(ordered, width)
    starts = None if np.count_nonzero(differ) == len(ordered) else np.flatnonzero(differ)
    rows = ordered if starts is None else ordered[starts]  # ours, either way
    if diff is None:
        if starts is not None and 2 * len(starts) < len(ordered):  # most rows repeat
            sums = np.add.reduceat(_low_bits(ordered, low, width), starts)
        else:
            sums = _low_bits(rows, low, width)
            if starts is not None:  # the fewer rows equal to the one before add to its run
                _add_repeats(sums, ordered, differ, low, width)
        if width:
            np.right_shift(rows, width, out=rows)
        if not sums.all():
            keep = sums != 0
            rows, sums = rows[keep], sums[keep]
    del differ
    n = len(rows)
    m = len(own)
    one_time = depth > 0 and all(width == 0 for _, width in specs[m:])
    dtypes = [updates.columns[i].dtype for i in own] + [np.dtype(np.int64)] * depth
    if one_time:  # the times hold no bits: unpack the columns only
        specs, dtypes = specs[:m], dtypes[:m]
        times = uniform_times(tuple(lo for lo, _ in packed[1][m : m + depth]), n)
        into = None
    else:  # unpacked into the rows of the time column, not stacked after
        times = np.empty((depth, n), np.int64)
        into = [*([None] * m), *times]
    unpacked = unpack(rows, specs, dtypes, into, owned=True)
    by_column = dict(zip(own, unpacked[:m], strict=True))
    cols = tuple(by_column[c] for c in copies)
    if diff is None:
        assert sums is not None
        return Updates(cols, times, sums)
    if starts is None:  # no two rows agree: every count is one
        return Updates(cols, times, uniform_diffs(diff, n))
    counts = np.diff(np.append(starts, len(ordered)))
    return Updates(cols, times, counts.astype(np.int64) * diff)


def _row_changes(ordered: npt.NDArray[np.int64], width: int) -> npt.NDArray[np.bool_]:
    """For sorted packed values: True where the bits above the low `width` bits (the
    row, without its packed diff) differ from the value before (row 0 is True).
    Two values agree above those bits when their XOR is below `2**width` (packed
    values are never negative); the XOR is taken `TUNING.probe` rows at a time into
    one small buffer, not into a copy of every row shifted."""
    n = len(ordered)
    differ = np.empty(n, dtype=bool)
    differ[:1] = True
    if n < 2 or not width:
        np.not_equal(ordered[1:], ordered[:-1], out=differ[1:])
        return differ
    step = TUNING.probe
    buffer = np.empty(min(n - 1, step), dtype=np.int64)
    for lo in range(0, n - 1, step):
        hi = min(lo + step, n - 1)
        block = buffer[: hi - lo]
        np.bitwise_xor(ordered[lo + 1 : hi + 1], ordered[lo:hi], out=block)
        np.greater_equal(block, 1 << width, out=differ[lo + 1 : hi + 1])
    return differ


def _low_bits(packed: npt.NDArray[np.int64], low: int, width: int) -> npt.NDArray[np.int64]:
    """The values packed in the low `width` bits of `packed`, each offset by `low`
    (`pack`'s spec of the last column), as a new array."""
    values = packed & ((1 << width) - 1) if width else np.zeros(len(packed), np.int64)
    if low:
        values += low
    return values


def _add_repeats(
    sums: npt.NDArray[np.int64],
    ordered: npt.NDArray[np.int64],
    differ: npt.NDArray[np.bool_],
    low: int,
    width: int,
) -> None:
    """Add to each run's sum (`sums`: the first row's value) the values of its other
    rows: the `j`-th row equal to the one before it, at `i`, belongs to run `i - j - 1`
    (every row before it but `j + 1` starts a run). Only those rows are read: in a
    round's changes most rows are runs of their own, and `np.add.reduceat` over every
    row cost more than the rest of the consolidation (where most rows repeat, it costs
    less: the caller reduces every row then)."""
    repeats = np.flatnonzero(~differ)
    values = _low_bits(ordered[repeats], low, width)
    repeats -= np.arange(1, len(repeats) + 1, dtype=repeats.dtype)  # now their runs
    np.add.at(sums, repeats, values)


def _shared_copies(parts: Sequence[Updates]) -> list[int]:
    """`_copies` that hold in every part (a column equal to an earlier one in each)."""
    found = _copies(parts[0].columns)
    for part in parts[1:]:
        cols = part.columns
        found = [j if j == i or _same(cols[j], cols[i]) else i for i, j in enumerate(found)]
    return found


def _copies(columns: Sequence[Column]) -> list[int]:
    """For each column, the first column equal to it (itself when none is)."""
    found: list[int] = []
    for i, col in enumerate(columns):
        earlier = (j for j in range(i) if found[j] == j and _same(columns[j], col))
        found.append(next(earlier, i))
    return found


def _same(a: Column, b: Column) -> bool:
    """Whether two columns hold the same values (told apart by their first rows,
    usually)."""
    if a is b:
        return True
    if a.dtype != b.dtype or not np.array_equal(a[:64], b[:64]):
        return False
    return bool(np.array_equal(a, b))


def uniform_diffs(diff: int, n: int) -> Diffs:
    """`n` copies of one diff, read-only, without memory per row (a set's +1s)."""
    return np.broadcast_to(np.int64(diff), (n,))


def compact_uniform(times: Times, diffs: Diffs, smallest: int | None = None) -> tuple[Times, Diffs]:
    """A stored batch's times and diffs, each as one repeated value (`uniform`) where
    all its rows agree: after compaction every entry of a base relation has one time
    and, in a set, one diff, which then cost no memory per row (`smallest`: the rows
    from which they are compared; default `TUNING.sorted_from`)."""
    n = len(diffs)
    if n < (TUNING.sorted_from if smallest is None else max(smallest, 2)):
        return times, diffs
    # (the last row is compared first: a merge of rounds differs there, and is told at once)
    if (
        times.shape[0]
        and not uniform(times)
        and bool((times[:, -1] == times[:, 0]).all())
        and bool((times == times[:, :1]).all())
    ):
        times = uniform_times(tuple(times[:, 0].tolist()), n)
    if not uniform(diffs) and diffs[-1] == diffs[0] and bool((diffs == diffs[0]).all()):
        diffs = uniform_diffs(int(diffs[0]), n)
    return times, diffs


def weighed_runs(ends: npt.NDArray[np.integer], limit: int) -> Iterator[Index]:
    """Consecutive runs of the rows `0..len(ends)` whose weights add up to about `limit`
    each (`ends`: the running sum of the weights; a row heavier than `limit` is a run
    of its own): the parts a join, a reduce or an extension works through in turn."""
    n = len(ends)
    marks = np.arange(limit, int(ends[-1]) if n else 0, limit)
    edges = unique_values(np.r_[0, np.searchsorted(ends, marks, side="right"), n])
    for lo, hi in itertools.pairwise(edges.tolist()):
        yield np.arange(lo, hi, dtype=np.intp)
