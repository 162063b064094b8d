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

Rebuilt whole, that is one commit's pass over every hash of the trace (at 69M edges,
seconds). With `Tuning.spread_sieve` (ADR 0080) a sieve half full starts its
successor (`Successor`): sized for what the trace will hold when this one is full, it
takes the hashes of the batches held at that moment, `merge_effort` of them per entry
appended, and every appended entry as it comes; when this sieve is full the successor,
finished by then, replaces it. The successor holds the hash arrays it has not read
yet (the batches' own, not copies) until it has read them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
        self.successor: Successor | None = None  # the next sieve, being filled

    @staticmethod
    def of(parts: Sequence[Hashes]) -> Sieve:
        """A sieve holding every hash of `parts`, with room for as many more."""
        sieve = Sieve(2 * sum(len(p) for p in parts))
        for hashes in parts:
            sieve.add(hashes)
        return sieve

    def full(self, more: int) -> bool:
        return self.added + more > self.capacity

    def then(self, hashes: Hashes, held: Callable[[], list[Hashes]]) -> Sieve | None:
        """The sieve to use once `hashes` (a batch just appended to the trace) are
        added: this one, or its finished successor once this one is full (module
        docstring), or without `Tuning.spread_sieve` None once it is full (the trace
        builds a new one whole when next asked). `held`: the hashes of every batch
        the trace holds, `hashes`' batch included."""
        if not TUNING.spread_sieve:
            if self.full(len(hashes)):
                return None
            self.add(hashes)
            return self
        if self.successor is None and 2 * (self.added + len(hashes)) > self.capacity:
            parts = held()
            room = max(self.capacity - self.added - len(hashes), 0)
            self.successor = Successor(parts, 2 * (sum(len(p) for p in parts) + room))
        elif self.successor is not None:
            self.successor.sieve.add(hashes)
        if self.successor is None:  # (not half full)
            self.add(hashes)
            return self
        if self.full(len(hashes)):  # (full implies half full: the successor exists)
            return self.successor.finish()
        self.add(hashes)
        self.successor.work(TUNING.merge_effort * len(hashes))
        return self

    def _bits(self, hashes: Hashes) -> npt.NDArray[np.uint64]:
        with np.errstate(over="ignore"):
            return (hashes.view(np.uint64) * _MIX) >> np.uint64(64 - self.log_bits)

    def add(self, hashes: Hashes) -> None:
        bit = self._bits(hashes)
        masks = np.left_shift(np.uint8(1), (bit & np.uint64(7)).astype(np.uint8))
        np.bitwise_or.at(self._bytes, (bit >> np.uint64(3)).view(np.intp), masks)
        self.added += len(hashes)

    def arrays(self) -> list[npt.NDArray[np.generic]]:
        """The arrays it holds, its successor's included (for measuring its memory)."""
        return [self._bytes] + ([] if self.successor is None else self.successor.sieve.arrays())

    def passes(self, hashes: Hashes) -> npt.NDArray[np.bool_]:
        """False for every hash never added; True for those added (and a few others)."""
        bit = self._bits(hashes)
        held = self._bytes[(bit >> np.uint64(3)).view(np.intp)]
        held >>= (bit & np.uint64(7)).astype(np.uint8)
        held &= 1
        return held.view(np.bool_)


class Successor:
    """A sieve being filled with a trace's hashes a part at a time (`Sieve.then`)."""

    def __init__(self, parts: Sequence[Hashes], capacity: int) -> None:
        self.sieve = Sieve(capacity)
        self.parts = [p for p in parts if len(p)]  # hashes not added yet

    def work(self, fuel: int) -> None:
        """Add about `fuel` more of the hashes not added yet."""
        while self.parts and fuel > 0:
            part = self.parts.pop()
            self.sieve.add(part[:fuel])
            if len(part) > fuel:
                self.parts.append(part[fuel:])
            fuel -= len(part)

    def finish(self) -> Sieve:
        """The sieve, every hash added."""
        while self.parts:
            self.sieve.add(self.parts.pop())
        return self.sieve
