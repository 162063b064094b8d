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

Each step needs the current output of the keys it touches. Read from the output
trace, that is every output entry those keys ever had (each change of a least adds
two), accumulated by a sort: 30-50 ms a round of WCC at 1M edges, growing with the
rounds. The tactic keeps instead a table of the output (`Held`: the keys sorted, one
row each), built from an empty output and updated with every change the step
emits, for as long as every output change is the step's (`Tuning.least_held`; ADR
0063). A step that is not the tactic's (`stop`), or a table that cannot say (an
output time not at or before the step's, a key with two rows or a multiplicity
other than one), drops it: the trace answers from then on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from differential.batch import Column, Updates, concat, consolidate
from differential.operators.arrange import Arranged, ArrangeOp, Owner
from differential.operators.reduce_tactics import Keys, current_output
from differential.sort import order_of, run_starts
from differential.time import Time, column, join_times, le
from differential.trace.batch import Batch, Hashes, key_hash
from differential.trace.spine import Spine
from differential.tuning import TUNING

General = Callable[[Keys, Time], Updates | None]
Output = tuple[Owner, list[Column], npt.NDArray[np.int64]]
Outputs = Callable[[tuple[Column, ...], Hashes, Time], Output]


@dataclass(frozen=True, slots=True)
class Held:
    """The reduce's whole output, one row per key: `keys` ascending, `values` its value
    columns, every row of multiplicity one, all at times at or before `latest`."""

    keys: Column
    values: tuple[Column, ...]
    latest: Time | None


class LeastGrowing:
    """The growing tactic of a reduce keeping the least value of column `col`."""

    def __init__(self, source: Arranged, trace: Spine, col: int, general: General) -> None:
        self.source, self.trace, self.col, self.general = source, trace, col, general
        # The output table (None: the trace answers); made at the first step when the
        # output is empty then and the key one integer column.
        self.held: Held | None = None
        self.fresh = True

    def applies(self, time: Time) -> bool:
        """Always, while the input only grows (the driver checks): keys where the
        step cannot tell go to `general` (the changes are not read here: they are
        arranged first, by the step)."""
        return True

    def step(self, time: Time) -> Updates | None:
        if self.fresh:
            self.fresh = False
            self.held = _empty_held(self.source) if not len(self.trace) else None
        held = self.held
        if held is not None and not (held.latest is None or le(held.latest, time)):
            held = self.held = None
        if held is not None:  # merged as the trace's reads would: the first commit after
            self.trace.settle()  # the first evaluation must not merge every round's output
        outputs = self._output if held is not None else self._traced
        change = extreme_step(self.source, outputs, self.col, time, self.general)
        if held is not None and change is not None:
            self.held = _absorbed(held, change, time)
        return change

    def stop(self) -> None:
        """A step that is not this tactic's changes the output: the trace answers from
        now on."""
        self.fresh, self.held = False, None

    def _traced(self, keys: tuple[Column, ...], hashes: Hashes, time: Time) -> Output:
        return current_output(self.trace, self.source.key_arity, keys, hashes, time)

    def _output(self, keys: tuple[Column, ...], hashes: Hashes, time: Time) -> Output:
        """`current_output` from the table: a binary search of the keys."""
        held = self.held
        assert held is not None
        at = np.searchsorted(held.keys, keys[0])
        np.minimum(at, len(held.keys) - 1, out=at)
        found = np.flatnonzero(held.keys[at] == keys[0]) if len(held.keys) else at[:0]
        rows = at[found]
        ones = np.ones(len(found), dtype=np.int64)
        return found.astype(np.intp), [v[rows] for v in held.values], ones


def _empty_held(source: Arranged) -> Held | None:
    """An empty output table, if the tactic is on and the key one integer column."""
    dtypes = source.dtypes
    if not TUNING.least_held or source.key_arity != 1 or dtypes[0].kind not in "iu":
        return None
    values = tuple(np.empty(0, dtype=d) for d in dtypes[1:])
    return Held(np.empty(0, dtype=dtypes[0]), values, None)


def _absorbed(held: Held, change: Updates, time: Time) -> Held | None:
    """The table after the step's output `change` (at `time`): the old rows and the
    change consolidated; None when a key is left with more than one row or a row
    with a multiplicity other than one (the table cannot say: the trace answers)."""
    old = Updates(
        (held.keys, *held.values),
        column(time, len(held.keys)),
        np.ones(len(held.keys), dtype=np.int64),
    )
    now = consolidate(concat([old, change.with_times(column(time, len(change)))]))
    keys = now.columns[0]
    if len(keys) > 1 and not bool(np.greater(keys[1:], keys[:-1]).all()):
        return None
    if len(now) and not bool((now.diffs == 1).all()):
        return None
    return Held(keys, tuple(now.columns[1:]), join_times(held.latest, time))


def extreme_step(
    source: Arranged, outputs: Outputs, col: int, time: Time, general: General
) -> Updates | None:
    """The output change at `time` (None: nothing changed), from the step's changes
    and each key's current output (`outputs`: from the trace or the tactic's table),
    whose least value is in value column `col`; `general` re-evaluates the keys this
    cannot."""
    batch = None
    if isinstance(source, ArrangeOp):  # arranged and merged as the general path's reads
        source.settle().batches  # noqa: B018 (leave it: a later epoch's first read must
        batch = source.delta(time)  # not sort and merge every round's input at once)
    changes = source.updates_at(time)
    if changes is None or not len(changes):
        return None
    k = source.key_arity
    runs = _sorted_runs(batch, k, col) if batch is not None else None
    if runs is not None:  # each key's least insertion is its first one (`_sorted_runs`)
        keys, inserted, retracted, first = runs

        def winners(changed: npt.NDArray[np.bool_]) -> Owner:
            return first[changed]

    else:  # not consolidated (a value both in and out falls back); times are all `time`
        values = changes.columns[k + col].astype(np.int64, copy=False)
        positive = changes.diffs > 0
        keys, owner, inserted, retracted = _groups(
            changes.columns[:k], values, positive, changes.diffs < 0
        )

        def winners(changed: npt.NDArray[np.bool_]) -> Owner:
            """The rows inserting a changed key's least, once a key (the first)."""
            win = np.flatnonzero(changed[owner] & positive & (values == inserted[owner]))
            return win[np.unique(owner[win], return_index=True)[1]] if len(win) else win

    n = len(inserted)
    hashes = key_hash(keys)
    o_owner, o_cols, o_mult = outputs(keys, hashes, time)
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
    win = winners(changed)
    if len(win):  # the least inserted comes, once a key (its value is the tuple)
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
Runs = tuple[tuple[Column, ...], npt.NDArray[np.int64], npt.NDArray[np.int64], Owner]


def _sorted_runs(batch: Batch, k: int, col: int) -> Runs | None:
    """The distinct keys of a step's arranged changes, per key the least value inserted
    and the least retracted (`_NONE`: none), and the row inserting the least (-1:
    none); None where this does not apply (`Tuning.least_runs` off, a key that is not
    one integer column, or value columns before `col` that are not the key's).

    A batch is sorted by key, then values, and consolidated (no two rows alike, no
    zero diff); all its rows are at the step's time. With the key's copies the only
    value columns before `col`, each key's rows ascend by value, so its least
    insertion is its first row with a positive diff, and its least retraction its
    first row with a negative one: a binary search of each key's start among the
    rows of each sign, where the reference reduces every row per key and then looks
    for the winning rows (ADR 0068)."""
    if not TUNING.least_runs or k != 1 or not batch.identity_hash or not len(batch):
        return None
    columns = batch.columns  # (read once: value columns held narrowed are copies, ADR 0085)
    key = columns[0]
    if any(not _same_column(columns[j], key) for j in range(1, 1 + col)):
        return None
    hashes = batch.hashes
    n = len(hashes)
    marks = np.empty(n, dtype=bool)
    marks[0] = True
    np.not_equal(hashes[1:], hashes[:-1], out=marks[1:])
    starts = np.flatnonzero(marks)
    del marks
    ends = np.append(starts[1:], n)
    values = columns[1 + col]
    positive = batch.diffs > 0
    inserted, first = _first_in_runs(np.flatnonzero(positive), starts, ends, values)
    np.logical_not(positive, out=positive)  # (no zero diffs: the rest retract)
    retracted, _ = _first_in_runs(np.flatnonzero(positive), starts, ends, values)
    return (key[starts],), inserted, retracted, first


def _same_column(column: Column, key: Column) -> bool:
    return column is key or (column.dtype == key.dtype and bool(np.array_equal(column, key)))


def _first_in_runs(
    rows: Owner, starts: Owner, ends: Owner, values: Column
) -> tuple[npt.NDArray[np.int64], Owner]:
    """Per run `[starts[i], ends[i])`, the first of the ascending `rows` in it (-1: none)
    and its value (`_NONE`: none)."""
    at = np.searchsorted(rows, starts)
    if not len(rows):
        return np.full(len(starts), _NONE, dtype=np.int64), np.full(len(starts), -1, np.intp)
    first = rows[np.minimum(at, len(rows) - 1)]
    found = (at < len(rows)) & (first < ends)  # (a row at or after the start, before the end)
    least = np.where(found, values[first].astype(np.int64, copy=False), _NONE)
    return least, np.where(found, first, -1)


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
