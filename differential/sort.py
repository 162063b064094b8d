"""Sorting rows of columns: packed keys, sort orders (in parts), runs, order checks.

Layer: differential (bottom). Imports numpy, `differential.budget` and `tuning`.

Integer columns whose ranges fit in 63 bits are packed into one int64 per row
(`pack`), so that one value sort orders the rows lexicographically; other rows
go through `np.lexsort`. A sort of many rows runs in parts (`TUNING.sort_part`,
`value_sort_part`), checking the running budget between them (docs/adr/0039).
Input already in order is told by `order_of` and not sorted again (ADR 0044).
Consolidation (`differential.batch`) is built on these.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt

from differential.budget import check_budget
from differential.time import Times
from differential.tuning import TUNING

Column = npt.NDArray[np.generic]
G = TypeVar("G", bound=np.generic)
Index = npt.NDArray[np.intp]


def pack(columns: Sequence[Column]) -> tuple[npt.NDArray[np.int64], list[tuple[int, int]]] | None:
    """Integer columns packed into one int64 per row, ordered like the rows.

    Each column is offset by its minimum and given just the bits its range
    needs, first column most significant, so sorting the packed keys sorts the
    rows lexicographically. None when a column is not integer or the widths
    add up to more than 63 bits.
    """
    return pack_parts([columns])


def pack_parts(
    parts: Sequence[Sequence[Column]],
) -> tuple[npt.NDArray[np.int64], list[tuple[int, int]]] | None:
    """`pack` of the rows of several parts (each the same columns), one part after
    the other, into one array: what `pack` of the concatenated columns gives,
    without concatenating them (a merge's batches, ADR 0063)."""
    n = sum(len(p[0]) for p in parts) if parts and parts[0] else 0
    specs: list[tuple[int, int]] = []
    total = 0
    for j in range(len(parts[0]) if parts else 0):
        if any(p[j].dtype.kind not in "iu" for p in parts):
            return None
        bounds = [_bounds(p[j]) for p in parts if len(p[j])]
        lo = min((b[0] for b in bounds), default=0)
        hi = max((b[1] for b in bounds), default=0)
        if hi >= 1 << 63:
            return None
        width = (hi - lo).bit_length()
        total += width
        if total > 63:
            return None
        specs.append((lo, width))
    key = np.empty(n, dtype=np.int64)
    at = 0
    for part in parts:
        size = len(part[0]) if part else 0
        _packed_key(part, specs, key[at : at + size])
        at += size
    return key, specs


def _bounds(col: Column) -> tuple[int, int]:
    """The least and greatest value of a non-empty integer column (taken `TUNING.probe`
    rows at a time: the maximum reads the rows the minimum brought into cache)."""
    if uniform(col):
        return int(col[0]), int(col[0])
    step = TUNING.probe
    if len(col) <= step:
        return int(col.min()), int(col.max())
    blocks = [col[lo : lo + step] for lo in range(0, len(col), step)]
    return min(int(b.min()) for b in blocks), max(int(b.max()) for b in blocks)


def _packed_key(
    columns: Sequence[Column], specs: list[tuple[int, int]], key: npt.NDArray[np.int64]
) -> None:
    """`sum((col - lo) << shift)` into `key`, computed as `sum(col << shift) - sum(lo <<
    shift)` in wrapping int64 arithmetic: exact, since the result fits in 63 bits
    (`pack` checked the ranges), with no array allocated; `TUNING.probe` rows at a
    time, so that each shift and add finds the block of `key` in cache."""
    step = TUNING.probe
    if len(key) > step:
        for lo in range(0, len(key), step):
            _packed_key([c[lo : lo + step] for c in columns], specs, key[lo : lo + step])
        return
    started = False
    offset = 0
    for col, (lo, width) in zip(columns, specs, strict=True):
        if not width:
            continue
        same_bits = col.view(np.int64) if col.dtype == np.uint64 else col
        if not started:
            np.copyto(key, same_bits, casting="unsafe")
            started = True
        else:
            key <<= width
            np.add(key, same_bits, out=key, casting="unsafe")
        offset = (offset << width) + lo
    if not started:
        key.fill(0)
        return
    wrapped = offset % (1 << 64)
    key -= np.int64(wrapped - (1 << 64) if wrapped >= 1 << 63 else wrapped)


def unpack(
    key: npt.NDArray[np.int64],
    specs: list[tuple[int, int]],
    dtypes: Sequence[np.dtype],
    into: Sequence[npt.NDArray[np.int64] | None] | None = None,
    owned: bool = False,
) -> list[Column]:
    """The columns that `pack` packed into `key` (in any row order). `into`: per
    column, an int64 array to write it into (a row of a time column), or None.
    `owned`: `key` is the caller's to give up; the last column that holds bits is
    unpacked in place into it (one array fewer allocated and written). Every column
    is unpacked from one block of `TUNING.probe` rows of `key` before the next block
    is read (the block stays in cache)."""
    n = len(key)
    targets = list(into) if into is not None else [None] * len(specs)
    shifts, shift = [], 0
    for _, width in reversed(specs):
        shifts.append(shift)
        shift += width
    shifts.reverse()
    last = max((i for i, (_, width) in enumerate(specs) if width), default=-1)
    out: list[npt.NDArray[np.int64]] = []
    for i, ((lo, width), target) in enumerate(zip(specs, targets, strict=True)):
        if target is not None:
            part = target
        elif width and owned and i == last:
            part = key
        else:
            part = np.empty(n, dtype=np.int64)
        if not width:
            part.fill(lo)
        out.append(part)
    unpacked = [(o, w, lo, sh) for o, (lo, w), sh in zip(out, specs, shifts, strict=True) if w]
    step = TUNING.probe
    for start in range(0, n, step):
        block = key[start : start + step]
        for column, width, lo, at in unpacked:
            piece = column[start : start + step]
            if at:
                np.right_shift(block, at, out=piece)
            elif column is not key:
                np.copyto(piece, block)
            if at + width < 63:  # not the leading column: the bits above are others'
                np.bitwise_and(piece, (1 << width) - 1, out=piece)
            if lo:
                piece += lo
    return [o if d == np.int64 else o.astype(d) for o, d in zip(out, dtypes, strict=True)]


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
    splitters = unique_values(sample[64::64])
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


def sorted_values(key: npt.NDArray[np.int64], runs: bool = False) -> npt.NDArray[np.int64]:
    """`key` sorted (values, not a permutation: a third of an argsort's cost), in place
    when it has at most `TUNING.value_sort_part` rows; the caller must own `key`.
    `runs`: `key` is two or three sorted runs one after the other (batches being
    merged), which a stable sort (timsort) merges in half a quicksort's time.

    A larger array is sorted in parts, checking the budget between any two: parts
    of `TUNING.value_sort_part` rows are sorted in place, splitters drawn from them cut
    every part into ranges by binary search, and each range, gathered from the
    parts into its place in the result, is sorted on its own."""
    n = len(key)
    if n <= TUNING.value_sort_part:
        key.sort(kind="stable" if runs else None)
        return key
    bounds = [*range(0, n, TUNING.value_sort_part), n]
    parts = [key[lo:hi] for lo, hi in itertools.pairwise(bounds)]
    for part in parts:
        check_budget()
        part.sort()
    ranges = len(parts)
    sample = np.sort(np.concatenate([p[:: max(1, len(p) // (ranges * 64))] for p in parts]))
    splitters = unique_values(sample[len(sample) // ranges :: max(1, len(sample) // ranges)])
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


def unique_values(values: npt.NDArray[G]) -> npt.NDArray[G]:
    """The distinct values of one column, sorted: `np.unique` without its check for a
    masked array, whose first call in a process imports `numpy.ma` (about 30 ms, which
    landed on the first single-edge commit after a subscription; ADR 0057)."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def uniform(values: Column) -> bool:
    """Whether `values` is one value repeated without memory (`uniform_times`,
    `uniform_diffs`): its last axis has stride 0."""
    return values.ndim > 0 and values.shape[-1] > 1 and values.strides[-1] == 0
