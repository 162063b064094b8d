"""A growing set of keys with a hash table over them (`KeySet`), for a `distinct` whose
input only grows.

Layer: differential (trace). Imports numpy, `differential.batch`/`small`,
`trace.index` and `trace.table`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from differential.batch import Column, python_rows
from differential.small import packed_width
from differential.trace.batch import key_hash
from differential.trace.index import EMPTY, Hashes, HashTable, Index
from differential.trace.table import PositionTable, Stored
from differential.tuning import TUNING

G = TypeVar("G", bound=np.generic)


@dataclass(frozen=True)
class Found:
    """Rows looked up in a counting key set (`KeySet.find_counted`): each row's stored
    position, whether the set holds its key there, and whether it may be an overflow
    key (its hash held by another key, or the free-slot marker)."""

    at: Index
    held: npt.NDArray[np.bool_]
    maybe: npt.NDArray[np.bool_]

    def share(self) -> float:
        """The share of rows the set holds (overflow keys not counted)."""
        return float(np.count_nonzero(self.held)) / max(len(self.held), 1)


@dataclass(frozen=True)
class KeySetMark:
    """A key set as it was (`KeySet.mark`): its table, how many keys the table and
    the store held, the store's arrays, the keys in overflow and whether every
    stored key's hash was its packed columns."""

    table: HashTable | PositionTable
    table_size: int
    size: int
    store: list[npt.NDArray[np.generic]]
    overflow: set[tuple[object, ...]]
    packed: bool
    counts: npt.NDArray[np.signedinteger] | None = None  # a copy: counts change in place
    overflow_counts: dict[tuple[object, ...], int] | None = None
    hashes: Hashes | None = None  # (a table of positions over columns: their hashes)


class KeySet:
    """A growing set of keys (rows of key columns, with their `key_hash`es).

    For a `distinct` whose input only grows: membership costs one probe. The
    table maps each hash to the key's position in an append-only store; for
    mixed hashes lookups confirm the key columns, and a key whose hash is held
    by another key waits in `overflow` (rare: hashes have 44 bits).
    """

    def __init__(self, dtypes: Sequence[np.dtype], identity: bool) -> None:
        self.identity = identity  # the hash is the key (one integer column)
        self.size = 0
        self.dtypes = tuple(np.dtype(d) for d in dtypes)
        # The keys by position: their columns, or (`Tuning.packed_keys`, while `packed`)
        # one int64 each, the hash that packs them (`_one`; ADR 0078).
        one = not identity and len(dtypes) > 1 and all(d.kind in "iu" for d in self.dtypes)
        kinds = [np.dtype(np.int64)] if one and TUNING.packed_keys else self.dtypes
        start = max(TUNING.keyset_start, 1)
        self._store = [np.empty(start, dtype=d) for d in kinds]
        # A table of positions (`Tuning.keyset_positions`, ADR 0082) reads a slot's hash
        # from the store (`_hash_source`): keys stored as columns of mixed hashes keep
        # their hashes here.
        self.positions = TUNING.keyset_positions
        mixed = self.positions and not identity and not self._one()
        self._hashes: Hashes | None = np.empty(start, dtype=np.int64) if mixed else None
        self.table = self._new_table(start)
        self._counted_bound = 0  # the counts' absolute values sum to at most this
        self.overflow: set[tuple[object, ...]] = set()
        # Every key stored so far has its columns packed side by side as its hash
        # (`key_hash` of integers that fit): a key with a packed hash then equals a
        # stored key exactly when their hashes do, and lookups compare no columns.
        self.packed = not identity and len(dtypes) > 1
        # Per stored key (and overflow key), the multiplicity its input has had, once
        # asked to count (`count_inputs`; ADR 0067).
        self.counts: npt.NDArray[np.int64] | None = None
        self.overflow_counts: dict[tuple[object, ...], int] = {}

    def __len__(self) -> int:
        return self.size + len(self.overflow)

    def mark(self) -> KeySetMark:
        """What `rollback` needs to forget the keys added after now."""
        counts = None if self.counts is None else self.counts.copy()
        return KeySetMark(self.table, self.table.size, self.size, list(self._store),
                          set(self.overflow), self.packed, counts,
                          dict(self.overflow_counts), self._hashes)  # fmt: skip

    def added_since(self, mark: KeySetMark) -> tuple[Column, ...]:
        """The keys added to the table since `mark` (not those in `overflow`)."""
        return self._columns(slice(mark.size, self.size))

    def rollback(self, mark: KeySetMark, hashes: Hashes) -> None:
        """Forget every key added since `mark`; `hashes`: the hashes of `added_since`.

        Exact: a key added since took a slot that was free at the mark and no key
        held then moved, so freeing those slots gives the table as it was. If the
        table was replaced since (it grew), the one of the mark is taken back, and
        freed of the keys it took before that (found by their stored positions if the
        hashes do not account for them all)."""
        table = mark.table  # (of positions: bound to a store holding every one it holds)
        table.remove(hashes)
        if table.size != mark.table_size:
            table.remove_values_from(mark.size)
        assert table.size == mark.table_size, "a key set's undo lost its keys"
        self.table, self.size, self.packed = table, mark.size, mark.packed
        self._store[:] = mark.store
        self._hashes = mark.hashes
        self._bind()
        self.overflow.clear()
        self.overflow.update(mark.overflow)
        if mark.counts is not None and self.counts is not None:
            self.counts = mark.counts
            self.overflow_counts = dict(mark.overflow_counts or {})

    def contains(self, hashes: Hashes, keys: Sequence[Column]) -> npt.NDArray[np.bool_]:
        return self._look(hashes, keys)[0]

    def _look(
        self, hashes: Hashes, keys: Sequence[Column]
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """Which keys are present, and which hashes the table holds (maybe for another key)."""
        at = self.table.find(hashes)
        held = at >= 0
        present = held.copy()
        exact = self.identity or (self.packed and _packed(hashes, keys))
        rows = np.flatnonzero(held) if not exact else np.zeros(0, dtype=np.intp)
        same = np.ones(len(rows), dtype=bool)
        for stored, key in zip(self._columns(at[rows]), keys, strict=True):
            same &= stored == key[rows]
        for row in [*rows[~same].tolist(), *np.flatnonzero(hashes == EMPTY).tolist()]:
            present[row] = tuple(k[row].item() for k in keys) in self.overflow
        return present, held

    def holds(self, h: int, key: tuple[object, ...]) -> bool:
        """Whether one key, given as a Python row with its hash, is in the set."""
        if h != EMPTY:
            slot, held = self.table.find_slot(h)
            if not held:
                return False  # a key goes to `overflow` only when its hash is held
            if self.identity or self._stored(self.table.value_at(slot)) == key:
                return True
        return key in self.overflow

    def admit(self, hashes: Hashes, keys: Sequence[Column]) -> Index:
        """Add the keys not in the set yet (keys may repeat): the rows added, one per key."""
        if len(hashes) <= TUNING.few:
            return np.array(self._admit_few(hashes.tolist(), keys), dtype=np.intp)
        return self._admit_many(hashes, keys)

    def _admit_few(self, hashes: list[int], keys: Sequence[Column]) -> list[int]:
        """`admit` key by key in Python: a handful of keys costs no numpy calls per step.

        Each key is placed as soon as it is found absent, so a repeat later in the
        same call finds it present.
        """
        rows = python_rows(keys, len(hashes))
        self._reserve(len(hashes))
        table, added = self.table, []
        for row, (h, key) in enumerate(zip(hashes, rows, strict=True)):
            if h != EMPTY:
                slot, held = table.find_slot(h)
                if not held:
                    self._pack(self.packed and _packed_row(h, key))
                    table.put(slot, h, self.size)
                    if self._one():
                        self._store[0][self.size] = h
                    else:
                        for stored, value in zip(self._store, key, strict=True):
                            stored[self.size] = value
                        if self._hashes is not None:
                            self._hashes[self.size] = h
                    self.size += 1
                    added.append(row)
                    continue
                if self.identity or self._stored(table.value_at(slot)) == key:
                    continue  # present
            if key not in self.overflow:  # its hash is another key's, or the free marker
                self.overflow.add(key)
                added.append(row)
        return added

    def admit_absent(self, hashes: Hashes, keys: Sequence[Column]) -> None:
        """Add distinct keys known to be absent (`holds` said so) to a set whose hash
        is the key (`identity`): no probe, no check for repeats."""
        assert self.identity
        free = hashes != EMPTY
        if not free.all():  # the free-slot marker itself waits in `overflow`
            self.overflow.update((k,) for k in keys[0][~free].tolist())
            hashes, keys = hashes[free], [k[free] for k in keys]
        self._store_new(hashes, keys)

    def keys_from(
        self, start: int, known: set[tuple[object, ...]]
    ) -> tuple[tuple[Column, ...], set[tuple[object, ...]]]:
        """The keys stored from position `start` on, as columns, followed by the overflow
        keys not in `known`; and those overflow keys."""
        stored = self._columns(slice(start, self.size))
        extra = self.overflow - known
        if not extra:
            return stored, extra
        rows = list(zip(*sorted(extra, key=repr), strict=True))
        more = [np.array(values, dtype=s.dtype) for values, s in zip(rows, stored, strict=True)]
        return tuple(np.concatenate([s, m]) for s, m in zip(stored, more, strict=True)), extra

    def rows(self, limit: int) -> set[tuple[object, ...]] | None:
        """Every key as a Python row, if there are at most `limit` (else None)."""
        if len(self) > limit:
            return None
        stored = self._columns(slice(0, self.size))
        return set(python_rows(stored, self.size)) | self.overflow

    def _stored(self, at: int) -> tuple[object, ...]:
        return tuple(stored[0].item() for stored in self._columns(slice(at, at + 1)))

    def _one(self) -> bool:
        """Whether the store holds each key as its packed hash."""
        return len(self._store) < len(self.dtypes)

    def _columns(self, at: slice | Index) -> tuple[Column, ...]:
        """The stored keys `at` (positions), as columns."""
        if not self._one():
            return tuple(stored[at] for stored in self._store)
        packed, width = self._store[0][at], packed_width(len(self.dtypes))
        last, mask = len(self.dtypes) - 1, (1 << width) - 1
        return tuple(
            ((packed >> (width * (last - i))) & mask).astype(d, copy=False)
            for i, d in enumerate(self.dtypes)
        )

    def _pack(self, packed: bool) -> None:
        """Note whether every key stored, and those about to be, hash to their packed
        columns; when they no longer do, a packed store becomes columns (and, under a
        table of positions, its hashes the hashes kept beside them)."""
        if not packed and self._one():
            columns = self._columns(slice(0, self.size))
            capacity, hashes = len(self._store[0]), self._store[0]
            self._store = [np.empty(capacity, dtype=d) for d in self.dtypes]
            for stored, column in zip(self._store, columns, strict=True):
                stored[: self.size] = column
            if self.positions:
                self._hashes = hashes
                self._bind()
        self.packed = packed

    def _hash_source(self) -> Stored:
        """Each stored key's hash by position (for a table of positions): the packed
        store, the key itself (one integer column), or the hashes kept beside columns."""
        if self._one():
            return self._store[0]
        if self.identity:
            column = self._store[0]
            return column.view(np.int64) if column.dtype == np.uint64 else column
        assert self._hashes is not None
        return self._hashes

    def _new_table(self, capacity: int) -> HashTable | PositionTable:
        if self.positions:
            return PositionTable(capacity, TUNING.keyset_load, self._hash_source())
        return HashTable(capacity, TUNING.keyset_load)

    def _bind(self) -> None:
        """Point a table of positions at the store's hashes (after the store changed)."""
        if isinstance(self.table, PositionTable):
            self.table.hashes = self._hash_source()

    def _put(self, keys: Sequence[Column], hashes: Hashes, rows: Index | None = None) -> None:
        """Store `keys`' `rows` (all: None; their `hashes` packed, when `_one`) from
        `size` on."""
        n = len(hashes) if rows is None else len(rows)
        every = slice(None) if rows is None else rows
        if self._one():
            self._store[0][self.size : self.size + n] = hashes[every]
            return
        for stored, key in zip(self._store, keys, strict=True):
            stored[self.size : self.size + n] = key[every]
        if self._hashes is not None:
            self._hashes[self.size : self.size + n] = hashes[every]

    def _admit_many(self, hashes: Hashes, keys: Sequence[Column]) -> Index:
        """Add the keys not in the set yet (keys may repeat): the rows added, one per key.

        The absent keys claim slots of the table itself (`HashTable.claim`, repeats
        found in the same pass), a part at a time that the table has room for; a row
        whose hash another key holds (rare) goes to `overflow`.
        """
        present, held = self._look(hashes, keys)
        rare = ~present & (held | (hashes == EMPTY))
        fresh = np.flatnonzero(~present & ~rare)
        added: list[Index] = []
        while len(fresh):
            room = self._room(len(fresh))
            part, fresh = fresh[:room], fresh[room:]
            if added:  # keys an earlier part placed are present now
                now, held = self._look(hashes[part], [k[part] for k in keys])
                rare[part[~now & held]] = True
                part = part[~held]
            placed, placer = self.table.claim(hashes[part], self.size)
            self._grow_store(len(placed))
            winners = part[placed]
            self._pack(self.packed and _packed(hashes[winners], [k[winners] for k in keys]))
            self._put(keys, hashes, winners)
            for key in keys if not self.identity else ():  # a placed hash's repeat, another key
                rare[part[key[part] != key[part[placer]]]] = True
            self.size += len(placed)
            added.append(winners)
        for row in np.flatnonzero(rare).tolist():  # keys whose hash another key holds
            found = tuple(k[row].item() for k in keys)
            if found not in self.overflow:
                self.overflow.add(found)
                added.append(np.array([row], dtype=np.intp))
        return np.sort(np.concatenate(added)) if added else np.zeros(0, dtype=np.intp)

    def _room(self, wanted: int) -> int:
        """Rows the table can take now (grown first, `_grow_table`, when it has no
        room for the fewer of `wanted` and a growth step): at least one, at most
        `wanted`. `wanted` counts rows, which may repeat keys: a part that does not
        fit waits for the next growth, not the table for the whole of them."""
        if not self.table.fits(min(wanted, self._step())):
            self._grow_table(wanted)
        free = int(len(self.table.arrays()[0]) / self.table.load) - self.table.size
        return max(1, min(wanted, free))

    def _step(self) -> int:
        return max(self.size // 2, 1 << 10)

    def _grow_table(self, wanted: int, at_least: int = 0) -> None:
        """A table for the keys held and `wanted` more (a growth step at most: half
        the keys held, at least 1024; `at_least` surely), and room for half as many
        again: at most half full before it grows, a third to a fifth after (grown to
        four or eight times the keys, it took 24-96 bytes a key; ADR 0072).

        It is built from the store after the old one is let go: every key the table
        holds is stored, with a hash no other stored key has (keys whose hash another
        holds wait in `overflow`), so their hashes are computed again (a part at a
        time, into one array) and placed at once (`HashTable.fill`): a growth holds
        one table, not two, and no copy of the old one's contents."""
        capacity = max(3 * (self.size + min(wanted, self._step())) // 2, self.size + at_least)
        self.table = self._new_table(0)  # (the old one goes first, unless a mark holds it)
        self.table = self._new_table(capacity)
        if self._one() or self.positions:  # the stored hashes, as they are
            self.table.fill(self._hash_source()[: self.size].astype(np.int64, copy=False))
            return
        hashes = np.empty(self.size, dtype=np.int64)
        step = max(TUNING.index_chunk, 1)
        for lo in range(0, self.size, step):
            hi = min(lo + step, self.size)
            hashes[lo:hi] = key_hash([column[lo:hi] for column in self._store])
        self.table.fill(hashes)

    def _store_new(self, hashes: Hashes, keys: Sequence[Column]) -> None:
        """Keys with distinct hashes that the table does not hold."""
        self._pack(self.packed and _packed(hashes, keys))
        self._reserve(len(hashes))
        self.table.insert(hashes, np.arange(self.size, self.size + len(hashes)))
        self._put(keys, hashes)
        self.size += len(hashes)

    def _reserve(self, more: int) -> None:
        if not self.table.fits(more):
            self._grow_table(more, more)
        self._grow_store(more)

    def _grow_store(self, more: int) -> None:
        if self.size + more > len(self._store[0]):
            capacity = max(len(self._store[0]) * 3 // 2, self.size + more)
            for i, stored in enumerate(self._store):
                self._store[i] = _grown(stored, self.size, capacity)
            if self._hashes is not None:
                self._hashes = _grown(self._hashes, self.size, capacity)
            if self.counts is not None:
                counts = np.zeros(capacity, dtype=self.counts.dtype)
                counts[: self.size] = self.counts[: self.size]
                self.counts = counts
            self._bind()

    # -- counting a growing distinct's input (ADR 0067) -------------------------------

    def count_inputs(self) -> None:
        """Keep, from now on, a count per key (`count`; every key's count starts at 0)."""
        if self.counts is None:  # int32 while every count fits (`Tuning.narrow_counts`)
            narrow = np.int32 if TUNING.narrow_counts else np.int64
            self.counts = np.zeros(len(self._store[0]), dtype=narrow)

    def count(self, hashes: Hashes, keys: Sequence[Column], diffs: npt.NDArray[np.int64]) -> Index:
        """Add `diffs` to the counts of their rows' keys: the rows whose key the set does
        not hold (their diffs not counted), ascending."""
        return self.add_counts(self.find_counted(hashes, keys), keys, diffs)

    def find_counted(self, hashes: Hashes, keys: Sequence[Column]) -> Found:
        """Where each row's key is stored (`Found.at`), and whether it is (`Found.held`;
        False also for a key of `overflow`, which `Found.maybe` marks as possible)."""
        assert self.counts is not None, "count_inputs first"
        at = self.table.find(hashes)
        # A key is in `overflow` only if another key holds its hash, or its hash is the
        # free-slot marker (which `find` reads as a free slot): only those rows are
        # looked up there (`add_counts`, one by one: rare), and only if it holds any.
        maybe = hashes == EMPTY
        held = (at >= 0) & ~maybe
        if not (self.identity or (self.packed and _packed(hashes, keys))):
            rows = np.flatnonzero(held)
            same = np.ones(len(rows), dtype=bool)
            for stored, key in zip(self._columns(at[rows]), keys, strict=True):
                same &= stored == key[rows]
            held[rows[~same]] = False
            maybe[rows[~same]] = True
        return Found(at, held, maybe)

    def add_counts(
        self, found: Found, keys: Sequence[Column], diffs: npt.NDArray[np.int64]
    ) -> Index:
        """`count` of rows found (`find_counted`) already: the rows not counted."""
        assert self.counts is not None, "count_inputs first"
        held = found.held
        self._widen(diffs)  # (`at` of one dtype: numpy's fast path)
        np.add.at(self.counts, found.at[held], diffs[held].astype(self.counts.dtype, copy=False))
        if self.overflow:
            held = held.copy()
            for row in np.flatnonzero(found.maybe).tolist():
                key = tuple(k[row].item() for k in keys)
                if key in self.overflow:
                    self.overflow_counts[key] = self.overflow_counts.get(key, 0) + int(diffs[row])
                    held[row] = True
        return np.flatnonzero(~held)

    def _widen(self, diffs: npt.NDArray[np.int64]) -> None:
        """Counts of int64 before adding `diffs` could take one past int32."""
        assert self.counts is not None
        if self.counts.dtype == np.int64 or not len(diffs):
            return
        self._counted_bound += len(diffs) * max(-int(diffs.min()), int(diffs.max()))
        if self._counted_bound > np.iinfo(np.int32).max:
            self.counts = self.counts.astype(np.int64)

    def counted(self) -> tuple[tuple[Column, ...], npt.NDArray[np.int64]]:
        """Every key whose count is not 0, as columns, and its count."""
        assert self.counts is not None
        rows = np.flatnonzero(self.counts[: self.size])
        columns = list(self._columns(rows))
        counts = self.counts[rows].astype(np.int64, copy=False)
        extra = sorted(((k, n) for k, n in self.overflow_counts.items() if n), key=repr)
        if not extra:
            return tuple(columns), counts
        more = list(zip(*(k for k, _ in extra), strict=True))
        columns = [
            np.concatenate([c, np.array(v, dtype=c.dtype)])
            for c, v in zip(columns, more, strict=True)
        ]
        return tuple(columns), np.concatenate([counts, [n for _, n in extra]])


def _grown(stored: npt.NDArray[G], size: int, capacity: int) -> npt.NDArray[G]:
    grown = np.empty(capacity, dtype=stored.dtype)
    grown[:size] = stored[:size]
    return grown


def _packed(hashes: Hashes, keys: Sequence[Column]) -> bool:
    """Whether every hash is its key's integer columns packed side by side (each value
    fits `packed_width` bits): then equal hashes mean equal keys."""
    width = packed_width(len(keys))
    if not len(hashes) or any(k.dtype.kind not in "iu" for k in keys):
        return not len(hashes)
    if any(int(k.min()) < 0 or int(k.max()) >> width for k in keys):
        return False
    acc = keys[0].astype(np.int64)
    for k in keys[1:]:
        acc <<= width
        acc |= k.astype(np.int64)
    return bool(np.array_equal(acc, hashes))


def _packed_row(h: int, key: tuple[object, ...]) -> bool:
    """`_packed` for one key given as a Python row."""
    width, acc = packed_width(len(key)), 0
    for value in key:
        if not isinstance(value, int) or value < 0 or value >> width:
            return False
        acc = acc << width | value
    return acc == h
