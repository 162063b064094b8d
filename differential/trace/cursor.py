"""Vectorized cursors: find, for many keys at once, their entries in a batch.

Layer: differential (trace).

Where differential-dataflow steps a cursor key by key, we find the whole
column of query keys at once (binary search, or the batch's hash index) and
expand the matching ranges with `repeat`/`cumsum`, so one call does the work of
a cursor walk over every query key.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from differential.batch import (
    Column,
    Updates,
    concat,
    python_rows,
    python_times,
    take_diffs,
    take_times,
    uniform_diffs,
)
from differential.time import Time, uniform_times
from differential.trace.batch import Batch, Hashes
from differential.trace.index import HashIndex
from differential.tuning import TUNING

Index = npt.NDArray[np.intp]


class Matches(NamedTuple):
    """Pairs `(query[i], entry[i])`: query row `query[i]` matches batch entry `entry[i]`."""

    query: Index
    entry: Index


def expand_ranges(lo: Index, hi: Index) -> tuple[Index, Index]:
    """For ranges `[lo[i], hi[i])`, the pairs `(i, j)` for every `j` in range `i`."""
    counts = hi - lo
    total = int(counts.sum())
    owner = np.repeat(np.arange(len(lo), dtype=np.intp), counts)
    if total == 0:
        return owner, np.empty(0, dtype=np.intp)
    starts = np.cumsum(counts) - counts
    positions = np.arange(total, dtype=np.intp) - np.repeat(starts - lo, counts)
    return owner, positions


def _index(batch: Batch, queries: int) -> HashIndex | None:
    """The batch's hash index, if it has (or now earns) one and the query is not tiny."""
    return None if queries < TUNING.few_keys else batch.cache.index_for(batch.hashes, queries)


def key_ranges(batch: Batch, hashes: Hashes) -> tuple[Index, Index]:
    """`[lo, hi)` of each query hash in the batch's hash column (in query order).

    Binary search, or the batch's hash index once it has been asked about
    enough keys to pay for building one (see `differential.trace.index`).
    """
    return _ranges(batch, hashes, _index(batch, len(hashes)))


def _ranges(batch: Batch, hashes: Hashes, index: HashIndex | None) -> tuple[Index, Index]:
    """`[lo, hi)` of each query hash: probed in the index, or binary-searched.

    Binary searches for the keys in hash order cost a third to a tenth of searches
    in random order, sorting included (measured 50-70 ns against 150-200 ns a key
    in a batch that fits in cache, 0.3-0.7 us against 2-6 us in one of 8M
    entries): consecutive searches share their first steps, so their branches
    are predicted and their cache lines hot.
    """
    if index is not None:
        return index.ranges(hashes)
    column = batch.hashes
    if len(hashes) < TUNING.few_keys:
        return column.searchsorted(hashes, "left"), column.searchsorted(hashes, "right")
    order = np.argsort(hashes)
    sought = hashes[order]
    lo, hi = np.empty(len(hashes), dtype=np.intp), np.empty(len(hashes), dtype=np.intp)
    lo[order] = column.searchsorted(sought, "left")
    hi[order] = column.searchsorted(sought, "right")
    return lo, hi


def seek(batch: Batch, hashes: Hashes, keys: Sequence[Column], ordered: bool = False) -> Matches:
    """All (query row, entry) pairs whose keys are equal. `ordered`: the query hashes
    ascend and are asked once (a bulk insert's rows against what an input holds):
    searched in that order, which costs about what probing an index does, they do not
    build the batch's index (building one costs more than the whole search, and a
    one-off question does not repay it); an index the batch has is used."""
    if len(batch) == 0 or len(hashes) == 0:
        empty = np.empty(0, dtype=np.intp)
        return Matches(empty, empty)
    if len(hashes) <= TUNING.few:
        return _seek_few(batch, hashes, keys)
    index = batch.cache.index if ordered else _index(batch, len(hashes))
    if ordered and index is None:
        matches = _seek_ordered(batch.hashes, hashes)
        if not batch.identity_hash and len(matches.query):
            return _same_keys(batch, keys, matches)
        return matches
    if index is not None and index.unique:  # a run is one entry: no ranges to expand
        run = index.runs(hashes)
        query = np.flatnonzero(run >= 0)
        entry = run[query]
    else:
        query, entry = expand_ranges(*_ranges(batch, hashes, index))
    if not batch.identity_hash and len(query):
        return _same_keys(batch, keys, Matches(query, entry))
    return Matches(query, entry)


def _seek_ordered(column: Hashes, hashes: Hashes) -> Matches:
    """`(query row, entry)` pairs of equal hashes, for ascending query `hashes`: one
    search per query, a second only for those found (most are not, in a bulk insert)."""
    lo = column.searchsorted(hashes, "left")
    query = np.flatnonzero(column[np.minimum(lo, len(column) - 1)] == hashes)
    lo = lo[query]
    hi = column.searchsorted(hashes[query], "right")
    owner, entry = expand_ranges(lo, hi)
    return Matches(query[owner], entry)


def _seek_few(batch: Batch, hashes: Hashes, keys: Sequence[Column]) -> Matches:
    """`seek` for a handful of query keys: ranges found and expanded in Python.

    A small batch is searched as Python lists kept with it (`bisect` costs a
    fraction of a microsecond, a `searchsorted` call about two), and mixed
    hashes are confirmed against its key rows there too.
    """
    query: list[int] = []
    entry: list[int] = []
    if len(batch) <= TUNING.listed:
        rows = None if batch.identity_hash else python_rows(keys, len(hashes))
        for i, j in _listed_pairs(batch, hashes.tolist(), rows):
            query.append(i)
            entry.append(j)
        return Matches(np.array(query, dtype=np.intp), np.array(entry, dtype=np.intp))
    lo, hi = _ranges(batch, hashes, None)
    starts, ends = lo.tolist(), hi.tolist()
    if sum(ends) - sum(starts) > TUNING.expanded:  # a few keys with many entries (a hub)
        matches = Matches(*expand_ranges(lo, hi))
    else:
        for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
            query.extend([i] * (end - start))
            entry.extend(range(start, end))
        matches = Matches(np.array(query, dtype=np.intp), np.array(entry, dtype=np.intp))
    if batch.identity_hash or not len(matches.query):
        return matches
    return _same_keys(batch, keys, matches)


def _listed_pairs(
    batch: Batch, hashes: list[int], rows: Sequence[tuple[object, ...]] | None
) -> Iterator[tuple[int, int]]:
    """`(query row, entry)` pairs of a small batch, read from the Python lists it
    keeps: hashes bisected, mixed hashes confirmed against the query's key `rows`
    (which only an identity hash may leave out)."""
    listed, stored = _listed(batch)
    for i, h in enumerate(hashes):
        start = bisect_left(listed, h)
        for j in range(start, bisect_right(listed, h, start)):
            if stored is None or (rows is not None and stored[j] == rows[i]):
                yield i, j


def _listed(batch: Batch) -> tuple[list[int], list[tuple[object, ...]] | None]:
    """The batch's hashes and key rows as Python lists (`LookupCache.listed`), its keys
    read (back from packed hashes: ADR 0083) only when the lists are first built."""
    cache = batch.cache
    keys = batch.keys if cache.keys.listed is None else ()
    return cache.listed(batch.hashes, keys, batch.identity_hash)


class _Columns(Sequence[Column]):
    """A batch's columns, read (back from packed hashes: ADR 0083) only if asked for:
    a bitmap of pairs is built once, and most lookups do not build it."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.read: tuple[Column, ...] | None = None

    def __len__(self) -> int:
        return len(self.batch.held_values) + self.batch.key_arity

    def __getitem__(self, i: int) -> Column:  # type: ignore[override]
        if self.read is None:
            self.read = self.batch.columns
        return self.read[i]


def _same_keys(batch: Batch, keys: Sequence[Column], m: Matches) -> Matches:
    """The pairs whose key columns are equal, not just their hashes."""
    same = np.ones(len(m.query), dtype=bool)
    for mine, theirs in zip(batch.keys_at(m.entry), keys, strict=True):
        same &= mine == theirs[m.query]
    return m if same.all() else Matches(m.query[same], m.entry[same])


def count_in(batches: Sequence[Batch], hashes: Hashes) -> Index:
    """Sum over `batches` of each query key's number of entries."""
    total = np.zeros(len(hashes), dtype=np.intp)
    for batch in batches:
        total += count_per_key(batch, hashes)
    return total


def combine(parts: list[tuple[Index, Updates]]) -> tuple[Index, Updates]:
    """Lookups' parts (at least one) as one."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([p[0] for p in parts]), concat([p[1] for p in parts])


def count_per_key(batch: Batch, hashes: Hashes) -> Index:
    """Number of entries per query key (exact for identity hashes, an upper bound otherwise)."""
    if len(batch) == 0:
        return np.zeros(len(hashes), dtype=np.intp)
    lo, hi = key_ranges(batch, hashes)
    return hi - lo


# `(query row, time, value columns, diff)` of one entry found, as Python values.
Entry = tuple[int, Time, tuple[object, ...], int]


class FewKeys:
    """A few query keys as Python rows with their hashes and, for a large batch that
    must be searched with numpy, the same as columns (made once, on first use)."""

    __slots__ = ("_columns", "_hashes", "hashes", "rows")

    def __init__(
        self,
        rows: list[tuple[object, ...]],
        hashes: list[int],
        columns: Sequence[Column] | None = None,
        hash_column: Hashes | None = None,
    ) -> None:
        self.rows, self.hashes = rows, hashes
        self._columns, self._hashes = columns, hash_column

    @staticmethod
    def of(columns: Sequence[Column], hashes: Hashes) -> FewKeys:
        return FewKeys(python_rows(columns, len(hashes)), hashes.tolist(), columns, hashes)

    def __len__(self) -> int:
        return len(self.hashes)

    def columns(self, dtypes: Sequence[np.dtype]) -> tuple[Sequence[Column], Hashes]:
        """The keys as columns of `dtypes`, and their hashes."""
        if self._columns is None or self._hashes is None:
            self._columns = columns_of(self.rows, dtypes)
            self._hashes = np.array(self.hashes, dtype=np.int64)
        return self._columns, self._hashes


def lookup_entries(
    batch: Batch, keys: FewKeys, found: list[Entry], limit: int | None = None
) -> bool:
    """Append to `found` the entries of `batch` under the query keys: `lookup_batch`
    for a few keys, without numpy. False (and `found` incomplete) as soon as more
    than `limit` entries are found, if given: the caller wants lists only while they
    are short.

    A small batch, or a large one asked often enough (`LookupCache.listable`), is
    read from Python lists kept with it; another large one is searched with numpy
    and only its matches become Python values.
    """
    cache = batch.cache
    view = cache.view
    if view is None:
        if not cache.listable(len(batch), TUNING.listed):
            return _ranged_entries(batch, keys, found, limit)
        listed, stored = _listed(batch)
        # (Python values: the held columns read the same at any width, ADR 0085)
        values, times, diffs = cache.entries(batch.held_values, batch.times, batch.diffs)
        view = cache.view = (listed, stored, values, times, diffs)
    listed, stored, values, times, diffs = view
    size = len(listed)
    for i, h in enumerate(keys.hashes):
        lo = bisect_left(listed, h)
        if lo == size or listed[lo] != h:
            continue
        hi = bisect_right(listed, h, lo)
        if limit is not None and len(found) + hi - lo > limit:
            return False  # an upper bound (mixed hashes may collide): the caller goes to numpy
        entries = zip(repeat(i), times[lo:hi], values[lo:hi], diffs[lo:hi])
        if stored is None:
            found.extend(entries)
        else:
            row = keys.rows[i]
            found.extend(e for k, e in zip(stored[lo:hi], entries, strict=True) if k == row)
    return True


_LAST = np.iinfo(np.int64).max


def _hash_ranges(column: Hashes, hashes: list[int]) -> tuple[list[int], list[int]]:
    """`[lo, hi)` of each hash in a sorted hash column, with one `searchsorted`:
    the run of `h` ends where `h + 1` would start."""
    if _LAST in hashes:
        return column.searchsorted(hashes, "left").tolist(), column.searchsorted(
            hashes, "right"
        ).tolist()
    bounds = column.searchsorted([b for h in hashes for b in (h, h + 1)]).tolist()
    return bounds[0::2], bounds[1::2]


def _ranged_entries(batch: Batch, keys: FewKeys, found: list[Entry], limit: int | None) -> bool:
    """`lookup_entries` in a large batch: each key's range found by binary search,
    and only that range's slices of the columns converted to Python values."""
    starts, ends = _hash_ranges(batch.hashes, keys.hashes)
    if limit is not None and len(found) + sum(ends) - sum(starts) > limit:
        return False  # an upper bound (mixed hashes may collide): the caller goes to numpy
    for i, (lo, hi) in enumerate(zip(starts, ends, strict=True)):
        if lo == hi:
            continue
        values = python_rows(batch.values_at(slice(lo, hi)), hi - lo)
        times = python_times(batch.times[:, lo:hi])
        diffs = batch.diffs[lo:hi].tolist()
        if batch.identity_hash:
            found.extend(zip([i] * (hi - lo), times, values, diffs, strict=True))
            continue
        stored = python_rows(batch.keys_at(slice(lo, hi)), hi - lo)
        row = keys.rows[i]
        found.extend(
            (i, t, v, d)
            for k, t, v, d in zip(stored, times, values, diffs, strict=True)
            if k == row
        )
    return True


def scan_entries(updates: Updates, key_arity: int, keys: FewKeys, found: list[Entry]) -> None:
    """Append the entries of a few unarranged `updates` under the query keys."""
    wanted: dict[tuple[object, ...], list[int]] = {}
    for i, row in enumerate(keys.rows):
        wanted.setdefault(row, []).append(i)
    rows = python_rows(updates.columns, len(updates))
    times = python_times(updates.times)
    for row, t, d in zip(rows, times, updates.diffs.tolist(), strict=True):
        for i in wanted.get(row[:key_arity], ()):
            found.append((i, t, row[key_arity:], d))


def columns_of(rows: Sequence[tuple[object, ...]], dtypes: Sequence[np.dtype]) -> list[Column]:
    """Rows of Python values as typed columns (empty columns when there are none)."""
    by_column = list(zip(*rows, strict=True)) if rows else [()] * len(dtypes)
    return [np.array(v, dtype=d) for v, d in zip(by_column, dtypes, strict=True)]


def python_entries(owner: Index, found: Updates, key_arity: int) -> list[Entry]:
    """Found entries (`lookup_batch`'s answer) as Python values."""
    values = python_rows(found.columns[key_arity:], len(owner))
    times = python_times(found.times)
    return list(zip(owner.tolist(), times, values, found.diffs.tolist(), strict=True))


def lookup_batch(
    batch: Batch,
    keys: Sequence[Column],
    hashes: Hashes,
    columns: Sequence[int] | None = None,
    ordered: bool = False,
) -> tuple[Index, Updates] | None:
    """The entries of `batch` under the query keys, as `(query row, entries)`, or
    None when none matches; `columns` picks the columns gathered (default all);
    `ordered`: the hashes ascend and are asked once (`seek`)."""
    membership = columns is not None and not columns
    if membership and not ordered and batch.key_arity == 2 and len(hashes) >= TUNING.few_keys:
        return _lookup_dense(batch, keys, hashes)
    return _lookup_sought(batch, keys, hashes, columns, ordered)


def _lookup_dense(
    batch: Batch, keys: Sequence[Column], hashes: Hashes
) -> tuple[Index, Updates] | None:
    """A membership lookup (no columns) of pair keys, in a batch kept as a bitmap
    if it has that shape: every match has the batch's one time and diff
    (`differential.trace.dense`)."""
    dense = batch.cache.dense_for(_Columns(batch), batch.times, batch.diffs, len(hashes))
    if dense is None:
        return _lookup_sought(batch, keys, hashes, [])
    query = np.flatnonzero(dense.contains(keys[0], keys[1]))
    if not len(query):
        return None
    n = len(query)
    times = uniform_times(tuple(batch.times[:, 0].tolist()), n)
    return query, Updates((), times, uniform_diffs(int(batch.diffs[0]), n))


def _lookup_sought(
    batch: Batch,
    keys: Sequence[Column],
    hashes: Hashes,
    columns: Sequence[int] | None,
    ordered: bool = False,
) -> tuple[Index, Updates] | None:
    m = seek(batch, hashes, keys, ordered)
    if not len(m.query):
        return None
    return m.query, Updates(
        batch.columns_at(m.entry, columns),
        take_times(batch.times, m.entry),
        take_diffs(batch.diffs, m.entry),
    )
