"""How a reduce re-evaluates its keys: on numpy columns, or on Python rows for a few.

Layer: differential (operators). Imports `batch`, `small`, `time`, `trace`, the
arrange operator and the reducers.

The reduce driver (`reduce.ReduceOp`) owns the algorithm: which keys a step
re-evaluates, which later times they are revisited at (`Driver.revisit`, the one
rule of interesting times) and where the change goes. A tactic owns the inner
loop only: given the keys, read their input history, accumulate it at the step's
time, hand the groups to the reducer, and subtract the output held. Both tactics
compute the same change (`tests/differential/test_oracle.py` runs them both):

- `ColumnsTactic`, the reference: numpy over whole columns, a run of keys at a time
  when their history is long (`TUNING.history`), the budget checked in between;
- `RowsTactic`: a few keys with a short history on Python lists (no fixed cost per
  numpy call); it refuses (None) when the keys or their history are too many, and
  the driver hands them to the next tactic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, cast

import numpy as np
import numpy.typing as npt

from differential import small
from differential.batch import Column, Updates, consolidate, weighed_runs
from differential.dataflow import Stream, check_budget
from differential.operators.arrange import Arranged, Owner
from differential.operators.reducers import LINEAR, Counts, Groups, Reducer, distinct
from differential.sort import run_starts, sort_order, unique_values
from differential.time import Time, Times, at_or_before, column, less_equal, split_by_time
from differential.trace.batch import Hashes, key_hash
from differential.trace.cursor import FewKeys, columns_of
from differential.trace.spine import Spine
from differential.tuning import TUNING

Row = tuple[object, ...]
# Keys scheduled for a later time: columns, or Python rows.
KeyPart = tuple[Column, ...] | list[Row]
KeyIndex = Owner | list[int]  # positions in a step's `Keys`


class Keys:
    """The keys one step re-evaluates, sorted and distinct: a few as Python rows, or
    as columns; each form is made from the other when a tactic first asks for it."""

    def __init__(
        self,
        dtypes: Sequence[np.dtype],
        identity: bool,
        rows: list[Row] | None = None,
        columns: tuple[Column, ...] | None = None,
        hashes: Hashes | None = None,
    ) -> None:
        self.dtypes, self.identity = tuple(dtypes), identity
        self.rows, self._columns = rows, columns
        self._few: FewKeys | None = None
        self._hashes = hashes

    def __len__(self) -> int:
        return len(self.rows) if self.rows is not None else len(self.hashes())

    def columns(self) -> tuple[Column, ...]:
        if self._columns is None:
            assert self.rows is not None
            self._columns = tuple(columns_of(self.rows, self.dtypes))
        return self._columns

    def hashes(self) -> Hashes:
        if self._hashes is None:
            if self.rows is not None:
                self._hashes = np.array(self.few().hashes, dtype=np.int64)
            else:
                self._hashes = key_hash(self.columns())
        return self._hashes

    def few(self) -> FewKeys:
        """The keys as Python rows with their hashes (the rows tactic's query)."""
        if self._few is None:
            if self.rows is not None:
                hashes = small.key_hashes(self.rows, self.identity)  # type: ignore[arg-type]
                self._few = FewKeys(self.rows, hashes)
            else:
                self._few = FewKeys.of(self.columns(), self.hashes())
        return self._few

    def take(self, rows: Owner) -> Keys:
        """The keys at positions `rows`, as columns."""
        columns = tuple(k[rows] for k in self.columns())
        return Keys(self.dtypes, self.identity, columns=columns, hashes=self.hashes()[rows])

    def part(self, rows: KeyIndex) -> KeyPart:
        """The keys at positions `rows`, in the form they came in (for the schedule)."""
        if self.rows is not None:
            return [self.rows[i] for i in (rows if isinstance(rows, list) else rows.tolist())]
        return tuple(k[rows] for k in self.columns())


class Driver(Protocol):
    """What a tactic reads of the reduce that drives it."""

    source: Arranged
    reducer: Reducer
    trace: Spine
    output: Stream

    def revisit(self, keys: Keys, history: Iterable[tuple[Time, KeyIndex]], time: Time) -> None:
        """Schedule the keys whose history holds times not `<= time` (the driver's
        rule of interesting times); `history`: times, each with the keys holding it."""
        ...


class ColumnsTactic:
    """Re-evaluation on numpy columns (the reference tactic)."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def reevaluate(self, keys: Keys, time: Time) -> list[Updates] | None:
        """The output change for `keys`, in parts (never refused)."""
        parts = []
        for rows in self._runs(keys.hashes(), time):
            check_budget()  # many keys, or a long history, are reduced part by part
            parts.append(self._reduce(keys if rows is None else keys.take(rows), time))
        return [part for part in parts if len(part)]

    def _runs(self, hashes: Hashes, time: Time) -> Iterable[Owner | None]:
        """Runs of the (sorted, distinct) keys whose histories add up to about
        `TUNING.history` entries each (None: all at once, the usual case, also when an
        evenly spaced sample of the keys says their histories are far fewer). Keys
        reduce independently, so a huge step is reduced a run at a time and the
        budget checked in between; each key's history is read once either way."""
        source, n = self.driver.source, len(hashes)
        if n <= TUNING.history // 64:
            yield None
            return
        sample = hashes[:: max(1, n // 256)]
        if int(source.count(sample, time, True).sum()) * n <= len(sample) * TUNING.history // 4:
            yield None
            return
        ends = np.cumsum(source.count(hashes, time, True))
        if not len(ends) or ends[-1] <= TUNING.history:
            yield None
            return
        yield from weighed_runs(ends, TUNING.history)

    def _reduce(self, keys: Keys, time: Time) -> Updates:
        """The change of the output at `time` for `keys` (re-evaluated together)."""
        driver = self.driver
        columns, hashes = keys.columns(), keys.hashes()
        owner, history = driver.source.lookup(columns, hashes, time, True)
        driver.revisit(keys, _later(owner, history.times, time), time)
        linear = driver.reducer in LINEAR
        k = driver.source.key_arity
        groups = accumulate(owner, history, k, time, len(hashes), linear)
        d_owner, d_cols, d_mult = driver.reducer(groups)
        o_owner, o_cols, o_mult = current_output(driver.trace, k, columns, hashes, time)
        out_owner = np.concatenate([d_owner, o_owner])
        cols = [np.concatenate([a, b]) for a, b in zip(d_cols, o_cols, strict=True)]
        diffs = np.concatenate([d_mult.astype(np.int64), -o_mult])
        change = consolidate(Updates((out_owner, *cols), column(time, len(diffs)), diffs))
        rows = change.columns[0]
        out = (*(c[rows] for c in columns), *change.columns[1:])
        return Updates(out, change.times, change.diffs)


class RowsTactic:
    """Re-evaluation of a few keys with a short history on Python lists: the same
    interesting times, the same groups handed to the reducer and the same change out
    as `ColumnsTactic`, without its fixed cost per numpy call."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def reevaluate(self, keys: Keys, time: Time) -> list[Updates] | None:
        """The output change for `keys` (None: too many keys or entries for lists)."""
        limit = TUNING.few * TUNING.reduce_list_factor
        if len(keys) > limit:
            return None
        driver, asked = self.driver, keys.few()
        history = driver.source.lookup_entries(asked, time, True, limit)
        if history is None:
            return None
        accumulated: dict[Row, int] = {}
        later: dict[Time, list[int]] = {}
        visible = at_or_before(time)
        for o, t, row, d in history:
            if visible(t):
                accumulated[(o, *row)] = accumulated.get((o, *row), 0) + d
            else:  # a key changed at `time` meets history not `<=` it
                later.setdefault(t, []).append(o)
        if later:
            driver.revisit(keys, later.items(), time)
        wanted = self._reduce(accumulated, len(asked))
        for o, t, row, d in driver.trace.lookup_entries(asked):
            if visible(t):
                wanted[(o, *row)] = wanted.get((o, *row), 0) - d
        change = sorted((row, n) for row, n in wanted.items() if n)
        if not change:
            return []
        rows = [(*asked.rows[cast(int, row[0])], *row[1:]) for row, _ in change]
        values = columns_of(rows, driver.output.dtypes)
        diffs = np.array([n for _, n in change], dtype=np.int64)
        return [Updates(tuple(values), column(time, len(diffs)), diffs)]

    def _reduce(self, accumulated: dict[Row, int], n_keys: int) -> dict[Row, int]:
        """The reducer's output rows `(query row, *values)` and multiplicities for
        the accumulated input rows; `distinct` (one copy of each row present) in
        Python, others handed their numpy groups."""
        reducer = self.driver.reducer
        if reducer is distinct:
            return {row: 1 for row, n in accumulated.items() if n > 0}
        source = self.driver.source
        live = sorted((row, n) for row, n in accumulated.items() if n)
        groups = Groups(
            np.array([row[0] for row, _ in live], dtype=np.intp),
            tuple(columns_of([row[1:] for row, _ in live], source.dtypes[source.key_arity :])),
            np.array([n for _, n in live], dtype=np.int64),
            n_keys,
        )
        d_owner, d_cols, d_mult = reducer(groups)
        wanted: dict[Row, int] = {}
        out_rows = zip(d_owner.tolist(), *(c.tolist() for c in d_cols), strict=True)
        for row, n in zip(out_rows, d_mult.tolist(), strict=True):
            wanted[row] = wanted.get(row, 0) + n
        return wanted


def _later(owner: Owner, times: Times, time: Time) -> list[tuple[Time, Owner]]:
    """The history's times not `<= time`, each with the keys holding an entry at it."""
    later = ~less_equal(times, np.asarray(time, dtype=np.int64).reshape(-1, 1))
    if not later.any():
        return []
    owner = owner[later]
    return [(s, unique_values(owner[at])) for s, at in split_by_time(times[:, later])]


def current_output(
    trace: Spine, k: int, keys: tuple[Column, ...], hashes: Hashes, time: Time
) -> tuple[Owner, list[Column], Counts]:
    """The output held for `keys` (a reduce's `trace`, keyed by `k` columns),
    accumulated at `time`, as (key index, value columns, multiplicities)."""
    owner, found = trace.lookup(keys, hashes)
    now = np.asarray(time, dtype=np.int64).reshape(-1, 1)
    visible = less_equal(found.times, now)
    owner, found = owner[visible], found.take(visible)
    acc = consolidate(Updates((owner, *found.columns[k:]), column(time, len(owner)), found.diffs))
    return acc.columns[0].astype(np.intp), list(acc.columns[1:]), acc.diffs


def accumulate(
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


def distinct_columns(cols: tuple[Column, ...]) -> tuple[Column, ...]:
    """The distinct rows of key columns, sorted."""
    order = sort_order(cols)
    cols = tuple(c[order] for c in cols)
    starts = run_starts(cols)
    return tuple(c[starts] for c in cols)


def all_positive(diffs: npt.NDArray[np.int64]) -> bool:
    if len(diffs) <= TUNING.few:  # a few rows: cheaper in Python than a numpy reduction
        return min(diffs.tolist(), default=1) > 0
    return bool((diffs > 0).all())
