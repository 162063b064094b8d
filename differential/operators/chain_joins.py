"""Fused rounds through joins with arrangements that do not change during them.

Layer: differential (operators). Imports `batch`, `small`, `time`, the arrange and
join operators and `trace`.

`a(x) :- b(x), c(y), d(y).` with `b(x + 1) :- a(x), x < n.` (Soufflé's
`independent_body3`) derives one fact per round through joins with `c` and `d`,
which the rounds never change. A `JoinStage` is such a join on Python rows, for
the fused rounds of `chain` (ADR 0046): each row a variable sends through it is
recorded for the join's own arrangement of that side (the dynamic one), at the
round's time, and its images are the row joined with the other (static) side's
entries under its key, each as many times as the entry's multiplicity, projected
as the join projects. The static side's matches are looked up once per key.

The stage applies while the static side holds nothing at a time later than the
rounds' first (`history_before`) and has no change at it, so every match is
visible at every round and the join's other term (the static side's changes
against the dynamic trace) is empty: the join's output is exactly these images.
At each hand-over the recorded rows are deferred into the dynamic arrangement, as
its own steps would have left them, so later epochs read the same trace.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable

import numpy as np

from differential import small
from differential.batch import Column, Updates, python_rows, python_times
from differential.operators.arrange import Arranged, ArrangeOp
from differential.operators.join import JoinOp
from differential.operators.linear import Row
from differential.time import Time, le
from differential.trace.cursor import FewKeys, columns_of


class StaticSideChanged(RuntimeError):
    """The static side of a fused join holds what the rounds cannot read as a set of
    rows visible at every round (an entry later than the rounds, or a negative
    multiplicity): a broken precondition, never expected in a checked program."""


class JoinStage:
    """A join whose `static` side does not change during the fused rounds, applied
    to the rows its `dynamic` side (an arrangement only this join reads) receives."""

    def __init__(self, join: JoinOp, dynamic: ArrangeOp, static: Arranged) -> None:
        self.join, self.dynamic, self.static = join, dynamic, static
        self.dynamic_left = join.left is dynamic
        self.k = dynamic.key_arity
        pick = list(join.projection)
        self.project: Callable[[tuple[object, ...]], Row] = (
            operator.itemgetter(*pick) if len(pick) > 1 else lambda row: tuple(row[j] for j in pick)
        )
        self.matches: dict[Row, list[tuple[object, ...]]] = {}
        self.rows: list[Row] = []
        self.iterations: list[int] = []
        self.time: Time = ()
        # Where its output goes: paths (of maps, maybe ending in a join) to the
        # relations' inputs, each with the relation's index (-1: the join routes).
        self.onward: list[tuple[list[object], int]] = []

    def ready(self, time: Time) -> bool:
        """Whether the stage applies to rounds from `time`: both sides quiet, every
        entry of each at a time `<= time` (sealing the dynamic side first)."""
        dynamic, static = self.dynamic, self.static
        if dynamic.waiting_only(time) is None or static.has_delta(time):
            return False
        for side in (dynamic, static):  # (as their own next steps would first)
            if isinstance(side, ArrangeOp):
                side.seal()
        if not (dynamic.history_before(time) and static.history_before(time)):
            return False
        self.time = time
        self.matches.clear()  # (in place: compiled routes hold it, `chain_routes`)
        return True

    def join_rows(self, rows: list[Row], iteration: int) -> list[Row]:
        """The images of `rows` (each of multiplicity one, sent to the dynamic side at
        `iteration`, where they are recorded) through the join."""
        if not rows:
            return []
        self.rows.extend(rows)
        self.iterations.extend([iteration] * len(rows))
        k, project, matches, left = self.k, self.project, self.matches, self.dynamic_left
        out: list[Row] = []
        for row in rows:
            key = row[:k]
            found = matches.get(key)
            if found is None:
                found = matches[key] = self.lookup(key)
            if not found:
                continue
            if len(found) == 1:  # (most keys of a lookup: one match)
                (values,) = found
                out.append(project((*row, *values) if left else (*key, *values, *row[k:])))
            elif left:
                out.extend([project((*row, *values)) for values in found])
            else:
                out.extend([project((*key, *values, *row[k:])) for values in found])
        return out

    def lookup(self, key: Row) -> list[tuple[object, ...]]:
        """The static side's values under `key`, each repeated by its multiplicity."""
        time, static, k = self.time, self.static, self.k
        counts: dict[tuple[object, ...], int] = {}
        if k == 0:
            found = static.entries(time, True)
            rows = python_rows(found.columns, len(found))
            times = python_times(found.times)
            for values, at, diff in zip(rows, times, found.diffs.tolist(), strict=True):
                _visible(at, time)
                counts[values] = counts.get(values, 0) + diff
        else:
            asked = FewKeys([key], small.key_hashes([key], k == 1))  # type: ignore[list-item]
            hits = static.batch_entries(asked, time, True, 1 << 62)
            assert hits is not None  # (no limit)
            for _, at, values, diff in hits:
                _visible(at, time)
                counts[values] = counts.get(values, 0) + diff
        if any(n < 0 for n in counts.values()):
            raise StaticSideChanged("a negative multiplicity")
        return [values for values, n in counts.items() for _ in range(n)]

    def hand_over(self, prefix: Time) -> None:
        """Defer the rows recorded since the last hand-over into the dynamic side."""
        if not self.rows:
            return
        iterations = np.array(self.iterations, dtype=np.int64)
        outer = np.repeat(np.array(prefix, dtype=np.int64).reshape(-1, 1), len(iterations), 1)
        times = np.vstack([outer, iterations[None, :]])
        columns = row_columns(self.rows, self.dynamic.dtypes)
        updates = Updates(columns, times, np.ones(len(self.rows), dtype=np.int64))
        first, last = (*prefix, min(self.iterations)), (*prefix, max(self.iterations))
        self.dynamic.defer(updates, first, last)
        self.rows.clear()  # (in place: compiled routes hold them)
        self.iterations.clear()


def row_columns(rows: list[Row], dtypes: tuple[np.dtype, ...]) -> tuple[Column, ...]:
    """Rows (at least one) as typed columns: one conversion when all have one type."""
    if any(d != dtypes[0] for d in dtypes):
        return tuple(columns_of(rows, dtypes))
    n, k = len(rows), len(dtypes)
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtypes[0], count=n * k)
    return tuple(flat[i::k].copy() for i in range(k)) if k > 1 else (flat,)


def _visible(at: Time, time: Time) -> None:
    if not le(at, time):
        raise StaticSideChanged(f"an entry at {at}, after the rounds' {time}")
