"""A growing step for reduces that keep a group's least (or greatest) value.

Layer: differential (operators). Imports `batch`, `time`, `trace`, the arrange
operator and the reduce tactics.

WCC, SSSP and BFS are subsumptions that keep, per group, the tuple with the least
label, distance or level (`datalog.plan.subsume`). In their first evaluation each
round re-read the whole input history of every key it touched (every candidate
ever proposed, and retracted when its proposer improved): 0.4M-1.6M entries a
round on a 200k-edge graph, most of WCC's time (ADR 0046).

While the input has no history beyond the step's time (and nothing is scheduled
there) the output accumulated so far is the reducer's of the input accumulated so
far, so a key's new extreme follows from its current output `o` and the step's own
changes alone: with `m` the least value inserted (net, per value) and `r` the least
retracted, the new least is `min(o, m)` whenever `r > min(o, m)` (nothing at or
below it goes). Only least values of `number` columns (WCC, SSSP and BFS all keep
the least). This relies on collections holding no negative multiplicity at
any time (true of every Datalog collection); `m` is then present after the step.
Keys where it does not apply (a retraction at or below the new least, no output
and no insertion) take the general path. A reducer offers this step by carrying
`growing_least = column` (its value column), and only when its output tuple is
the key and that one column; `LeastGrowing` is then the reduce's growing tactic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from differential.batch import Column, Updates, concat, consolidate
from differential.operators.arrange import Arranged, ArrangeOp, Owner
from differential.operators.reduce_tactics import Keys, current_output
from differential.sort import order_of, run_starts
from differential.time import Time, column
from differential.trace.batch import key_hash
from differential.trace.spine import Spine
from differential.tuning import TUNING

General = Callable[[Keys, Time], Updates | None]


class LeastGrowing:
    """The growing tactic of a reduce keeping the least value of column `col`."""

    def __init__(self, source: Arranged, trace: Spine, col: int, general: General) -> None:
        self.source, self.trace, self.col, self.general = source, trace, col, general

    def applies(self, time: Time) -> bool:
        """Always, while the input only grows (the driver checks): keys where the
        step cannot tell go to `general` (the changes are not read here: they are
        arranged first, by the step)."""
        return True

    def step(self, time: Time) -> Updates | None:
        return extreme_step(self.source, self.trace, self.col, time, self.general)


def extreme_step(
    source: Arranged, trace: Spine, col: int, time: Time, general: General
) -> Updates | None:
    """The output change at `time` (None: nothing changed), from the step's changes
    and each key's current output (in `trace`), whose least value is in value column
    `col`; `general` re-evaluates the keys this cannot."""
    if isinstance(source, ArrangeOp):  # arranged and merged as the general path's reads
        source.settle().batches  # noqa: B018 (leave it: a later epoch's first read must
        source.delta(time)  # not sort and merge every round's input at once)
    changes = source.updates_at(time)
    if changes is None or not len(changes):
        return None
    k = source.key_arity
    # Not consolidated (a value both in and out falls back); times are all `time`.
    values = changes.columns[k + col].astype(np.int64, copy=False)
    positive = changes.diffs > 0
    keys, owner, inserted, retracted = _groups(
        changes.columns[:k], values, positive, changes.diffs < 0
    )
    n = len(inserted)
    hashes = key_hash(keys)
    o_owner, o_cols, o_mult = current_output(trace, k, keys, hashes, time)
    o_value = np.full(n, _NONE, dtype=np.int64)
    o_value[o_owner] = o_cols[col]
    new = np.minimum(o_value, inserted)
    odd = np.bincount(o_owner, minlength=n) > 1  # (a set: one output row per key)
    odd[o_owner[o_mult != 1]] = True
    ok = (new < _NONE) & (retracted > new) & ~odd
    changed = ok & (new != o_value)
    parts = []
    old = changed[o_owner]
    if old.any():  # the old least goes
        rows = o_owner[old]
        cols = (*(c[rows] for c in keys), *(c[old] for c in o_cols))
        parts.append(Updates(cols, column(time, len(rows)), -np.ones(len(rows), np.int64)))
    win = np.flatnonzero(changed[owner] & positive & (values == inserted[owner]))
    if len(win):  # the least inserted comes, once a key (its value is the tuple)
        win = win[np.unique(owner[win], return_index=True)[1]]
        cols = tuple(c[win] for c in changes.columns)
        parts.append(Updates(cols, column(time, len(win)), np.ones(len(win), np.int64)))
    rest = np.flatnonzero(~ok)
    if len(rest):
        dtypes = tuple(c.dtype for c in keys)
        others = Keys(dtypes, False, columns=tuple(c[rest] for c in keys), hashes=hashes[rest])
        change = general(others, time)
        if change is not None:
            parts.append(change)
    parts = [p for p in parts if len(p)]
    if not parts:
        return None
    return consolidate(concat(parts))


_NONE = np.iinfo(np.int64).max  # no value (a key holding it takes the general path)


Groups = tuple[tuple[Column, ...], Owner, npt.NDArray[np.int64], npt.NDArray[np.int64]]


def _groups(
    key: Sequence[Column],
    values: npt.NDArray[np.int64],
    inserting: npt.NDArray[np.bool_],
    retracting: npt.NDArray[np.bool_],
) -> Groups:
    """The distinct keys (sorted), each row's key index, and per key the least value
    inserted and the least retracted (`_NONE`: none). Rows sorted by key already (the
    step's arranged changes) are grouped by runs, not sorted again; else one integer
    key column over a range not much wider than the rows goes by index
    (`np.minimum.at`, no sort), and other keys by one sort."""
    n = len(values)
    if n >= TUNING.sorted_from and order_of(list(key)) >= 0:
        return _runs(key, values, inserting, retracting)
    if len(key) == 1 and key[0].dtype.kind == "i":
        low, high = int(key[0].min()), int(key[0].max())
        if high - low <= 4 * n + 1024:
            at = key[0] - low
            present = np.bincount(at, minlength=high - low + 1) > 0
            slot = np.cumsum(present) - 1
            owner = slot[at]
            m = int(present.sum())
            return (
                (np.flatnonzero(present).astype(key[0].dtype) + low,),
                owner,
                _least(owner, values, inserting, m),
                _least(owner, values, retracting, m),
            )
    order = np.argsort(key[0]) if len(key) == 1 else np.lexsort(tuple(reversed(key)))
    keys, by_run, inserted, retracted = _runs(
        [c[order] for c in key], values[order], inserting[order], retracting[order]
    )
    owner = np.empty(n, dtype=np.intp)
    owner[order] = by_run
    return keys, owner, inserted, retracted


def _runs(
    key: Sequence[Column],
    values: npt.NDArray[np.int64],
    inserting: npt.NDArray[np.bool_],
    retracting: npt.NDArray[np.bool_],
) -> Groups:
    """`_groups` of rows sorted by key: one pass for the runs, one reduction each."""
    marks = run_starts(key)
    starts = np.flatnonzero(marks)
    owner = np.cumsum(marks, dtype=np.intp) - 1
    keys = tuple(c[starts] for c in key)
    inserted = np.minimum.reduceat(np.where(inserting, values, _NONE), starts)
    retracted = np.minimum.reduceat(np.where(retracting, values, _NONE), starts)
    return keys, owner, inserted, retracted


def _least(
    owner: Owner, values: npt.NDArray[np.int64], mask: npt.NDArray[np.bool_], n: int
) -> npt.NDArray[np.int64]:
    out = np.full(n, _NONE, dtype=np.int64)
    np.minimum.at(out, owner[mask], values[mask])
    return out
