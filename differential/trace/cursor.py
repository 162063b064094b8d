"""Vectorized cursors: find, for many keys at once, their entries in a batch.

Layer: differential (trace).

Where differential-dataflow steps a cursor key by key, we binary-search the
whole column of query keys with `searchsorted` and expand the matching ranges
with `repeat`/`cumsum`, so one call does the work of a cursor walk over every
query key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from differential.batch import Column
from differential.trace.batch import Batch, Hashes

Index = npt.NDArray[np.intp]


@dataclass(frozen=True)
class Matches:
    """Pairs `(query[i], entry[i])`: query row `query[i]` matches batch entry `entry[i]`."""

    query: Index
    entry: Index

    def __len__(self) -> int:
        return len(self.query)


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


# Below this many query keys, binary-searching them in their own order is cheap.
_SORT_QUERIES = 4096


def query_order(hashes: Hashes) -> Index | None:
    """A permutation sorting the query hashes, when there are enough to be worth it.

    `searchsorted` with sorted needles walks the hash column almost sequentially
    instead of jumping at random, which is several times faster for millions of
    keys; one order serves every batch of a spine.
    """
    if len(hashes) < _SORT_QUERIES:
        return None
    return np.argsort(hashes)  # any order of equal needles will do


def key_ranges(batch: Batch, hashes: Hashes, order: Index | None = None) -> tuple[Index, Index]:
    """`[lo, hi)` of each query hash in the batch's hash column (in query order).

    `order`, if given, sorts `hashes` (see `query_order`); the result is the same.
    """
    if order is None:
        lo = np.searchsorted(batch.hashes, hashes, side="left")
        hi = np.searchsorted(batch.hashes, hashes, side="right")
        return lo, hi
    needles = hashes[order]
    lo, hi = np.empty(len(hashes), dtype=np.intp), np.empty(len(hashes), dtype=np.intp)
    lo[order] = np.searchsorted(batch.hashes, needles, side="left")
    hi[order] = np.searchsorted(batch.hashes, needles, side="right")
    return lo, hi


def seek(
    batch: Batch, hashes: Hashes, keys: Sequence[Column], order: Index | None = None
) -> Matches:
    """All (query row, entry) pairs whose keys are equal; `order` as in `key_ranges`."""
    if len(batch) == 0 or len(hashes) == 0:
        empty = np.empty(0, dtype=np.intp)
        return Matches(empty, empty)
    lo, hi = key_ranges(batch, hashes, order)
    query, entry = expand_ranges(lo, hi)
    if not batch.identity_hash and len(query):
        same = np.ones(len(query), dtype=bool)
        for mine, theirs in zip(batch.keys, keys, strict=True):
            same &= mine[entry] == theirs[query]
        query, entry = query[same], entry[same]
    return Matches(query, entry)


def count_per_key(batch: Batch, hashes: Hashes) -> Index:
    """Number of entries per query key (exact for identity hashes, an upper bound otherwise)."""
    if len(batch) == 0:
        return np.zeros(len(hashes), dtype=np.intp)
    lo, hi = key_ranges(batch, hashes)
    return hi - lo
