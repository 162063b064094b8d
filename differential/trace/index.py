"""A batch's hash index: open addressing from key hashes to their runs of entries.

Layer: differential (trace). Imports numpy only.

A batch is sorted by key hash, so `searchsorted` finds any key's run of
entries. That costs about `log2(n)` cache misses per query key, which is what
dominates joins that look up millions of keys (a worst-case optimal join
validates every proposal this way). Once a batch has been asked about enough
keys, it builds this index: a power-of-two table with linear probing, at most
a quarter full, holding each distinct hash with the index of its run. A lookup
then costs one or two random reads, whatever the batch size.

Both the build and the probes are vectorized: each round places (or looks up)
every pending key at its current slot, and only the keys that collided move
on to the next slot in the following round. Probes run over chunks of query
keys so that temporaries stay in cache.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Hashes = npt.NDArray[np.int64]
Index = npt.NDArray[np.intp]

_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits pick the slot
_EMPTY = np.iinfo(np.int64).min  # marks a free slot (a batch holding it is not indexed)
_CHUNK = 1 << 18  # query keys probed at once


class HashIndex:
    """Where each distinct hash of a sorted hash column starts and ends."""

    def __init__(self, hashes: Hashes) -> None:
        first = np.ones(len(hashes), dtype=bool)
        np.not_equal(hashes[1:], hashes[:-1], out=first[1:])
        self.starts = np.flatnonzero(first)
        self.ends = np.r_[self.starts[1:], len(hashes)].astype(np.intp)
        keys = hashes[self.starts]
        bits = max(4, len(keys).bit_length() + 2)  # load factor at most 1/4
        self._shift = np.uint64(64 - bits)
        self._mask = (1 << bits) - 1
        self._keys = np.full(1 << bits, _EMPTY, dtype=np.int64)
        self._runs = np.full(1 << bits, -1, dtype=np.intp)
        self._insert(keys)

    @staticmethod
    def indexable(hashes: Hashes) -> bool:
        """Whether the index can hold these hashes (none equals the free-slot marker)."""
        return not len(hashes) or int(hashes[0]) != _EMPTY

    def _slots(self, hashes: Hashes) -> Index:
        with np.errstate(over="ignore"):
            mixed = hashes.view(np.uint64) * _MIX
        return (mixed >> self._shift).astype(np.intp)

    def _insert(self, keys: Hashes) -> None:
        pending = np.arange(len(keys), dtype=np.intp)
        slots = self._slots(keys)
        while len(pending):
            free = self._keys[slots] == _EMPTY
            self._runs[slots[free]] = pending[free]  # of rivals for a slot, one wins
            won = self._runs[slots] == pending
            self._keys[slots[won]] = keys[pending[won]]
            pending, slots = pending[~won], (slots[~won] + 1) & self._mask

    def runs(self, hashes: Hashes) -> Index:
        """The run of each query hash (an index into `starts`), or -1 where absent."""
        found = np.full(len(hashes), -1, dtype=np.intp)
        for at in range(0, len(hashes), _CHUNK):
            found[at : at + _CHUNK] = self._probe(hashes[at : at + _CHUNK])
        return found

    def _probe(self, hashes: Hashes) -> Index:
        found = np.full(len(hashes), -1, dtype=np.intp)
        rows = np.arange(len(hashes), dtype=np.intp)
        slots = self._slots(hashes)
        needles = hashes
        while len(rows):
            seen = self._keys[slots]
            hit = seen == needles
            found[rows[hit]] = self._runs[slots[hit]]
            going = ~hit & (seen != _EMPTY)
            rows, slots = rows[going], (slots[going] + 1) & self._mask
            needles = hashes[rows]
        return found

    def ranges(self, hashes: Hashes) -> tuple[Index, Index]:
        """`[lo, hi)` of each query hash in the sorted column (empty where absent)."""
        run = self.runs(hashes)
        present = run >= 0
        if not len(self.starts):
            return run * 0, run * 0
        lo = np.where(present, self.starts[run], 0)
        hi = np.where(present, self.ends[run], 0)
        return lo, hi


_MIN_INDEXED = 1 << 14  # smaller batches are binary-searched in cache
_ASKED_PER_ENTRY = 1 / 8  # index a batch once this many query keys per entry came


class LookupCache:
    """Per batch: how many query keys it has been asked about and, once that many
    justify the build (about `n / 8` binary searches cost as much), its index."""

    def __init__(self) -> None:
        self.asked = 0
        self.index: HashIndex | None = None

    def index_for(self, hashes: Hashes, queries: int) -> HashIndex | None:
        """The index of the sorted column `hashes`, if built or now worth building."""
        if self.index is None:
            self.asked += queries
            n = len(hashes)
            worth = n >= _MIN_INDEXED and self.asked >= n * _ASKED_PER_ENTRY
            if worth and HashIndex.indexable(hashes):
                self.index = HashIndex(hashes)
        return self.index
