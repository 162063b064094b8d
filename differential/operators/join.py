"""Join of two arrangements on their keys.

Layer: differential (operators).

At time `t` the join emits `dA ⋈ B_after + A_before ⋈ dB` (see `arrange`). An
update of A at `ta` and one of B at `tb` produce their result at `ta ⊔ tb`
with diff `da * db`; results at times later than `t` travel downstream and wait
in their consumers' queues. No intermediate state is kept: the join reads the
traces of its inputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from differential import small
from differential.batch import (
    Column,
    Index,
    Updates,
    compact_uniform,
    joined_times,
    multiplied,
    python_rows,
    python_times,
    take_diffs,
    take_times,
    weighed_runs,
)
from differential.dataflow import Operator, Stream, check_budget, check_rows, row_limit
from differential.operators.arrange import Arranged, Owner
from differential.time import Time, join_times
from differential.trace.batch import Hashes
from differential.trace.cursor import FewKeys, columns_of
from differential.tuning import TUNING


class JoinOp(Operator):
    """Joins `left` and `right` on their keys; output columns picked by `projection`.

    Output columns are chosen from `(key..., left values..., right values...)`.
    """

    name = "join"

    def __init__(self, left: Arranged, right: Arranged, projection: Sequence[int]) -> None:
        assert left.scope is right.scope, "join inputs must share a scope"
        assert left.key_arity == right.key_arity, "join keys must have one arity"
        super().__init__(left.scope)
        self.left, self.right = left, right
        k = left.key_arity
        self.layout = (*left.dtypes, *right.dtypes[k:])
        self.projection = list(projection)
        dtypes = [self.layout[i] for i in self.projection]
        self.output = Stream(left.scope, dtypes, "join", producer=self)
        # A few changes may be joined on Python rows when every column is an integer one.
        self.lists_ok = k > 0 and all(d.kind in "iu" for d in self.layout)
        # The columns of each side the projection reads (the key's from the left side):
        # the pairs gather only those (a round of WCC drops the key: half its gathers).
        picked, width = set(self.projection), len(left.dtypes)
        self.left_needed = [i for i in range(width) if i in picked]
        self.right_needed = [k + j for j in range(len(right.dtypes) - k) if width + j in picked]

    def ready(self, time: Time) -> bool:
        return self.left.has_delta(time) or self.right.has_delta(time)

    def step(self, time: Time) -> None:
        # Each side's changes are only scanned here: they need not be arranged now.
        # One side's changes meet the other's history with its changes, the other's
        # only its history before them: each pair once. The side met with its changes
        # is arranged for it; the smaller one is (`Tuning.smaller_arranged`; False: the
        # right side always, the reference).
        first = True
        if TUNING.smaller_arranged and self.left.has_delta(time) and self.right.has_delta(time):
            left, right = self.left.updates_at(time), self.right.updates_at(time)
            first = left is None or right is None or len(left) >= len(right)
        sides = ((self.left, self.right, True, first), (self.right, self.left, False, not first))
        for mine, other, left_is_delta, include in sides:
            delta = mine.updates_at(time)
            if delta is None:
                continue
            if self.lists_ok and len(delta) <= TUNING.few:
                found = self.join_few(delta, other, time, left_is_delta, include)
                if found is not None:
                    self.send(found)
                    continue
            changes = mine.changes(time)
            assert changes is not None
            self.join_changes(*changes, other, time, left_is_delta, include)

    def join_few(
        self, delta: Updates, other: Arranged, time: Time, left_is_delta: bool, include: bool
    ) -> Updates | None:
        """`join_changes` of a few changes on Python rows: their keys looked up in the batches
        `lookup` reads (`batch_entries`), each match's output row, time (the join of
        both) and product of diffs built in Python, then one column per output
        column. None when the matches are too many for lists (join with numpy)."""
        k = self.left.key_arity
        rows = python_rows(delta.columns, len(delta))
        keys = [row[:k] for row in rows]
        asked = FewKeys(keys, small.key_hashes(keys, k == 1))  # type: ignore[arg-type]
        found = other.batch_entries(asked, time, include, TUNING.few_pairs)
        if found is None:
            return None
        if not found:
            return self.output.empty()
        times, diffs = python_times(delta.times), delta.diffs.tolist()
        pick = self.projection
        out: list[tuple[object, ...]] = []
        out_times: list[Time] = []
        out_diffs: list[int] = []
        for i, t, values, d in found:
            row = rows[i]
            layout = (*row, *values) if left_is_delta else (*row[:k], *values, *row[k:])
            out.append(tuple([layout[j] for j in pick]))
            out_times.append(join_times(t, times[i]))
            out_diffs.append(diffs[i] * d)
        return Updates(
            tuple(columns_of(out, self.output.dtypes)),
            np.array(out_times, dtype=np.int64).T.copy(),
            np.array(out_diffs, dtype=np.int64),
        )

    def join_changes(
        self,
        delta: Updates,
        hashes: Hashes,
        other: Arranged,
        time: Time,
        left_is_delta: bool,
        include: bool,
    ) -> None:
        """Send `delta` joined with `other` (after this time's changes if `include`,
        before them if not: each pair is derived once), in
        chunks of about `TUNING.pairs` pairs, so memory stays bounded per chunk and a
        budget can stop a huge product between two of them. Under a row limit the
        pairs are counted first, and too many are refused before any is built."""
        k = self.left.key_arity
        exact = row_limit() is not None
        at = time if TUNING.joined_pairs else None  # (every change is at `time`)
        for rows in _chunks(delta, hashes, other, time, include, exact):
            check_budget()
            part, keys = (delta, hashes) if rows is None else (delta.take(rows), hashes[rows])
            wanted = self.right_needed if left_is_delta else self.left_needed
            columns = part.columns[:k]
            if at is None:
                owner, found = other.lookup(columns, keys, time, include, wanted or None)
            else:  # (each pair's time is the changes' one time joined with the found one)
                owner, found = other.lookup_joined(columns, keys, time, include, wanted or None, at)
            self.send(self._pairs(part, owner, found, left_is_delta, bool(wanted)))

    def send(self, pairs: Updates) -> None:
        """Send joined pairs on (an antijoin sends them negated)."""
        self.output.send(pairs)

    def _pairs(
        self, delta: Updates, owner: Owner, found: Updates, left_is_delta: bool, picked: bool
    ) -> Updates:
        """The pairs of `delta`'s rows `owner` and the entries `found` (holding only the
        other side's needed columns when `picked`, else all of them): each side's
        columns the projection reads, gathered once."""
        if len(owner) == 0:
            return self.output.empty()
        k = self.left.key_arity
        mine_needed, found_needed = (
            (self.left_needed, self.right_needed)
            if left_is_delta
            else (self.right_needed, self.left_needed)
        )
        mine = {i: delta.columns[i][owner] for i in mine_needed}
        found_columns = dict(zip(found_needed, found.columns, strict=True)) if picked else None
        theirs = found_columns if found_columns is not None else dict(enumerate(found.columns))
        left, right = (mine, theirs) if left_is_delta else (theirs, mine)
        width = len(self.left.dtypes)

        def column(i: int) -> Column:
            return left[i] if i < width else right[k + i - width]

        mine_times, mine_diffs = take_times(delta.times, owner), take_diffs(delta.diffs, owner)
        # One repeated time and diff where every pair agrees (a round's changes joined
        # with history before it, in a totally ordered scope): the pairs then hold
        # their columns only, downstream too (ADR 0062).
        times, diffs = compact_uniform(
            joined_times(mine_times, found.times), multiplied(mine_diffs, found.diffs)
        )
        return Updates(tuple(column(i) for i in self.projection), times, diffs)

    def describe(self) -> str:
        return f"join({self.left.describe()}, {self.right.describe()})"

    def inputs(self) -> Sequence[Operator | Stream]:
        return (self.left, self.right)


def _chunks(
    delta: Updates,
    hashes: Hashes,
    other: Arranged,
    time: Time,
    include_delta: bool,
    exact: bool = False,
) -> Iterator[Index | None]:
    """Rows of `delta` whose matches in `other` add up to about `TUNING.pairs` each (None:
    all of them at once). A few changes are one chunk, and so are changes whose
    matches, estimated from an evenly spaced sample, are far fewer than `TUNING.pairs`
    (counting all of them costs as much as finding their ranges again), unless
    `exact`: then every match is counted and the total checked against the row
    limit (`check_rows`) before any pair is built."""
    n = len(delta)
    if not exact and n <= TUNING.few:
        yield None
        return
    sample = hashes[:: max(1, n // TUNING.join_sample)]
    if not exact and (
        int(other.count(sample, time, include_delta).sum()) * n <= len(sample) * TUNING.pairs // 4
    ):
        yield None
        return
    ends = np.cumsum(other.count(hashes, time, include_delta))
    if len(ends):
        check_rows(int(ends[-1]), "a join")
    if not len(ends) or ends[-1] <= TUNING.pairs:
        yield None
        return
    yield from weighed_runs(ends, TUNING.pairs)
