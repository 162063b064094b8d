"""Join of two arrangements on their keys.

Layer: differential (operators).

At time `t` the join emits `dA ⋈ B_after + A_before ⋈ dB` (see `arrange`). An
update of A at `ta` and one of B at `tb` produce their result at `ta ⊔ tb`
with diff `da * db`; results at times later than `t` travel downstream and wait
in their consumers' queues. No intermediate state is kept: the join reads the
traces of its inputs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from differential import small
from differential.batch import Index, Updates
from differential.dataflow import Operator, Stream, check_budget
from differential.operators.arrange import Arranged, Owner
from differential.time import Time
from differential.trace.batch import Hashes

_PAIRS = 1 << 20  # pairs joined at once (a product beyond it is chunked by changes)
_SAMPLE = 256  # changes whose matches are counted to estimate a product's size


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

    def ready(self, time: Time) -> bool:
        return self.left.has_delta(time) or self.right.has_delta(time)

    def step(self, time: Time) -> None:
        # Each side's changes are only scanned here: they need not be arranged now.
        d_left, d_right = self.left.changes(time), self.right.changes(time)
        if d_left is not None:
            self._join(*d_left, self.right, time, left_is_delta=True)
        if d_right is not None:
            self._join(*d_right, self.left, time, left_is_delta=False)

    def _join(
        self, delta: Updates, hashes: Hashes, other: Arranged, time: Time, left_is_delta: bool
    ) -> None:
        """Send `delta` joined with `other` (after this time's changes if `delta` is the
        left side, before them if it is the right: each pair is derived once), in
        chunks of about `_PAIRS` pairs, so memory stays bounded per chunk and a
        budget can stop a huge product between two of them."""
        k = self.left.key_arity
        for rows in _chunks(delta, hashes, other, time, left_is_delta):
            check_budget()
            part, keys = (delta, hashes) if rows is None else (delta.take(rows), hashes[rows])
            owner, found = other.lookup(part.columns[:k], keys, time, left_is_delta)
            self.output.send(self._pairs(part, owner, found, left_is_delta))

    def _pairs(self, delta: Updates, owner: Owner, found: Updates, left_is_delta: bool) -> Updates:
        if len(owner) == 0:
            return self.output.empty()
        k = self.left.key_arity
        mine = delta.take(owner)
        left, right = (mine, found) if left_is_delta else (found, mine)
        layout = (*left.columns, *right.columns[k:])
        return Updates(
            tuple(layout[i] for i in self.projection),
            np.maximum(left.times, right.times),
            left.diffs * right.diffs,
        )

    def describe(self) -> str:
        return f"join({self.left.describe()}, {self.right.describe()})"

    def inputs(self) -> Sequence[Operator | Stream]:
        return (self.left, self.right)


def _chunks(
    delta: Updates, hashes: Hashes, other: Arranged, time: Time, include_delta: bool
) -> Iterator[Index | None]:
    """Rows of `delta` whose matches in `other` add up to about `_PAIRS` each (None:
    all of them at once). A few changes are one chunk, and so are changes whose
    matches, estimated from an evenly spaced sample, are far fewer than `_PAIRS`
    (counting all of them costs as much as finding their ranges again)."""
    n = len(delta)
    if n <= small.FEW:
        yield None
        return
    sample = hashes[:: max(1, n // _SAMPLE)]
    if int(other.count(sample, time, include_delta).sum()) * n <= len(sample) * _PAIRS // 4:
        yield None
        return
    ends = np.cumsum(other.count(hashes, time, include_delta))
    if not len(ends) or ends[-1] <= _PAIRS:
        yield None
        return
    marks = np.arange(_PAIRS, int(ends[-1]), _PAIRS)
    edges = np.unique(np.r_[0, np.searchsorted(ends, marks, side="right"), len(delta)])
    for lo, hi in itertools.pairwise(edges.tolist()):
        yield np.arange(lo, hi, dtype=np.intp)
