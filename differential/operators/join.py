"""Join of two arrangements on their keys.

Layer: differential (operators).

At time `t` the join emits `dA ⋈ B_after + A_before ⋈ dB` (see `arrange`). An
update of A at `ta` and one of B at `tb` produce their result at `ta ⊔ tb`
with diff `da * db`; results at times later than `t` travel downstream and wait
in their consumers' queues. No intermediate state is kept: the join reads the
traces of its inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from differential.batch import Updates
from differential.dataflow import Operator, Stream
from differential.operators.arrange import Arranged, Owner
from differential.time import Time


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
        self.output = Stream(left.scope, [self.layout[i] for i in self.projection], "join")

    def ready(self, time: Time) -> bool:
        return self.left.has_delta(time) or self.right.has_delta(time)

    def step(self, time: Time) -> None:
        # Each side's changes are only scanned here: they need not be arranged now.
        k = self.left.key_arity
        d_left, d_right = self.left.changes(time), self.right.changes(time)
        if d_left is not None:
            left, hashes = d_left
            owner, rights = self.right.lookup(left.columns[:k], hashes, time, True)
            self.output.send(self._pairs(left, owner, rights, left_is_delta=True))
        if d_right is not None:
            right, hashes = d_right
            owner, lefts = self.left.lookup(right.columns[:k], hashes, time, False)
            self.output.send(self._pairs(right, owner, lefts, left_is_delta=False))

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
