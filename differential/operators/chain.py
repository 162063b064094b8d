"""Fused rounds: an iteration scope's few-row rounds run as one loop on Python rows.

Layer: differential (operators). Imports `dataflow`, `batch`, `small`, the
arrange, reduce and linear operators and `trace.cursor`.

A recursion like `c(x + 1) :- c(x), x < n.` derives one fact per round for a
million rounds. Each round the scheduler would find the next time, step the
distinct's arrangement and the distinct, build an `Updates` per operator and
evaluate each expression with numpy on one-row arrays: ~190 Python calls for one
row. Fused rounds do the same work on Python tuples (ADR 0029):

- the scope has one `distinct` (the recursive relation) whose input is arranged
  by all its columns, whose output feeds only its variable (`Feedback`) and the
  parent scope (`Leave`), and every path from the variable to the distinct's
  input is a chain of maps and filters with a row form (`linear.Edge.rows`) and
  concatenations;
- a round applies when it is the scope's only work: the arrangement's queue holds
  one time, nothing else is pending, and the distinct is in its growing state (a
  key set answers membership, every input so far is an insertion at a time
  `<=` this one), exactly `ReduceOp._monotone`;
- then each round admits the round's rows to the key set, maps the new ones
  through the chain, and goes on one iteration later while at most `small.FEW`
  rows come back. At the end the rounds' input is deferred in the arrangement
  and their output recorded in the distinct as one `Updates` each, the output
  sent to the parent scope, and rows left over queued for the scheduler.

Nothing else differs from the operators' own rounds: the same keys admitted,
the same updates held (only batched differently), so later epochs, retractions
included, read the same state.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from differential import small
from differential.batch import Updates, integral, python_rows
from differential.dataflow import Receiver, Scope, Stream, check_budget
from differential.operators.arrange import ArrangeOp
from differential.operators.linear import Edge, Feedback, Leave, Row, RowMap, same
from differential.operators.reduce import ReduceOp, distinct
from differential.time import Time
from differential.trace.cursor import columns_of

Fused = Callable[[Time], bool]


Path = list[RowMap]  # the row forms along one way from the variable to the distinct
_BUDGET_ROUNDS = 1024  # rounds between two checks of the time budget


class Chain:
    """A distinct fed back to itself through linear edges with row forms."""

    def __init__(
        self,
        scope: Scope,
        reduce: ReduceOp,
        arrange: ArrangeOp,
        paths: list[Path],
        leaves: list[Edge],
    ) -> None:
        self.scope = scope
        self.reduce = reduce
        self.arrange = arrange
        self.paths = paths
        self.leaves = leaves
        self.others = [op for op in scope.operators if op is not reduce and op is not arrange]
        self.identity = arrange.key_arity == 1

    def run(self, time: Time) -> bool:
        """Run the rounds from `time` fused, if it applies (else False, nothing done)."""
        start = self._start(time)
        if start is None:
            return False
        rows, diffs = start
        seen = self.reduce.seen
        assert seen is not None
        inputs, outputs = _Rounds(time), _Rounds(time)
        while True:
            if not len(inputs.counts) % _BUDGET_ROUNDS:
                check_budget()
            inputs.add(rows)
            added = seen.admit_rows(small.key_hashes(rows, self.identity), rows)  # type: ignore[arg-type]
            fresh = rows if len(added) == len(rows) else [rows[i] for i in added]
            outputs.add(fresh)
            rows = self._images(fresh)
            if not rows or len(rows) > small.FEW:
                break
        self.scope.steps += len(inputs.counts)
        self._flush(inputs, outputs, diffs)
        if rows:  # too many for rows: the scheduler takes them from here
            later = inputs.time(len(inputs.counts))
            times, ones = [later] * len(rows), [1] * len(rows)
            self.arrange.queue.push(_updates(rows, times, ones, self.arrange.dtypes))
        return True

    def _images(self, rows: list[Row]) -> list[Row]:
        """What `rows` of the distinct's output send to its input one round later."""
        out = []
        for row in rows:
            for path in self.paths:
                image: Row | None = row
                for stage in path:
                    image = stage(image)
                    if image is None:
                        break
                else:
                    out.append(image)
        return out
    def _start(self, time: Time) -> tuple[list[Row], list[int]] | None:
        """The first round's rows and diffs, when the fused rounds apply at `time`."""
        arrange, reduce = self.arrange, self.reduce
        queue = arrange.queue.buckets
        if reduce.seen is None or reduce.scheduled or len(queue) != 1 or time not in queue:
            return None
        if any(True for op in self.others for _ in op.pending(time[:-1])):
            return None
        parts = queue[time]
        if sum(len(p) for p in parts) > small.FEW:
            return None
        rows: list[Row] = []
        diffs: list[int] = []
        for part in parts:
            rows.extend(python_rows(part.columns, len(part)))
            diffs.extend(part.diffs.tolist())
        arrange.seal()
        if min(diffs) <= 0 or not arrange.history_before(time):
            return None
        del queue[time]
        return rows, diffs

    def _flush(self, inputs: _Rounds, outputs: _Rounds, first_diffs: list[int]) -> None:
        """Hand the rounds' updates to the operators, as their own rounds would have."""
        dtypes = self.arrange.dtypes
        diffs = first_diffs + [1] * (len(inputs.rows) - len(first_diffs))
        self.arrange.defer(inputs.updates(dtypes, diffs), inputs.start, inputs.last())
        if outputs.rows:
            result = outputs.updates(dtypes, [1] * len(outputs.rows))
            self.reduce.grown(result)
            for leave in self.leaves:
                leave(result)


class _Rounds:
    """The rows of consecutive rounds from `start`, built into one `Updates` at the end."""

    def __init__(self, start: Time) -> None:
        self.start = start
        self.rows: list[Row] = []
        self.counts: list[int] = []  # rows per round

    def add(self, rows: list[Row]) -> None:
        self.rows += rows
        self.counts.append(len(rows))

    def time(self, round: int) -> Time:
        return (*self.start[:-1], self.start[-1] + round)

    def last(self) -> Time:
        """The time of the last round with rows."""
        rounds = [r for r, n in enumerate(self.counts) if n]
        return self.time(rounds[-1])

    def updates(self, dtypes: tuple[np.dtype, ...], diffs: list[int]) -> Updates:
        columns = tuple(columns_of(self.rows, dtypes))
        iterations = np.repeat(np.arange(len(self.counts)), self.counts) + self.start[-1]
        prefix = np.array(self.start[:-1], dtype=np.int64).reshape(-1, 1)
        times = np.vstack([np.repeat(prefix, len(self.rows), axis=1), iterations[None, :]])
        return Updates(columns, times.astype(np.int64), np.array(diffs, dtype=np.int64))


def _updates(
    rows: list[Row], times: list[Time], diffs: list[int], dtypes: tuple[np.dtype, ...]
) -> Updates:
    """Python rows, times and diffs as `Updates` (at least one row)."""
    columns = tuple(columns_of(rows, dtypes))
    time_column = np.array(times, dtype=np.int64).T.copy()
    return Updates(columns, time_column, np.array(diffs, dtype=np.int64))


def fused_rounds(scope: Scope) -> Fused | None:
    """The fused rounds of an iteration scope, if it has a chain (`Chain`)."""
    for op in scope.operators:
        chain = _chain_at(scope, op)
        if chain is not None:
            return chain.run
    return None


def _chain_at(scope: Scope, op: object) -> Chain | None:
    if not (isinstance(op, ReduceOp) and op.reducer is distinct and op.lists_ok):
        return None
    arrange = op.source
    if not isinstance(arrange, ArrangeOp) or len(arrange.dtypes) != arrange.key_arity:
        return None
    feedback = [r for r in op.output.receivers if isinstance(r, Feedback)]
    leaves = [r for r in op.output.receivers if isinstance(r, Leave)]
    if len(feedback) != 1 or len(feedback) + len(leaves) != len(op.output.receivers):
        return None
    paths = _paths_into(feedback[0].out, arrange.queue.push)
    if paths is None or not arrange.key_arity or not integral_dtypes(arrange.dtypes):
        return None
    return Chain(scope, op, arrange, paths, list(leaves))


def integral_dtypes(dtypes: tuple[np.dtype, ...]) -> bool:
    return integral([np.empty(0, dtype=d) for d in dtypes])


def _paths_into(stream: Stream, target: Receiver) -> list[Path] | None:
    """The ways rows sent on `stream` reach `target`, each the row forms met on it
    (None: a receiver on the way has no row form)."""
    paths: list[Path] = []
    for receiver in stream.receivers:
        if receiver == target:
            paths.append([])
            continue
        onward = _onward(receiver)
        if onward is None:
            return None
        stage, out = onward
        rest = _paths_into(out, target)
        if rest is None:
            return None
        paths.extend([stage, *path] if stage is not same else path for path in rest)
    return paths


def _onward(receiver: Receiver) -> tuple[RowMap, Stream] | None:
    """A receiver's row form (None: it passes rows unchanged) and output stream."""
    if isinstance(receiver, Edge):
        if receiver.rows is None or isinstance(receiver, Leave | Feedback):
            return None
        return receiver.rows, receiver.out
    concatenated = getattr(receiver, "__self__", None)  # `concat` connects `Stream.send`
    if isinstance(concatenated, Stream) and receiver == concatenated.send:
        return same, concatenated
    return None
