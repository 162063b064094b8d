"""A batch's hash index: open addressing from key hashes to their runs of entries.

Layer: differential (trace). Imports numpy only.

A batch is sorted by key hash, so `searchsorted` finds any key's run of
entries. That costs about `log2(n)` cache misses per query key, which is what
dominates joins that look up millions of keys (a worst-case optimal join
validates every proposal this way). Once a batch has been asked about enough
keys, it builds this index: a table of three slots per key with linear
probing, holding each distinct hash with the index of its run. A lookup then
costs one or two random reads, whatever the batch size.

Both the build and the probes are vectorized: each round places (or looks up)
every pending key at its current slot, and only the keys that collided move
on to the next slot in the following round. Probes run over chunks of query
keys so that temporaries stay in cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from differential.batch import Column, python_rows, python_times
from differential.trace.dense import DensePairs
from differential.trace.fill import fill_in_order, place_probing
from differential.trace.tails import EMPTY, claim_rows, probe_rows, probe_runs
from differential.tuning import TUNING

Hashes = npt.NDArray[np.int64]
Index = npt.NDArray[np.intp]

_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits pick the slot
_MIX_INT = int(_MIX)
_MASK64 = (1 << 64) - 1


class HashTable:
    """Open addressing from distinct int64 hashes to int values, at most 1/3 full.

    The table has exactly `3 * capacity` slots (no rounding up to a power of
    two): the slot of a hash is its mixed high bits scaled to the table size.
    """

    def __init__(self, capacity: int, load: float | None = None) -> None:
        self.load = TUNING.index_load if load is None else load  # slots per key, at least
        slots = max(16, int(self.load * capacity))
        self.size = 0
        self._slots_n = np.uint64(slots)
        self._slots_int = slots
        self._keys = np.full(slots, EMPTY, dtype=np.int64)
        wide = slots >= np.iinfo(np.int32).max
        self._values = np.empty(slots, dtype=np.intp if wide else np.int32)  # read where a key is

    @staticmethod
    def holds(hashes: Hashes) -> bool:
        """Whether a table can hold these hashes (none equals the free-slot marker)."""
        return not bool((hashes == EMPTY).any())

    def fits(self, more: int) -> bool:
        return (self.size + more) * self.load <= len(self._keys)

    def _slots(self, hashes: Hashes) -> Index:
        return _home_slots(hashes, self._slots_n)

    def find_slot(self, h: int) -> tuple[int, bool]:
        """For one hash (not `EMPTY`), probing in Python: the slot that holds it
        (True), or the free slot where it would go (False)."""
        keys, size = self._keys, len(self._keys)
        slot = (((h & _MASK64) * _MIX_INT & _MASK64) >> 32) * self._slots_int >> 32
        while True:
            held = int(keys[slot])
            if held == h:
                return slot, True
            if held == EMPTY:
                return slot, False
            slot = slot + 1 if slot + 1 < size else 0

    def value_at(self, slot: int) -> int:
        return int(self._values[slot])

    def put(self, slot: int, h: int, value: int) -> None:
        """Hold `h` in the free `slot` that `find_slot` gave (room permitting)."""
        self._keys[slot] = h
        self._values[slot] = value
        self.size += 1

    def _next(self, slots: Index) -> Index:
        return _next_slots(slots, len(self._keys))

    def insert(self, hashes: Hashes, values: Index) -> None:
        """Add distinct hashes, none present yet, with their values (room permitting)."""
        for at in range(0, len(hashes), TUNING.index_chunk):
            self._place(hashes[at : at + TUNING.index_chunk], values[at : at + TUNING.index_chunk])
        self.size += len(hashes)

    def fill(self, hashes: Hashes) -> None:
        """Hold the distinct `hashes`, each valued its position, in this empty table
        (room permitting), placed in the order of their home slots (`trace.fill`): a
        table built again as it grows, in half the time of `insert`."""
        assert self.size == 0 and len(hashes) * self.load <= self._slots_int
        wrapped = fill_in_order(self._keys, self._values, hashes, self._slots)
        if wrapped is None:
            wrapped = np.arange(len(hashes))
        self.size = len(hashes) - len(wrapped)
        if len(wrapped):
            self.insert(hashes[wrapped], wrapped)

    def _place(self, hashes: Hashes, values: Index) -> None:
        rows = np.arange(len(hashes), dtype=np.intp)
        slots = self._slots(hashes)
        mine = hashes
        while len(rows):
            free = np.flatnonzero(self._keys[slots] == EMPTY)
            claimed = slots[free]
            self._keys[claimed] = mine[free]  # of rivals for a free slot, one wins
            won = free[self._keys[claimed] == mine[free]]
            self._values[slots[won]] = values[rows[won]]
            going = np.ones(len(rows), dtype=bool)
            going[won] = False
            later = np.flatnonzero(going)
            rows, slots = rows[later], self._next(slots[later])
            mine = hashes[rows]

    def claim(self, hashes: Hashes, start: int) -> tuple[Index, Index]:
        """Place hashes the table does not hold, repeats among them allowed (room
        for all of them permitting): each distinct one once, the first row holding it
        valued `start`, the next `start + 1`, and so on. The rows placed, ascending,
        and for every row the row placed with its hash. One probe pass: rows race for
        free slots (of rivals, one wins) and a row that finds its hash stops there."""
        rows = np.arange(len(hashes), dtype=np.intp)
        slot_of = np.empty(len(hashes), dtype=np.intp)
        slots, mine = self._slots(hashes), hashes
        while len(rows):
            if len(rows) <= TUNING.probe_tail:  # the last few: one at a time, in order
                claim_rows(self._keys, self._values, rows, slots, mine, slot_of)
                break
            free = np.flatnonzero(self._keys[slots] == EMPTY)
            self._keys[slots[free]] = mine[free]
            self._values[slots[free]] = rows[free]
            stop = self._keys[slots] == mine  # placed, or met a rival of the same hash
            slot_of[rows[stop]] = slots[stop]
            going = np.flatnonzero(~stop)
            rows, slots = rows[going], self._next(slots[going])
            mine = hashes[rows]
        placer = self._values[slot_of].astype(np.intp)  # (in `claim`)
        placed = np.flatnonzero(placer == np.arange(len(hashes)))
        self._values[slot_of[placed]] = np.arange(start, start + len(placed))
        self.size += len(placed)
        return placed, placer

    def arrays(self) -> list[npt.NDArray[np.generic]]:
        """The arrays it holds (for measuring its memory)."""
        return [self._keys, self._values]

    def remove(self, hashes: Hashes) -> None:
        """Free the slots of `hashes` (distinct, each held or not): only for undoing
        insertions in reverse (`KeySet.rollback`), since a slot freed in the middle of
        another key's probe sequence would hide that key."""
        slots = np.empty(0, dtype=np.intp)
        rows, probe = np.arange(len(hashes), dtype=np.intp), self._slots(hashes)
        while len(rows):
            seen = self._keys[probe]
            hit = seen == hashes[rows]
            slots = np.concatenate([slots, probe[hit]])
            going = np.flatnonzero(~hit & (seen != EMPTY))
            rows, probe = rows[going], self._next(probe[going])
        self._keys[slots] = EMPTY
        self.size -= len(slots)

    def remove_values_from(self, first: int) -> None:
        """Free every slot whose value is `first` or more (a scan of the whole table)."""
        slots = np.flatnonzero((self._keys != EMPTY) & np.greater_equal(self._values, first))
        self._keys[slots] = EMPTY
        self.size -= len(slots)

    def values(self) -> tuple[Hashes, Index]:
        """Every (hash, value) held, in slot order."""
        used = np.flatnonzero(self._keys != EMPTY)
        return self._keys[used], self._values[used].astype(np.intp)

    def find(self, hashes: Hashes) -> Index:
        """The value of each query hash, or -1 where absent."""
        return _chunked(self._probe, hashes)

    def _probe(self, hashes: Hashes) -> Index:
        found = np.full(len(hashes), -1, dtype=np.intp)
        rows = np.flatnonzero(hashes != EMPTY)  # (never held: it would match a free slot)
        needles = hashes if len(rows) == len(hashes) else hashes[rows]
        slots = self._slots(needles)
        while len(rows):
            if len(rows) <= TUNING.probe_tail:  # the last few collided: one at a time
                probe_rows(self._keys, self._values, found, rows, slots, needles)
                break
            seen = self._keys[slots]
            hit = seen == needles
            at = np.flatnonzero(hit)
            found[rows[at]] = self._values[slots[at]]
            going = np.flatnonzero(~hit & (seen != EMPTY))  # collided: try the next slot
            rows, slots = rows[going], self._next(slots[going])
            needles = hashes[rows]
        return found


class HashIndex:
    """Where each distinct hash of a sorted hash column starts and ends.

    The table (`RunTable`) holds each distinct hash's run number, and no hash: a
    slot's hash is read from the column itself, at the run's start. The runs'
    bounds are kept once (`_bounds`: each run's start, then the column's length),
    and not at all when every run is one entry (`unique`: a run's number is its
    position), as in a batch keyed by all its columns: 12 bytes a key (ADR 0069; a
    table holding the hashes too took 36, ADR 0044). `IndexBuild` builds one a part
    at a time (a fueled merge's result, ADR 0069)."""

    def __init__(self, hashes: Hashes, built: IndexBuild | None = None) -> None:
        """The index of the sorted `hashes` (`built`: a build of them already done)."""
        build = built or IndexBuild(hashes)
        if built is None:
            build.work(build.runs)
        self.unique = build.unique
        self._bounds = build.bounds
        self._table = build.table

    @staticmethod
    def indexable(hashes: Hashes) -> bool:
        """Whether the sorted column can be indexed (any column can: the table marks
        a free slot by its run number, not by a hash)."""
        return True

    def runs(self, hashes: Hashes) -> Index:
        """The run of each query hash (an index into the runs), or -1 where absent."""
        return self._table.find(hashes)

    def ranges(self, hashes: Hashes) -> tuple[Index, Index]:
        """`[lo, hi)` of each query hash in the sorted column (empty where absent)."""
        run = self.runs(hashes)
        present = run >= 0
        if self._bounds is None:
            lo = np.where(present, run, 0)
            return lo, lo + present
        if len(self._bounds) == 1:
            return run * 0, run * 0
        lo = np.where(present, self._bounds[run], 0)
        hi = np.where(present, self._bounds[run + 1], 0)
        return lo, hi

    def arrays(self) -> list[npt.NDArray[np.generic]]:
        """The arrays it holds (for measuring its memory; the column is the batch's)."""
        held = self._table.arrays()
        return held if self._bounds is None else [*held, self._bounds]


class IndexBuild:
    """A `HashIndex` of a sorted hash column, built `work(fuel)` runs at a time: one
    pass finds the runs, then each call places the next runs in the table, so a
    fueled merge can spread the build of its result's index over commits as it
    spreads the merge (ADR 0069). `index` is set once every run is placed."""

    def __init__(self, hashes: Hashes) -> None:
        first = np.ones(len(hashes), dtype=bool)
        np.not_equal(hashes[1:], hashes[:-1], out=first[1:])
        self.unique = bool(first.all())  # every run is one entry
        starts = None if self.unique else np.flatnonzero(first)
        self.bounds: Index | None = None if starts is None else np.append(starts, len(hashes))
        self.runs = len(hashes) if starts is None else len(starts)
        self.table = RunTable(hashes, self.bounds, self.runs)
        self.placed = 0
        self.index: HashIndex | None = None
        self._hashes = hashes

    def work(self, fuel: int) -> int:
        """Place about `fuel` more runs (at least one); the runs placed. Once every
        run is, `index` is the index."""
        end = min(self.runs, self.placed + max(fuel, 1))
        placed = end - self.placed
        if placed:
            at = np.arange(self.placed, end, dtype=np.intp)
            starts = at if self.bounds is None else self.bounds[self.placed : end]
            self.table.insert(self._hashes[starts], at)
            self.placed = end
        if self.placed == self.runs and self.index is None:
            self.index = HashIndex(self._hashes, self)
        return placed


class RunTable:
    """Open addressing from the distinct hashes of a sorted column to their run
    numbers, at most 1/3 full, holding run numbers only: a slot's hash is the
    column's at the run's start (`bounds[run]`, or `run` itself when every run is one
    entry), read when a probe meets the slot. `-1` marks a free slot."""

    def __init__(self, hashes: Hashes, bounds: Index | None, runs: int) -> None:
        slots = max(16, TUNING.index_load * runs)
        self._hashes = hashes
        self._bounds = bounds
        self._slots_n = np.uint64(slots)
        wide = runs >= np.iinfo(np.int32).max
        self._runs: npt.NDArray[np.signedinteger] = np.full(
            slots, -1, dtype=np.intp if wide else np.int32
        )

    def _slots(self, hashes: Hashes) -> Index:
        return _home_slots(hashes, self._slots_n)

    def _next(self, slots: Index) -> Index:
        return _next_slots(slots, len(self._runs))

    def _hash_of(self, runs: Index) -> Hashes:
        """The hash of each run (of runs held: none is -1)."""
        return self._hashes[runs if self._bounds is None else self._bounds[runs]]

    def insert(self, hashes: Hashes, runs: Index) -> None:
        """Place distinct hashes, none held yet, with their run numbers."""
        for at in range(0, len(hashes), TUNING.index_chunk):
            self._place(hashes[at : at + TUNING.index_chunk], runs[at : at + TUNING.index_chunk])

    def _place(self, hashes: Hashes, runs: Index) -> None:
        place_probing(self._runs, self._slots(hashes), runs, self._next)

    def find(self, hashes: Hashes) -> Index:
        """The run of each query hash, or -1 where absent."""
        return _chunked(self._probe, hashes)

    def _probe(self, hashes: Hashes) -> Index:
        found = np.full(len(hashes), -1, dtype=np.intp)
        rows = np.arange(len(hashes), dtype=np.intp)
        slots = self._slots(hashes)
        needles = hashes
        while len(rows):
            if len(rows) <= TUNING.probe_tail:  # the last few collided: one at a time
                probe_runs(self._runs, self._hashes, self._bounds, found, rows, slots, needles)
                break
            run = self._runs[slots].astype(np.intp)
            held = np.flatnonzero(run >= 0)  # a free slot ends the probe: absent
            hit = self._hash_of(run[held]) == needles[held]
            at = held[hit]
            found[rows[at]] = run[at]
            going = held[~hit]  # collided: try the next slot
            rows, slots = rows[going], self._next(slots[going])
            needles = hashes[rows]
        return found

    def arrays(self) -> list[npt.NDArray[np.generic]]:
        """The arrays it holds (for measuring its memory)."""
        return [self._runs]


# A batch as Python lists: sorted hashes, key rows (None: the hash is the key),
# value rows, times and diffs.
PythonView = tuple[
    list[int],
    list[tuple[object, ...]] | None,
    list[tuple[object, ...]],
    list[tuple[int, ...]],
    list[int],
]


class KeyLookups:
    """What a batch's lookups build from its keys alone, shared by the batches that
    differ from it only in their times (a trace's snapshot at one time, a batch
    entered into an iteration scope): how many keys it was asked about, its index,
    and its hashes and key rows as Python lists."""

    __slots__ = ("asked", "building", "index", "listed")

    def __init__(self) -> None:
        self.asked = 0
        self.index: HashIndex | None = None
        self.building: IndexBuild | None = None  # an index built a part per lookup
        self.listed: tuple[list[int], list[tuple[object, ...]] | None] | None = None


class LookupCache:
    """Per batch: how many query keys it has been asked about and, once that many
    justify the build (about `n / 8` binary searches cost as much), its index, or
    for membership lookups its pairs as a bitmap (`dense_for`). What depends on the
    batch's times (its entries as Python values, the bitmap, which holds one time
    for every pair) is its own; what depends on its keys alone is `keys`."""

    def __init__(self, keys: KeyLookups | None = None) -> None:
        self.keys = KeyLookups() if keys is None else keys
        self.asked_few = 0  # lookups of a few keys by Python values (`lists_for`)
        self.dense_asked = 0
        self.dense: DensePairs | bool | None = None  # False: the batch has not the shape
        self._entries: tuple[list[tuple[object, ...]], list[tuple[int, ...]], list[int]] | None = (
            None
        )
        # `listed` and `entries` together, once a few-key lookup has read both.
        self.view: PythonView | None = None

    def for_other_times(self) -> LookupCache:
        """The cache of a batch with these keys, values and diffs at other times."""
        return LookupCache(self.keys)

    @property
    def index(self) -> HashIndex | None:
        return self.keys.index

    def listed(
        self, hashes: Hashes, keys: Sequence[Column], identity: bool
    ) -> tuple[list[int], list[tuple[object, ...]] | None]:
        """The batch's sorted `hashes` as a Python list and, unless the hash is the
        key (`identity`), its key rows as tuples: built on first use, for looking a
        few keys up in a small batch with `bisect`."""
        shared = self.keys
        if shared.listed is None:
            rows = None if identity else python_rows(keys, len(hashes))
            shared.listed = hashes.tolist(), rows
        return shared.listed

    def entries(
        self, values: Sequence[Column], times: npt.NDArray[np.int64], diffs: npt.NDArray[np.int64]
    ) -> tuple[list[tuple[object, ...]], list[tuple[int, ...]], list[int]]:
        """The batch's value rows, times and diffs as Python values (built on first
        use), for reading a few keys' entries of a small batch without numpy."""
        if self._entries is None:
            rows = python_rows(values, len(diffs))
            self._entries = rows, python_times(times), diffs.tolist()
        return self._entries

    def listable(self, rows: int, small: int) -> bool:
        """Whether a few keys looked up by Python values should read the batch of
        `rows` entries as Python lists (`listed`, `entries`): always for a batch of
        at most `small` rows; for a larger one once it has been asked often enough
        to repay converting it (`TUNING.listed_cost`), and never past `TUNING.listed_max` rows
        (the lists cost about 150 bytes an entry)."""
        if rows <= small or self._entries is not None:
            return True
        self.asked_few += 1
        return rows <= TUNING.listed_max and self.asked_few * TUNING.listed_cost >= rows

    def index_for(self, hashes: Hashes, queries: int) -> HashIndex | None:
        """The index of the sorted column `hashes`, if built or now worth building
        (a large one built by the lookups that follow: `Tuning.spread_index`)."""
        shared = self.keys
        if shared.index is None:
            shared.asked += queries
            worth = shared.asked >= max(len(hashes), TUNING.min_indexed) * TUNING.asked_per_entry
            if shared.building is None and worth and HashIndex.indexable(hashes):
                spread = TUNING.spread_index and len(hashes) > TUNING.merge_fuel
                shared.building = IndexBuild(hashes) if spread else None
                shared.index = None if spread else HashIndex(hashes)
            if shared.building is not None:  # done once its runs are all placed
                shared.building.work(max(1, int(queries * TUNING.index_effort)))
                shared.index = shared.building.index
        return shared.index

    def dense_for(
        self,
        columns: Sequence[Column],
        times: npt.NDArray[np.int64],
        diffs: npt.NDArray[np.int64],
        queries: int,
    ) -> DensePairs | None:
        """The batch's pairs as a bitmap (`DensePairs`), once asked about as many keys
        as would build its hash index, and if it has that shape (decided once)."""
        if self.dense is None:
            self.dense_asked += queries
            n = len(diffs)
            if n >= TUNING.min_indexed and self.dense_asked >= n * TUNING.asked_per_entry:
                self.dense = DensePairs.of(columns, times, diffs) or False
        return self.dense if isinstance(self.dense, DensePairs) else None


# -- what both open-addressing tables share ----------------------------------------------


def _home_slots(hashes: Hashes, slots: np.uint64) -> Index:
    """The first slot each hash probes: its mixed high bits scaled to the table size."""
    with np.errstate(over="ignore"):
        high = (hashes.view(np.uint64) * _MIX) >> np.uint64(32)
        return ((high * slots) >> np.uint64(32)).view(np.intp)


def _next_slots(slots: Index, size: int) -> Index:
    """The slot after each (linear probing, wrapping around)."""
    after = slots + 1
    after[after == size] = 0
    return after


def _chunked(probe: Callable[[Hashes], Index], hashes: Hashes) -> Index:
    """`probe` of `hashes`, `TUNING.index_chunk` at a time (its temporaries stay small)."""
    found = np.empty(len(hashes), dtype=np.intp)
    for at in range(0, len(hashes), TUNING.index_chunk):
        found[at : at + TUNING.index_chunk] = probe(hashes[at : at + TUNING.index_chunk])
    return found
