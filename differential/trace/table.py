"""A key set's table of positions only: the hashes are read from the set's store (ADR 0082).

Layer: differential (trace). Imports numpy, `trace.fill`, `trace.tails` and `tuning`.

`HashTable` (`trace.index`) holds in every slot a hash (int64) and the position of its
key in the key set's store (int32): 12 bytes a slot, 2-4.5 slots a key. The store
already holds each key's hash: as its one int64 while every key packs (ADR 0078), as
the key itself for one integer column, or (keys of mixed hashes) in an array of
hashes kept beside the columns. `PositionTable` (`Tuning.keyset_positions`) holds the
positions only, 4 bytes a slot, and reads a slot's hash from that array (`hashes`,
set by the set whenever its store changes), as CPython's compact dict does and as a
batch's `RunTable` reads its sorted column: one more gather a probe. `-1` marks a
free slot. The same open addressing as `HashTable`: the same home slots, linear
probing, the same answers; its last few probing rows run in Python (`Tuning.probe_tail`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from differential.trace.fill import fill_in_order, place_probing
from differential.trace.tails import EMPTY
from differential.tuning import TUNING

Hashes = npt.NDArray[np.int64]
Index = npt.NDArray[np.intp]
Stored = npt.NDArray[np.integer]  # a hash per position (int64, or a narrower key column)

_MIX = np.uint64(0x9E3779B97F4A7C15)  # as `trace.index`: the same home slots
_MIX_INT = int(_MIX)
_MASK64 = (1 << 64) - 1


class PositionTable:
    """Open addressing from distinct int64 hashes to positions `p` with `hashes[p]`
    the hash (`hashes`: the owner's, rebound when it changes), at least `load` slots
    a key; 4 bytes a slot (8 past 2**31 slots)."""

    def __init__(self, capacity: int, load: float, hashes: Stored) -> None:
        self.load = load
        slots = max(16, int(load * capacity))
        self.size = 0
        self._slots_n = np.uint64(slots)
        self._slots_int = slots
        wide = slots >= np.iinfo(np.int32).max
        self._at: npt.NDArray[np.signedinteger] = np.full(
            slots, -1, dtype=np.intp if wide else np.int32
        )
        self.hashes = hashes

    def fits(self, more: int) -> bool:
        return (self.size + more) * self.load <= self._slots_int

    def arrays(self) -> list[npt.NDArray[np.generic]]:
        """The arrays it holds (for measuring its memory; the hashes are the owner's)."""
        return [self._at]

    def _slots(self, hashes: Hashes) -> Index:
        with np.errstate(over="ignore"):
            high = (hashes.view(np.uint64) * _MIX) >> np.uint64(32)
            return ((high * self._slots_n) >> np.uint64(32)).view(np.intp)

    def _next(self, slots: Index) -> Index:
        after = slots + 1
        after[after == self._slots_int] = 0
        return after

    def find_slot(self, h: int) -> tuple[int, bool]:
        """For one hash (not `EMPTY`), probing in Python: the slot that holds it
        (True), or the free slot where it would go (False)."""
        at, hashes, size = self._at, self.hashes, self._slots_int
        slot = (((h & _MASK64) * _MIX_INT & _MASK64) >> 32) * size >> 32
        while True:
            position = at.item(slot)
            if position < 0:
                return slot, False
            if hashes.item(position) == h:
                return slot, True
            slot = slot + 1 if slot + 1 < size else 0

    def value_at(self, slot: int) -> int:
        return int(self._at[slot])

    def put(self, slot: int, h: int, value: int) -> None:
        """Hold position `value` in the free `slot` that `find_slot` gave; `hashes[value]`
        must be `h` before the next probe."""
        self._at[slot] = value
        self.size += 1

    def insert(self, hashes: Hashes, values: Index) -> None:
        """Add distinct hashes, none present yet, with their positions (room permitting)."""
        step = max(TUNING.index_chunk, 1)
        for lo in range(0, len(hashes), step):
            self._place(hashes[lo : lo + step], values[lo : lo + step])
        self.size += len(hashes)

    def _place(self, hashes: Hashes, values: Index) -> None:
        place_probing(self._at, self._slots(hashes), values, self._next)

    def fill(self, hashes: Hashes) -> None:
        """Hold the distinct `hashes` (the owner's first ones), each at its position, in
        this empty table, placed in the order of their home slots (`trace.fill`)."""
        assert self.size == 0 and len(hashes) * self.load <= self._slots_int
        wrapped = fill_in_order(None, self._at, hashes, self._slots)
        if wrapped is None:
            wrapped = np.arange(len(hashes))
        self.size = len(hashes) - len(wrapped)
        if len(wrapped):
            self.insert(hashes[wrapped], wrapped)

    def find(self, hashes: Hashes) -> Index:
        """The position of each query hash, or -1 where absent."""
        found = np.empty(len(hashes), dtype=np.intp)
        step = max(TUNING.index_chunk, 1)
        for lo in range(0, len(hashes), step):
            found[lo : lo + step] = self._probe(hashes[lo : lo + step])
        return found

    def _probe(self, needles: Hashes) -> Index:
        slots = self._slots(needles)
        at = self._at[slots]
        taken = at >= 0  # a free slot ends the probe: absent
        hit = self.hashes[at] == needles  # (a free slot reads the last hash: not a hit)
        hit &= taken
        found = np.where(hit, at, np.intp(-1))
        rows = np.flatnonzero(taken ^ hit)  # collided: try the next slot
        slots, mine = self._next(slots[rows]), needles[rows]
        while len(rows):
            if len(rows) <= TUNING.probe_tail:  # the last few: one at a time
                self._probe_tail(found, rows, slots, mine)
                break
            at = self._at[slots]
            taken = at >= 0
            hit = self.hashes[at] == mine
            hit &= taken
            found[rows[hit]] = at[hit]
            going = np.flatnonzero(taken ^ hit)
            rows, slots = rows[going], self._next(slots[going])
            mine = needles[rows]
        return found

    def _probe_tail(self, found: Index, rows: Index, slots: Index, needles: Hashes) -> None:
        at, hashes, size = self._at, self.hashes, self._slots_int
        for row, slot, h in zip(rows.tolist(), slots.tolist(), needles.tolist(), strict=True):
            while True:
                position = at.item(slot)
                if position < 0:
                    break
                if hashes.item(position) == h:
                    found[row] = position
                    break
                slot = slot + 1 if slot + 1 < size else 0

    def claim(self, hashes: Hashes, start: int) -> tuple[Index, Index]:
        """`HashTable.claim`: place hashes the table does not hold, repeats allowed
        (room permitting), each distinct one once, the first row holding it at
        position `start`, the next `start + 1`...; the rows placed, ascending, and for
        every row the row placed with its hash. While claiming, a slot taken by row
        `r` holds `start + r` (every held position is below `start`), whose hash is
        `hashes[r]`; a held key's slot is never a claimed hash's (no store read)."""
        rows = np.arange(len(hashes), dtype=np.intp)
        slot_of = np.empty(len(hashes), dtype=np.intp)
        slots, mine = self._slots(hashes), hashes
        while len(rows):
            if len(rows) <= TUNING.probe_tail:  # the last few: one at a time, in order
                self._claim_tail(rows, slots, hashes, start, slot_of)
                break
            free = np.flatnonzero(self._at[slots] < 0)
            self._at[slots[free]] = start + rows[free]  # of rivals, one wins
            rival = self._at[slots].astype(np.intp) - start  # (< 0: a held key's)
            stop = rival >= 0  # placed, or a rival of the same hash won the slot
            stop &= hashes[np.maximum(rival, 0)] == mine
            slot_of[rows[stop]] = slots[stop]
            going = np.flatnonzero(~stop)
            rows, slots = rows[going], self._next(slots[going])
            mine = hashes[rows]
        placer = self._at[slot_of].astype(np.intp) - start
        placed = np.flatnonzero(placer == np.arange(len(hashes)))
        self._at[slot_of[placed]] = np.arange(start, start + len(placed))
        self.size += len(placed)
        return placed, placer

    def _claim_tail(
        self, rows: Index, slots: Index, hashes: Hashes, start: int, slot_of: Index
    ) -> None:
        at, size = self._at, self._slots_int
        for row, slot in zip(rows.tolist(), slots.tolist(), strict=True):
            h = hashes.item(row)
            while True:
                position = at.item(slot)
                if position < 0:
                    at[slot] = start + row
                    break
                if position >= start and hashes.item(position - start) == h:
                    break  # a row of this claim placed the same hash
                slot = slot + 1 if slot + 1 < size else 0
            slot_of[row] = slot

    def remove(self, hashes: Hashes) -> None:
        """Free the slots of `hashes` (distinct, each held or not; `EMPTY` never is):
        only for undoing insertions in reverse (`KeySet.rollback`)."""
        hashes = hashes[hashes != EMPTY]
        slots = self._slots(hashes)
        at = self.find(hashes)
        rows = np.flatnonzero(at >= 0)
        freed: list[Index] = []
        slots, at = slots[rows], at[rows]
        while len(slots):  # the slot of each held one: where its position is
            hit = self._at[slots] == at
            freed.append(slots[hit])
            slots, at = self._next(slots[~hit]), at[~hit]
        if freed:
            gone = np.concatenate(freed)
            self._at[gone] = -1
            self.size -= len(gone)

    def remove_values_from(self, first: int) -> None:
        """Free every slot whose position is `first` or more (a scan of the whole table)."""
        slots = np.flatnonzero(self._at >= first)
        self._at[slots] = -1
        self.size -= len(slots)
