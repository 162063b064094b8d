"""The reduce family: distinct, count, sum, min, max and user reducers.

Layer: differential (operators).

A reduce groups its arranged input by key and maintains, for every key and
every time `T`, `output@T = f(input accumulated at T)`. At a step at time `t`
it re-evaluates every key whose input changed at `t` or that was scheduled for
`t`, and emits the difference between `f(input@t)` and the output accumulated
at `t`.

Interesting times: when a key changes at `t` and its history holds a time `s`
not `<= t`, the accumulations at `t ⊔ s` may differ from both; the reduce
schedules the key for `t ⊔ s`. Re-evaluation there schedules further joins, so
the key is visited at the closure of its change times under `⊔` (DESIGN §3).
In the root scope history is always `<= t` and nothing is scheduled.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from differential import small
from differential.batch import (
    Column,
    Updates,
    concat,
    consolidate,
    python_rows,
    run_starts,
    sort_order,
)
from differential.dataflow import Operator, Stream, check_budget
from differential.operators.arrange import Arranged, Owner
from differential.operators.reduce_extreme import extreme_step
from differential.time import (
    Antichain,
    Time,
    at_or_before,
    column,
    join_times,
    less_equal,
    split_by_time,
)
from differential.trace.batch import Hashes, key_hash
from differential.trace.cursor import Entry, FewKeys, columns_of
from differential.trace.keyset import KeySet
from differential.trace.spine import Spine
from differential.tuning import TUNING

Counts = npt.NDArray[np.int64]
Row = tuple[object, ...]
# Keys scheduled for a later time: columns, or Python rows from the list path.
KeyPart = tuple[Column, ...] | list[Row]


@dataclass(frozen=True)
class Groups:
    """Input of a reducer: rows sorted by `owner` (the key's index), then by value."""

    owner: Owner
    values: tuple[Column, ...]
    counts: Counts
    n_keys: int


# A reducer maps groups to output rows: (owner of each row, output columns, multiplicities).
Reducer = Callable[[Groups], tuple[Owner, Sequence[Column], Counts]]


class ReduceOp(Operator):
    """Applies `reducer` per key; output rows are `(key..., reducer columns...)`."""

    name = "reduce"
    holds_trace = True

    def __init__(
        self, source: Arranged, reducer: Reducer, out_dtypes: Sequence[np.dtype], name: str
    ) -> None:
        super().__init__(source.scope)
        self.name = name
        self.source = source
        self.reducer = reducer
        k = source.key_arity
        dtypes = (*source.dtypes[:k], *(np.dtype(d) for d in out_dtypes))
        self.output = Stream(source.scope, dtypes, name, producer=self)
        self.trace = Spine(k, dtypes, source.scope.depth)
        self.scheduled: dict[Time, list[KeyPart]] = {}
        # The output's keys while every step has been a growing distinct: then
        # they are the trace's keys, and membership is a probe, not a trace lookup.
        # Output of growing steps not yet arranged into `trace` (nobody reads it
        # while `seen` answers membership; a one-shot dataflow never does).
        self.unbuilt: list[Updates] = []
        self.seen: KeySet | None = KeySet(
            dtypes[:k], source.key_arity == 1 and dtypes[0].kind in "iu"
        )
        # Small steps may run on Python lists when every value compares like numpy's.
        self.lists_ok = all(d.kind in "iu" for d in (*source.dtypes, *dtypes))
        self.identity = k == 1 and dtypes[0].kind in "iu"  # `key_hash` is the key itself

    def pending(self, prefix: Time) -> Iterable[Time]:
        return self.scheduled.keys()

    def ready(self, time: Time) -> bool:
        return time in self.scheduled or self.source.has_delta(time)

    def step(self, time: Time) -> None:
        if self.reducer is distinct:
            updates = self.source.updates_at(time)
            if updates is not None and self._monotone(updates, time):
                changes = self.source.changes(time)
                assert changes is not None
                self._distinct_growing(changes, time)
                return
        self.settle()
        self.seen = None  # the trace may now lose keys: read it from here on
        least = getattr(self.reducer, "growing_least", None)
        if least is not None and time not in self.scheduled and self.source.history_before(time):
            change = extreme_step(self.source, least, time, self._current_output, self._reduce)
            self._emit(change, time)
            return
        keys = self._keys_at(time)
        if keys is None:
            return
        limit = TUNING.few * TUNING.reduce_list_factor
        if isinstance(keys, list):  # a few keys, as Python rows
            asked = FewKeys(keys, small.key_hashes(keys, self.identity))  # type: ignore[arg-type]
            found = self.source.lookup_entries(asked, time, True, limit)
            if found is not None:
                self._emit(self._step_lists(asked, found, time), time)
                return
            keys = tuple(columns_of(keys, self.source.dtypes[: self.source.key_arity]))
            hashes = np.array(asked.hashes, dtype=np.int64)
        else:
            hashes = key_hash(keys)
            if self.lists_ok and len(hashes) <= limit:
                asked = FewKeys.of(keys, hashes)
                found = self.source.lookup_entries(asked, time, True, limit)
                if found is not None:
                    self._emit(self._step_lists(asked, found, time), time)
                    return
        parts = []
        for rows in self._chunks(hashes, time):
            check_budget()  # many keys, or a long history, are reduced part by part
            if rows is None:
                parts.append(self._reduce(keys, hashes, time))
            else:
                parts.append(self._reduce(tuple(k[rows] for k in keys), hashes[rows], time))
        changed = [part for part in parts if len(part)]
        if changed:
            self._emit(concat(changed), time)

    def _chunks(self, hashes: Hashes, time: Time) -> Iterable[Owner | None]:
        """Runs of the (sorted, distinct) keys whose histories add up to about
        `TUNING.history` entries each (None: all at once, the usual case, also when an
        evenly spaced sample of the keys says their histories are far fewer). Keys
        reduce independently, so a huge step is reduced a run at a time and the
        budget checked in between; each key's history is read once either way."""
        n = len(hashes)
        if n <= TUNING.history // 64:
            yield None
            return
        sample = hashes[:: max(1, n // 256)]
        if (
            int(self.source.count(sample, time, True).sum()) * n
            <= len(sample) * TUNING.history // 4
        ):
            yield None
            return
        ends = np.cumsum(self.source.count(hashes, time, True))
        if not len(ends) or ends[-1] <= TUNING.history:
            yield None
            return
        marks = np.arange(TUNING.history, int(ends[-1]), TUNING.history)
        edges = np.unique(np.r_[0, np.searchsorted(ends, marks, side="right"), len(hashes)])
        for lo, hi in itertools.pairwise(edges.tolist()):
            yield np.arange(lo, hi, dtype=np.intp)

    def _reduce(self, keys: tuple[Column, ...], hashes: Hashes, time: Time) -> Updates:
        """The change of the output at `time` for `keys` (re-evaluated together)."""
        owner, history = self.source.lookup(keys, hashes, time, True)
        self._schedule_joins(keys, owner, history.times, time)
        linear = self.reducer in LINEAR
        groups = _accumulate(owner, history, self.source.key_arity, time, len(hashes), linear)
        d_owner, d_cols, d_mult = self.reducer(groups)
        o_owner, o_cols, o_mult = self._current_output(keys, hashes, time)
        out_owner = np.concatenate([d_owner, o_owner])
        cols = [np.concatenate([a, b]) for a, b in zip(d_cols, o_cols, strict=True)]
        diffs = np.concatenate([d_mult.astype(np.int64), -o_mult])
        change = consolidate(Updates((out_owner, *cols), column(time, len(diffs)), diffs))
        rows = change.columns[0]
        return Updates((*(k[rows] for k in keys), *change.columns[1:]), change.times, change.diffs)

    def _emit(self, result: Updates | None, time: Time) -> None:
        if result is not None and len(result):
            self.trace.insert(result, Antichain([time]), Antichain(), time)
            self.output.send(result)

    def _step_lists(self, asked: FewKeys, history: list[Entry], time: Time) -> Updates | None:
        """`step` for a few keys with a short history, on Python lists: the same
        interesting times scheduled, the same groups handed to the reducer and the
        same change out as the numpy path, without its fixed cost per numpy call."""
        accumulated: dict[tuple[object, ...], int] = {}
        later: dict[Time, set[int]] = {}
        visible = at_or_before(time)
        for o, t, row, d in history:
            if visible(t):
                accumulated[(o, *row)] = accumulated.get((o, *row), 0) + d
            else:  # a key changed at `time` meets history not `<=` it: revisit the join
                later.setdefault(join_times(t, time), set()).add(o)
        for at, owners in later.items():
            self.scheduled.setdefault(at, []).append([asked.rows[o] for o in owners])
        wanted = self._reduce_lists(accumulated, len(asked))
        for o, t, row, d in self.trace.lookup_entries(asked):
            if visible(t):
                wanted[(o, *row)] = wanted.get((o, *row), 0) - d
        change = sorted((row, n) for row, n in wanted.items() if n)
        if not change:
            return None
        keys = asked.rows
        rows = [(*keys[cast(int, row[0])], *row[1:]) for row, _ in change]
        values = columns_of(rows, self.output.dtypes)
        diffs = np.array([n for _, n in change], dtype=np.int64)
        return Updates(tuple(values), column(time, len(diffs)), diffs)

    def _reduce_lists(
        self, accumulated: dict[tuple[object, ...], int], n_keys: int
    ) -> dict[tuple[object, ...], int]:
        """The reducer's output rows `(query row, *values)` and multiplicities for
        the accumulated input rows; `distinct` (one copy of each row present) in
        Python, others handed their numpy groups."""
        if self.reducer is distinct:
            return {row: 1 for row, n in accumulated.items() if n > 0}
        k = self.source.key_arity
        live = sorted((row, n) for row, n in accumulated.items() if n)
        groups = Groups(
            np.array([row[0] for row, _ in live], dtype=np.intp),
            tuple(columns_of([row[1:] for row, _ in live], self.source.dtypes[k:])),
            np.array([n for _, n in live], dtype=np.int64),
            n_keys,
        )
        d_owner, d_cols, d_mult = self.reducer(groups)
        wanted: dict[tuple[object, ...], int] = {}
        out_rows = zip(d_owner.tolist(), *(c.tolist() for c in d_cols), strict=True)
        for row, n in zip(out_rows, d_mult.tolist(), strict=True):
            wanted[row] = wanted.get(row, 0) + n
        return wanted

    def _monotone(self, changes: Updates, time: Time) -> bool:
        """Only insertions at `time`, no history beyond it, nothing scheduled here."""
        return (
            len(self.source.dtypes) == self.source.key_arity  # keys only, no values
            and time not in self.scheduled
            and _all_positive(changes.diffs)
            and self.source.history_before(time)
        )

    def _distinct_growing(self, changes: tuple[Updates, Hashes], time: Time) -> None:
        """`distinct` when the input only grows: emit the keys not yet in the output.

        With all input history at times `<= time`, the output accumulated at
        `time` is already `distinct` of that history (every interesting time
        up to here was evaluated), and adding positive multiplicities can only
        make absent keys present. No input history is read. While the key set
        is kept, the input's changes are not even arranged (nothing sorts them).
        """
        if self.seen is not None:
            updates, hashes = changes
            keys: tuple[Column, ...] = updates.columns
            fresh = _admit(self.seen, hashes, keys)
        else:
            delta = self.source.delta(time)
            assert delta is not None
            first = np.flatnonzero(run_starts([delta.hashes, *delta.columns]))
            keys = tuple(c[first] for c in delta.columns)
            owner, found = self.trace.lookup(keys, delta.hashes[first])
            counts = np.zeros(len(first), dtype=np.int64)  # int64: exact for any count
            np.add.at(counts, owner, found.diffs)
            present = counts > 0
            fresh = np.flatnonzero(~present)
        n = len(fresh)
        if not n:
            return
        if n < len(keys[0]):
            keys = tuple(k[fresh] for k in keys)
        result = Updates(keys, column(time, n), np.ones(n, dtype=np.int64))
        if self.seen is not None:
            self.unbuilt.append(result)
        else:
            self.trace.insert(result, Antichain([time]), Antichain())
        self.output.send(result)

    def grown(self, result: Updates) -> None:
        """Record what growing steps emitted (fused rounds) as `_distinct_growing` does;
        the caller sends it on."""
        assert self.seen is not None
        self.unbuilt.append(result)

    def settle(self) -> None:
        """Arrange the output of growing steps into the trace, all in one batch."""
        if self.unbuilt:
            updates = concat(self.unbuilt)
            self.unbuilt = []
            lower = Antichain([tuple(int(t) for t in updates.times.min(axis=1))])
            self.trace.insert(updates, lower, Antichain())

    def _keys_at(self, time: Time) -> list[Row] | tuple[Column, ...] | None:
        """The keys to re-evaluate at `time`, sorted and distinct: a few as Python rows
        (when every column is an integer one), else as columns."""
        parts = self.scheduled.pop(time, [])
        k = self.source.key_arity
        changes = self.source.updates_at(time)  # scanned: they need not be arranged now
        if changes is not None:
            parts.append(changes.columns[:k])
        if not parts or not k:
            return None if not parts else _distinct_columns(self._columns(parts))
        n = sum(len(p) if isinstance(p, list) else len(p[0]) for p in parts)
        if self.lists_ok and n <= TUNING.few:
            rows: set[Row] = set()
            for p in parts:
                rows.update(p if isinstance(p, list) else python_rows(p, len(p[0])))
            return sorted(rows)
        return _distinct_columns(self._columns(parts))

    def _columns(self, parts: list[KeyPart]) -> tuple[Column, ...]:
        dtypes = self.source.dtypes[: self.source.key_arity]
        cols = [tuple(columns_of(p, dtypes)) if isinstance(p, list) else p for p in parts]
        return tuple(np.concatenate([c[i] for c in cols]) for i in range(len(dtypes)))

    def _schedule_joins(
        self, keys: tuple[Column, ...], owner: Owner, times: npt.NDArray[np.int64], time: Time
    ) -> None:
        now = np.asarray(time, dtype=np.int64).reshape(-1, 1)
        later = ~less_equal(times, now)
        if not later.any():
            return
        joined = np.maximum(times[:, later], now)
        pairs = consolidate(Updates((owner[later],), joined, np.ones(joined.shape[1], np.int64)))
        for t, idx in split_by_time(pairs.times):
            rows = pairs.columns[0][idx]
            self.scheduled.setdefault(t, []).append(tuple(k[rows] for k in keys))

    def _current_output(
        self, keys: tuple[Column, ...], hashes: npt.NDArray[np.int64], time: Time
    ) -> tuple[Owner, list[Column], Counts]:
        owner, found = self.trace.lookup(keys, hashes)
        k = self.source.key_arity
        now = np.asarray(time, dtype=np.int64).reshape(-1, 1)
        visible = less_equal(found.times, now)
        owner, found = owner[visible], found.take(visible)
        acc = consolidate(
            Updates((owner, *found.columns[k:]), column(time, len(owner)), found.diffs)
        )
        return acc.columns[0].astype(np.intp), list(acc.columns[1:]), acc.diffs

    def advance(self, epoch: int) -> None:
        """Compact the output trace (`Spine.advance`); the output of growing steps
        (`unbuilt`, insertions of distinct keys) has nothing to compact."""
        self.trace.advance(Antichain([(epoch,) + (0,) * (self.scope.depth - 1)]))

    def arranged_size(self) -> tuple[int, int]:
        """Output updates held, those of growing steps not arranged yet included
        (nothing is arranged or merged to measure them)."""
        unbuilt = sum(len(part) for part in self.unbuilt)
        return len(self.trace) + unbuilt, self.trace.held_batches + bool(self.unbuilt)

    def describe(self) -> str:
        return f"{self.name}({self.source.describe()})"

    def inputs(self) -> Sequence[Operator | Stream]:
        return (self.source,)


def _distinct_columns(cols: tuple[Column, ...]) -> tuple[Column, ...]:
    """The distinct rows of key columns, sorted."""
    order = sort_order(cols)
    cols = tuple(c[order] for c in cols)
    starts = run_starts(cols)
    return tuple(c[starts] for c in cols)


def _all_positive(diffs: Counts) -> bool:
    if len(diffs) <= TUNING.few:  # a few rows: cheaper in Python than a numpy reduction
        return min(diffs.tolist(), default=1) > 0
    return bool((diffs > 0).all())


def _accumulate(
    owner: Owner, history: Updates, k: int, time: Time, n_keys: int, linear: bool = False
) -> Groups:
    """Each key's values accumulated at `time`. For a reducer linear in the
    multiplicities (`LINEAR`), equal values need not be summed first: the rows are
    only grouped by key (a stable sort of the owners, not a sort of every column)."""
    now = np.asarray(time, dtype=np.int64).reshape(-1, 1)
    visible = less_equal(history.times, now)
    values = tuple(c[visible] for c in history.columns[k:])
    if linear:
        owners, diffs = owner[visible], history.diffs[visible]
        order = np.argsort(owners, kind="stable")
        return Groups(owners[order], tuple(v[order] for v in values), diffs[order], n_keys)
    acc = consolidate(
        Updates((owner[visible], *values), column(time, int(visible.sum())), history.diffs[visible])
    )
    return Groups(acc.columns[0], tuple(acc.columns[1:]), acc.diffs, n_keys)  # type: ignore[arg-type]


# -- reducers -------------------------------------------------------------------


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


def _admit(seen: KeySet, hashes: Hashes, keys: tuple[Column, ...]) -> Owner:
    """`seen.admit` of many keys a run of `TUNING.history` at a time, the budget checked in
    between (a run admitted stays admitted: the operator's state is dropped with its
    dataflow when the step fails)."""
    n = len(hashes)
    if n <= TUNING.history:
        return seen.admit(hashes, keys)
    parts = []
    for lo in range(0, n, TUNING.history):
        check_budget()
        run = slice(lo, lo + TUNING.history)
        parts.append(seen.admit(hashes[run], tuple(k[run] for k in keys)) + lo)
    return np.concatenate(parts)
