"""Reducers: what a reduce computes per key (distinct, count, sum, min, max, folds).

Layer: differential (operators). Imports `batch`.

A reducer maps the groups of one re-evaluation (rows sorted by key, then value,
with their multiplicities accumulated at the step's time) to output rows. The
reduce driver (`reduce.ReduceOp`) decides which keys to hand over and when; a
reducer knows nothing of times.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from differential.batch import Column
from differential.operators.arrange import Owner
from differential.sort import run_starts, sort_order

Counts = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Groups:
    """Input of a reducer: rows sorted by `owner` (the key's index), then by value."""

    owner: Owner
    values: tuple[Column, ...]
    counts: Counts
    n_keys: int


# A reducer maps groups to output rows: (owner of each row, output columns, multiplicities).
Reducer = Callable[[Groups], tuple[Owner, Sequence[Column], Counts]]


def _group_starts(groups: Groups) -> Owner:
    return np.flatnonzero(run_starts([groups.owner]))


def distinct(groups: Groups) -> tuple[Owner, Sequence[Column], Counts]:
    """One copy of each (key, value) with positive multiplicity."""
    keep = groups.counts > 0
    return groups.owner[keep], [v[keep] for v in groups.values], np.ones(int(keep.sum()), np.int64)


def count(groups: Groups) -> tuple[Owner, Sequence[Column], Counts]:
    """The sum of multiplicities per key (keys with a zero total produce nothing)."""
    if len(groups.owner) == 0:
        return groups.owner, [np.empty(0, np.int64)], np.empty(0, np.int64)
    starts = _group_starts(groups)
    totals = np.add.reduceat(groups.counts, starts)
    keep = totals != 0
    return groups.owner[starts][keep], [totals[keep]], np.ones(int(keep.sum()), np.int64)


def sum_values(groups: Groups) -> tuple[Owner, Sequence[Column], Counts]:
    """The sum of value times multiplicity per key (first value column)."""
    if len(groups.owner) == 0:
        return groups.owner, [groups.values[0][:0]], np.empty(0, np.int64)
    starts = _group_starts(groups)
    weighted = groups.values[0] * groups.counts.astype(groups.values[0].dtype)
    totals = np.add.reduceat(weighted, starts)
    return groups.owner[starts], [totals], np.ones(len(starts), np.int64)


def _extreme(groups: Groups, last: bool) -> tuple[Owner, Sequence[Column], Counts]:
    keep = groups.counts > 0
    owner = groups.owner[keep]
    values = [v[keep] for v in groups.values]
    if len(owner) == 0:
        return owner, values, np.empty(0, np.int64)
    order = sort_order([owner, values[0]])
    owner, values = owner[order], [v[order] for v in values]
    starts = run_starts([owner])
    pick = np.flatnonzero(np.roll(starts, -1)) if last else np.flatnonzero(starts)
    return owner[pick], [v[pick] for v in values], np.ones(len(pick), np.int64)


def minimum(groups: Groups) -> tuple[Owner, Sequence[Column], Counts]:
    """The least first-column value (with its row) among values present per key."""
    return _extreme(groups, last=False)


def maximum(groups: Groups) -> tuple[Owner, Sequence[Column], Counts]:
    """The greatest first-column value (with its row) among values present per key."""
    return _extreme(groups, last=True)


def monoid(ufunc: np.ufunc) -> Reducer:
    """A reducer folding the first value column with `ufunc` over present values."""

    def fold(groups: Groups) -> tuple[Owner, Sequence[Column], Counts]:
        keep = groups.counts > 0
        owner, vals = groups.owner[keep], groups.values[0][keep]
        if len(owner) == 0:
            return owner, [vals], np.empty(0, np.int64)
        starts = np.flatnonzero(run_starts([owner]))
        return owner[starts], [ufunc.reduceat(vals, starts)], np.ones(len(starts), np.int64)

    return fold


# Reducers linear in the multiplicities, whose groups need not be consolidated. Not
# `sum_values`: a float sum taken in another order may differ in its last bit, and a
# re-evaluated key would then retract and insert the same total.
LINEAR: frozenset[Reducer] = frozenset({count})
