"""An empty open-addressing table filled at once, in the order of home slots (ADR 0072).

Layer: differential (trace). Imports numpy and `tuning` only.

Linear probing puts a hash in the first free slot from its home on. Inserted one step
at a time (`HashTable.insert`), every row still colliding takes about ten numpy calls a
slot. Into an empty table the result is known without probing: taken in the order of
their home slots, hash `i` goes to `max(home_i, slot_{i-1} + 1)`, a running maximum.
The home and the position of each hash pack into one int64 (a home is below `2**32`,
a position below `2**31`), so the order is a sort of values, not a permutation; the
placing goes a part at a time, carrying the last slot taken. Those that would run past
the table's end wrap around to its first slots, which the caller's probing insert does.
A key set built again from its store as it grows (`trace.keyset`) takes half the time
of inserting, and 8 bytes a hash besides the table. `place_probing` is that probing
insert for tables whose slots hold positions only (`-1` free: a batch's `RunTable`, a
key set's `PositionTable`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from differential.tuning import TUNING

Hashes = npt.NDArray[np.int64]
Index = npt.NDArray[np.intp]


def fill_in_order(
    keys: Hashes | None,
    values: npt.NDArray[np.generic],
    hashes: Hashes,
    home: Callable[[Hashes], Index],
) -> Index | None:
    """Place the distinct `hashes` (none held yet), each valued its position, into the
    empty table of `keys` (None: a table of positions only, `trace.table`) and `values`
    whose home slots `home` gives: the positions of those that ran past the end (the
    caller inserts them by probing), or None when they do not pack (nothing placed)."""
    count, slots_n = len(hashes), len(values)
    if count >= 1 << 31 or slots_n >= 1 << 32:
        return None
    step = max(TUNING.index_chunk, 1)
    packed = np.empty(count, dtype=np.int64)
    for lo in range(0, count, step):
        positions = np.arange(lo, min(lo + step, count), dtype=np.int64)
        packed[lo : lo + step] = (home(hashes[lo : lo + step]) << 31) | positions
    packed.sort()
    last, wrapped = -1, [np.zeros(0, dtype=np.intp)]
    for lo in range(0, count, step):
        part = packed[lo : lo + step]
        positions, rows = (part & ((1 << 31) - 1)).astype(np.intp), np.arange(len(part))
        slots = np.maximum(np.maximum.accumulate((part >> 31) - rows), last + 1) + rows
        inside = slots < slots_n
        if keys is not None:
            keys[slots[inside]] = hashes[positions[inside]]
        values[slots[inside]] = positions[inside]
        wrapped.append(positions[~inside])
        last = int(slots[-1])
    return np.concatenate(wrapped)


def place_probing(
    table: npt.NDArray[np.signedinteger],
    slots: Index,
    values: Index,
    after: Callable[[Index], Index],
) -> None:
    """Put each of the distinct `values` (at least 0) in the first free slot (-1) of
    `table` from its home slot in `slots` on, probing linearly (`after`: each slot's
    next), every row at once: one numpy pass a probing step; of rivals for one free
    slot, one wins and the others probe on."""
    while len(values):
        free = np.flatnonzero(table[slots] < 0)
        claimed = slots[free]
        table[claimed] = values[free]  # of rivals for a free slot, one wins
        won = free[table[claimed] == values[free]]
        going = np.ones(len(values), dtype=bool)
        going[won] = False
        later = np.flatnonzero(going)
        values, slots = values[later], after(slots[later])
