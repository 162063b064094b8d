"""Fused rounds in later epochs: a chain's few-row rounds where history is older.

Layer: differential (operators). Imports `dataflow`, `batch`, `time`, `trace` and
`fused` (the relations, driven through the operators' public protocols); `chain`
passes its relations in.

ADR 0029's fused rounds need every distinct growing: all its input history at
times `<=` the rounds'. A later epoch of a live dataflow breaks that at once: the
first epoch's key derived at `(1, 500)` is not `<=` `(2, 3)`. Yet the product
order only needs corrections (`ReduceOp` schedules `t ⊔ s`) for a key whose own
history holds a time `s` not `<=` the time `t` it changes at. These rounds take
that condition key by key (ADR 0034):

- a key is read once per run, the first time a round reaches it: its input
  history (the distinct's arrangement) and its output (the distinct's trace),
  summed, if every entry is at a time `<=` that round's; else the rounds stop
  before that round, and the scheduler takes its rows from there;
- each round then does what the distinct's step would: per key changed (rows
  carry their multiplicity, retractions included), the input count at the
  round's time against the output present, and the difference out, through the
  paths, as the next round's rows. Every later round's time is `>=` the first
  read's, so a key read once stays readable, and nothing is scheduled;
- the rounds are handed to the operators every `TUNING.later_handover` changed keys and at
  the end, as their own steps would have left them: the input deferred in the
  arrangement, the output inserted in the distinct's trace and sent to the
  parent scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from differential.batch import Column, Updates
from differential.dataflow import Scope, check_budget
from differential.operators.fused import Relation
from differential.operators.linear import Row, RowMap
from differential.time import Time, at_or_before
from differential.trace.cursor import Entry, FewKeys, columns_of
from differential.tuning import TUNING

Counts = dict[Row, int]


def run(scope: Scope, relations: Sequence[Relation], time: Time, rows: list[Counts]) -> bool:
    """Fused rounds from `time` (the scope's only work; `rows`: each relation's
    first input, consolidated) when each key they reach has no history beyond
    the round that reaches it. False: the first round's keys have such history,
    or a distinct has keys scheduled at `time`; nothing done then but what the
    distincts' own steps at `time` do first (the arrangements sealed, the trace
    settled and read from then on). The rounds stop before the first time a
    distinct has keys scheduled at: the scheduler's corrections."""
    prefix, iteration = time[:-1], time[-1]
    until = _first_scheduled(relations, prefix)
    if until is not None and until <= iteration:
        return False
    for relation in relations:
        relation.arrange.seal()
        relation.reduce.stop_growing()  # as its step does before reading the trace
    keys = [_Keys(r) for r in relations]
    if not _read(keys, rows, time):
        return False
    for relation in relations:
        relation.arrange.take_waiting(time)
    while True:
        check_budget()
        rounds = [_Rounds(k, prefix) for k in keys]
        rows, iteration = _rounds(relations, rounds, rows, prefix, iteration, until)
        scope.steps += rounds[0].count
        for relation, record in zip(relations, rounds, strict=True):
            record.hand_over(relation)
        if iteration == until or not _going(rows) or not _read(keys, rows, (*prefix, iteration)):
            break
    if _going(rows) is None:
        return True
    for relation, left in zip(relations, rows, strict=True):
        live = [(row, n) for row, n in left.items() if n]
        if live:  # too many, or a key with later history: the scheduler's from here
            arrange = relation.arrange
            columns = tuple(columns_of([row for row, _ in live], arrange.dtypes))
            times = _times(prefix, [iteration] * len(live))
            diffs = np.array([n for _, n in live], dtype=np.int64)
            arrange.enqueue(Updates(columns, times, diffs))
    return True


def _first_scheduled(relations: Sequence[Relation], prefix: Time) -> int | None:
    """The least iteration of `prefix` (the scope's run) at which a distinct has
    keys scheduled. Times of other prefixes are not this run's: the scheduler
    would not visit them before the rounds' times either."""
    firsts = [r.reduce.first_scheduled(prefix) for r in relations]
    return min((f for f in firsts if f is not None), default=None)


def _read(keys: list[_Keys], rows: list[Counts], time: Time) -> bool:
    """Whether every relation's keys in `rows` are readable at `time` (`_Keys.read`)."""
    return all(k.read(rs, time) for k, rs in zip(keys, rows, strict=True))


def _going(rows: list[Counts]) -> bool | None:
    """Whether another fused round may follow (1 to `TUNING.few` rows); None: no rows."""
    count = sum(1 for rs in rows for n in rs.values() if n)
    return None if not count else count <= TUNING.few


def _rounds(
    relations: Sequence[Relation],
    rounds: list[_Rounds],
    rows: list[Counts],
    prefix: Time,
    iteration: int,
    until: int | None,
) -> tuple[list[Counts], int]:
    """Rounds from `rows` at `iteration`, recorded in `rounds`, while 1 to `TUNING.few`
    rows come back, their keys are readable, fewer than `TUNING.later_handover` keys changed
    and the iteration is before `until`: the rows of the round after the last, and
    its iteration."""
    changed = 0
    while True:
        images: list[Counts] = [{} for _ in relations]
        for relation, record, counts in zip(relations, rounds, rows):  # noqa: B905
            paths = cast(list[tuple[list[RowMap], int]], relation.paths)  # (no joins here)
            changed += record.step(counts, iteration, paths, images)
        rows, iteration = images, iteration + 1
        if changed >= TUNING.later_handover or iteration == until or not _going(rows):
            return rows, iteration
        if not _read([r.keys for r in rounds], rows, (*prefix, iteration)):
            return rows, iteration


class _Keys:
    """Per key a run reached: its input count and its output present, as of the
    latest round (every entry read at a time `<=` the round that first reached it)."""

    def __init__(self, relation: Relation) -> None:
        self.relation = relation
        self.counts: dict[Row, list[int]] = {}

    def read(self, rows: Counts, time: Time) -> bool:
        """Read the keys of `rows` not read yet; False if one has history at a time
        not `<= time` (none is recorded then)."""
        new = [row for row in rows if row not in self.counts]
        if not new:
            return True
        relation = self.relation
        asked = FewKeys(new, [relation.hash_of(row) for row in new])  # type: ignore[arg-type]
        inputs: list[Entry] = []
        outputs: list[Entry] = []
        relation.arrange.entries_of(asked, inputs)
        relation.reduce.output_entries(asked, outputs)
        visible = at_or_before(time)
        if not all(visible(t) for _, t, _, _ in inputs) or not all(
            visible(t) for _, t, _, _ in outputs
        ):
            return False
        counts = [[0, 0] for _ in new]
        for o, _, _, d in inputs:
            counts[o][0] += d
        for o, _, _, d in outputs:
            counts[o][1] += d
        self.counts.update(zip(new, counts, strict=True))
        return True


class _Rounds:
    """One relation's rounds since the last hand-over: its input and output
    updates as Python rows, iterations and multiplicities."""

    def __init__(self, keys: _Keys, prefix: Time) -> None:
        self.keys = keys
        self.prefix = prefix
        self.count = 0  # rounds
        self.inputs: tuple[list[Row], list[int], list[int]] = ([], [], [])
        self.outputs: tuple[list[Row], list[int], list[int]] = ([], [], [])

    def step(
        self,
        rows: Counts,
        iteration: int,
        paths: list[tuple[list[RowMap], int]],
        images: list[Counts],
    ) -> int:
        """The distinct's step at `iteration` for `rows` (each key read): its input
        and output recorded, the output's images added to `images`; how many keys
        changed."""
        self.count += 1
        counts = self.keys.counts
        in_rows, in_iterations, in_diffs = self.inputs
        out_rows, out_iterations, out_diffs = self.outputs
        changed = 0
        for row, n in rows.items():
            if not n:
                continue
            in_rows.append(row)
            in_iterations.append(iteration)
            in_diffs.append(n)
            held = counts[row]
            held[0] += n
            change = (held[0] > 0) - held[1]
            if not change:
                continue
            held[1] += change
            changed += 1
            out_rows.append(row)
            out_iterations.append(iteration)
            out_diffs.append(change)
            for path, target in paths:
                image: Row | None = row
                for stage in path:
                    image = stage(image)  # type: ignore[arg-type]  # None: dropped
                    if image is None:
                        break
                else:
                    into = images[target]
                    into[image] = into.get(image, 0) + change  # type: ignore[index, arg-type]
        return changed

    def hand_over(self, relation: Relation) -> None:
        """Give the operators these rounds' updates, as their own steps would have."""
        rows, iterations, diffs = self.inputs
        if not rows:
            return
        arrange, prefix = relation.arrange, self.prefix
        first, last = (*prefix, iterations[0]), (*prefix, iterations[-1])
        arrange.defer(_updates(rows, iterations, diffs, prefix, arrange.dtypes), first, last)
        rows, iterations, diffs = self.outputs
        if not rows:
            return
        result = _updates(rows, iterations, diffs, prefix, arrange.dtypes)
        relation.reduce.record(result, (*prefix, iterations[0]), (*prefix, iterations[-1]))
        for leave in relation.leaves:
            leave(result)


def _updates(
    rows: list[Row], iterations: list[int], diffs: list[int], prefix: Time, dtypes: Sequence
) -> Updates:
    columns: tuple[Column, ...] = tuple(columns_of(rows, dtypes))
    return Updates(columns, _times(prefix, iterations), np.array(diffs, dtype=np.int64))


def _times(prefix: Time, iterations: list[int]) -> np.ndarray:
    """The time column of updates at `(*prefix, i)` for each `i` of `iterations`."""
    times = np.empty((len(prefix) + 1, len(iterations)), dtype=np.int64)
    times[:-1] = np.array(prefix, dtype=np.int64).reshape(-1, 1)
    times[-1] = iterations
    return times
