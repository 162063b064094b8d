"""Antijoin: the rows of one arrangement whose key the other does not hold.

Layer: differential (operators). Imports `batch`, `small`, `time`, `trace`, the
arrange and join operators.

Stratified negation (`r(x) :- s(x), !n(x).`) is `x - x ⋉ p`, `p` the negated atom's
rows made a set (a distinct's output) arranged by the shared variables and `x`
arranged by the same. At a time `t` its change is `dx - dx ⋈ p_after - x_before ⋈ dp`:
the rows that changed, less the join's two terms. Where every entry `p` holds under
the changed rows' keys is at a time `<= t`, `dx ⋈ p_after` pairs each row with those
entries at `t` itself, and sums to the row times the multiplicity `p` accumulates
under its key at `t`: each row of `dx` goes out once, its multiplicity times
`1 - p_t(key)`, and no pair is built (the masked step, `Tuning.antijoin_masks`). In a
recursion negating a lower stratum that is the rows whose key is absent, as they
came, where `x + (-(x ⋈ p))` sent every row and then its retraction for each present
key, through every operator after it. Entries at other times (a live dataflow's
earlier epochs at later iterations) take the join's pairs, negated (the reference).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from differential import small
from differential.batch import Updates, python_rows
from differential.operators.arrange import Arranged
from differential.operators.join import JoinOp
from differential.time import Time, le, less_equal
from differential.trace.cursor import FewKeys
from differential.tuning import TUNING


class AntijoinOp(JoinOp):
    """The rows of `left` whose key `right` (a set) does not hold, the columns picked
    by `projection` from `left`'s."""

    name = "antijoin"

    def step(self, time: Time) -> None:
        left, right = self.left, self.right
        delta = left.updates_at(time)
        if delta is not None:
            masked = self._masked(delta, time) if TUNING.antijoin_masks else None
            if masked is None:  # the reference: every row, less its pairs
                self.output.send(self._picked(delta))
                self._pairs_of(left, right, time, True, True)
            elif len(masked):
                self.output.send(masked)
        if right.has_delta(time):
            self._pairs_of(right, left, time, False, False)

    def send(self, pairs: Updates) -> None:
        self.output.send(pairs.negate())

    def _pairs_of(
        self, mine: Arranged, other: Arranged, time: Time, left_is_delta: bool, include: bool
    ) -> None:
        """`mine`'s changes at `time` joined with `other` (its changes too if `include`),
        sent negated (`send`)."""
        delta = mine.updates_at(time)
        assert delta is not None
        if self.lists_ok and len(delta) <= TUNING.few:
            found = self.join_few(delta, other, time, left_is_delta, include)
            if found is not None:
                self.send(found)
                return
        changes = mine.changes(time)
        assert changes is not None
        self.join_changes(*changes, other, time, left_is_delta, include)

    def _masked(self, delta: Updates, time: Time) -> Updates | None:
        """The rows of `delta` (the left side's changes at `time`), each times `1 -` the
        multiplicity the right side holds under its key at `time`: None where that
        side holds an entry under one of the keys at a time not `<= time`."""
        k = self.left.key_arity
        if self.lists_ok and len(delta) <= TUNING.few:
            rows = python_rows(delta.columns[:k], len(delta))
            asked = FewKeys(rows, small.key_hashes(rows, k == 1))  # type: ignore[arg-type]
            entries = self.right.batch_entries(asked, time, True, TUNING.few_pairs)
            if entries is not None:
                few = [0] * len(delta)
                for o, at, _, d in entries:
                    if not le(at, time):
                        return None
                    few[o] += d
                return self._scaled(delta, np.array(few, dtype=np.int64))
        changes = self.left.changes(time)
        assert changes is not None
        updates, hashes = changes
        owner, found = self.right.lookup(updates.columns[:k], hashes, time, True, [])
        if not len(owner):
            return self._picked(updates)
        now = np.asarray(time, dtype=np.int64).reshape(-1, 1)
        if not less_equal(found.times, now).all():
            return None
        held = np.zeros(len(updates), dtype=np.int64)
        np.add.at(held, owner, found.diffs)
        return self._scaled(updates, held)

    def _scaled(self, delta: Updates, held: npt.NDArray[np.int64]) -> Updates:
        """`delta`'s rows times `1 - held` (rows whose factor is 0 dropped), picked."""
        factor = 1 - held
        if not factor.any():
            return self._picked(delta.take(np.zeros(0, dtype=np.intp)))
        if (factor == 1).all():
            return self._picked(delta)
        keep = np.flatnonzero(factor)
        kept = delta.take(keep)
        return self._picked(Updates(kept.columns, kept.times, kept.diffs * factor[keep]))

    def _picked(self, delta: Updates) -> Updates:
        """The left side's rows as the output's columns."""
        return Updates(tuple(delta.columns[i] for i in self.projection), delta.times, delta.diffs)

    def describe(self) -> str:
        return f"antijoin({self.left.describe()}, {self.right.describe()})"
