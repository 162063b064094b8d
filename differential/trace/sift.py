"""A trace's key sieve: which query keys some batch of the trace may hold.

Layer: differential (trace). Imports numpy only.

A worst-case optimal join validates each proposed value by looking its pair up
in the relation arranged by both columns, and most proposals are not there (a
streamed triangle query validates about twenty candidates per triangle found).
A lookup probes every batch of the trace, about a dozen in a large one, so
each absent candidate costs a dozen hash probes, most of them cache misses.

The sieve is a one-hash Bloom filter over the hashes of every entry the trace
received: 16 bits per entry, so a key no batch holds passes with probability
about 1/16, and one bit read rejects it for all the batches at once. Entries
are only ever added (merges and compaction drop some, which leaves bits set: a
sieve may pass more keys, never fewer); it is rebuilt from the trace, at twice
the size, once it has taken as many entries as it was sized for.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from differential.tuning import TUNING

Hashes = npt.NDArray[np.int64]

_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits pick the bit


class Sieve:
    """A one-hash Bloom filter over int64 hashes, sized for `capacity` of them."""

    def __init__(self, capacity: int) -> None:
        bits = max(TUNING.sieve_min_bits, TUNING.sieve_bits_per_key * capacity)
        self.log_bits = (bits - 1).bit_length()  # a power of two: the top bits pick
        self.capacity = (1 << self.log_bits) // TUNING.sieve_bits_per_key
        self.added = 0
        self._bytes = np.zeros(1 << (self.log_bits - 3), dtype=np.uint8)

    @staticmethod
    def of(parts: Sequence[Hashes]) -> Sieve:
        """A sieve holding every hash of `parts`, with room for as many more."""
        sieve = Sieve(2 * sum(len(p) for p in parts))
        for hashes in parts:
            sieve.add(hashes)
        return sieve

    def full(self, more: int) -> bool:
        return self.added + more > self.capacity

    def _bits(self, hashes: Hashes) -> npt.NDArray[np.uint64]:
        with np.errstate(over="ignore"):
            return (hashes.view(np.uint64) * _MIX) >> np.uint64(64 - self.log_bits)

    def add(self, hashes: Hashes) -> None:
        bit = self._bits(hashes)
        masks = np.left_shift(np.uint8(1), (bit & np.uint64(7)).astype(np.uint8))
        np.bitwise_or.at(self._bytes, (bit >> np.uint64(3)).view(np.intp), masks)
        self.added += len(hashes)

    def arrays(self) -> list[npt.NDArray[np.generic]]:
        """The arrays it holds (for measuring its memory)."""
        return [self._bytes]

    def passes(self, hashes: Hashes) -> npt.NDArray[np.bool_]:
        """False for every hash never added; True for those added (and a few others)."""
        bit = self._bits(hashes)
        held = self._bytes[(bit >> np.uint64(3)).view(np.intp)]
        held >>= (bit & np.uint64(7)).astype(np.uint8)
        held &= 1
        return held.view(np.bool_)
