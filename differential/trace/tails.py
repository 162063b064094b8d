"""The last rows of a hash-table probe, one at a time on Python ints (ADR 0077).

Layer: differential (trace). Imports numpy only.

The tables of `trace.index` probe every query row at once, a vectorized step per slot
of linear probing; a step costs about ten numpy calls, and a probe's last few rows
(those whose home slot was taken) took eight steps on average in a recursion's
rounds of a few hundred rows. Once at most `Tuning.probe_tail` rows are left, these
finish them in Python: the same slots, read in the same order.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Hashes = npt.NDArray[np.int64]
Index = npt.NDArray[np.intp]

EMPTY = np.iinfo(np.int64).min  # marks a free slot (a batch holding it is not indexed)


def probe_rows(
    keys: Hashes, values: npt.NDArray[np.generic], found: Index, rows: Index,
    slots: Index, hashes: Hashes,
) -> None:  # fmt: skip
    """`HashTable`'s probe of `rows` (query `hashes` at their current `slots`): the value
    where the hash is held into `found`, nothing where a free slot ends the probe."""
    size = len(keys)
    for row, slot, h in zip(rows.tolist(), slots.tolist(), hashes.tolist(), strict=True):
        while True:
            held = keys.item(slot)
            if held == h:
                found[row] = values.item(slot)
                break
            if held == EMPTY:
                break
            slot = slot + 1 if slot + 1 < size else 0


def claim_rows(
    keys: Hashes, values: npt.NDArray[np.generic], rows: Index, slots: Index,
    hashes: Hashes, slot_of: Index,
) -> None:  # fmt: skip
    """`HashTable.claim` of `rows`, in order: each stops at its hash, or takes the first
    free slot (valued with the row; a later row of that hash then stops there)."""
    size = len(keys)
    for row, slot, h in zip(rows.tolist(), slots.tolist(), hashes.tolist(), strict=True):
        while True:
            held = keys.item(slot)
            if held == EMPTY:
                keys[slot], values[slot] = h, row
                break
            if held == h:
                break
            slot = slot + 1 if slot + 1 < size else 0
        slot_of[row] = slot


def probe_runs(
    table: npt.NDArray[np.signedinteger], column: Hashes, bounds: Index | None,
    found: Index, rows: Index, slots: Index, hashes: Hashes,
) -> None:  # fmt: skip
    """`RunTable`'s probe of `rows`: a slot holds a run number (-1: free), whose hash is
    the sorted `column`'s at the run's start (`bounds`, or the run itself)."""
    size = len(table)
    for row, slot, h in zip(rows.tolist(), slots.tolist(), hashes.tolist(), strict=True):
        while True:
            run = table.item(slot)
            if run < 0:
                break  # a free slot: absent
            if column.item(run if bounds is None else bounds.item(run)) == h:
                found[row] = run
                break
            slot = slot + 1 if slot + 1 < size else 0
