"""Fused rounds: an iteration scope's few-row rounds run as one loop on Python rows.

Layer: differential (operators). Imports `dataflow`, `batch`, `small`, `time`, the
arrange, reduce and linear operators and `trace`.

A recursion like `c(x + 1) :- c(x), x < n.` derives one fact per round for a
million rounds. Each round the scheduler would find the next time, step the
distinct's arrangement and the distinct, build an `Updates` per operator and
evaluate each expression with numpy on one-row arrays: ~190 Python calls for one
row. Fused rounds do the same work on Python tuples (ADR 0029):

- the scope has a `distinct` (the recursive relation) whose input is arranged by
  all its integer columns, whose output feeds only its variable (`Feedback`) and
  the parent scope (`Leave`), and every path from the variable to the distinct's
  input is a chain of maps and filters with a row form (`linear.Edge.rows`) and
  concatenations;
- the rounds from a time apply when that time is the scope's only work (the
  arrangement's queue holds it alone, with at most `small.FEW` insertions, and
  no other operator has work) and the distinct is in its growing state with every
  input at a time `<=` it: the conditions of `ReduceOp._monotone`;
- each round keeps the rows whose key is neither in the distinct's key set (a
  read-only probe) nor new in these rounds, maps them through the paths, and goes
  on one iteration later while between one and `small.FEW` rows come back;
- every `_HANDOVER` new keys, and at the end, the rounds are handed to the
  operators as their own steps would have left them: the input deferred in the
  arrangement, the new keys admitted to the key set, the output recorded in the
  distinct and sent to the parent scope (which runs only once this scope is
  quiet); rows left over go to the arrangement's queue for the scheduler.

The operators hold the same updates as after their own rounds (batched
differently), so later epochs, retractions included, read the same state.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from differential import small
from differential.batch import Column, Diffs, Updates, python_rows
from differential.dataflow import Receiver, Scope, Stream, check_budget
from differential.operators.arrange import ArrangeOp
from differential.operators.linear import Edge, Feedback, Leave, Row, RowMap, same
from differential.operators.reduce import ReduceOp, distinct
from differential.time import Time, Times, column
from differential.trace.batch import key_hash
from differential.trace.cursor import columns_of

Fused = Callable[[Time], bool]


Path = list[RowMap]  # the row forms along one way from the variable to the distinct
_HANDOVER = 4096  # new keys at which the rounds so far are handed to the operators


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
        self.hash_of = small.row_hash(arrange.key_arity == 1, arrange.dtypes[0].kind == "i")

    def run(self, time: Time) -> bool:
        """Run the rounds from `time` fused, if it applies (else False, nothing done)."""
        start = self._start(time)
        if start is None:
            return False
        rows, diffs = start
        rounds = _Rounds(time, diffs)
        while True:
            check_budget()
            rows = self._rounds(rows, rounds)
            if not rows or len(rows) > small.FEW:
                break
            self._hand_over(rounds)  # `_HANDOVER` new keys: bound what waits
            rounds = _Rounds(rounds.next_time(), None)
        self._hand_over(rounds)
        if rows:  # too many for rows: the scheduler takes them from here
            ones = np.ones(len(rows), dtype=np.int64)
            times = column(rounds.next_time(), len(rows))
            self.arrange.queue.push(Updates(_columns(rows, self.arrange.dtypes), times, ones))
        return True

    def _rounds(self, rows: list[Row], rounds: _Rounds) -> list[Row]:
        """Rounds from `rows`, recorded in `rounds`, until none come back, too many
        do, or `_HANDOVER` keys are new: the rows of the round after the last."""
        seen = self.reduce.seen
        assert seen is not None
        holds, hash_of, admitted = seen.holds, self.hash_of, rounds.admitted
        inputs, outputs = rounds.inputs, rounds.outputs
        input_counts, output_counts = rounds.input_counts, rounds.output_counts
        while len(outputs) < _HANDOVER:
            fresh = []
            for row in rows:  # the distinct's growing step: keys not in its output yet
                if row not in admitted and not holds(hash_of(row), row):  # type: ignore[arg-type]
                    admitted.add(row)
                    fresh.append(row)
            inputs += rows
            input_counts.append(len(rows))
            outputs += fresh
            output_counts.append(len(fresh))
            rows = self._images(fresh)
            if not rows or len(rows) > small.FEW:
                break
        return rows

    def _images(self, rows: list[Row]) -> list[Row]:
        """What `rows` of the distinct's output send to its input one round later."""
        out: list[Row] = []
        for row in rows:
            for path in self.paths:
                image: Row | None = row
                for stage in path:
                    image = stage(image)  # type: ignore[arg-type]  # None breaks out
                    if image is None:
                        break
                else:
                    out.append(image)  # type: ignore[arg-type]
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

    def _hand_over(self, rounds: _Rounds) -> None:
        """Give the operators the rounds' updates, as their own steps would have: the
        input deferred in the arrangement, the new keys admitted to the distinct's key
        set and its output recorded, and sent to the parent scope."""
        dtypes = self.arrange.dtypes
        self.scope.steps += len(rounds.input_counts)
        columns = _columns(rounds.inputs, dtypes)
        times = rounds.times(True)
        self.arrange.defer(
            Updates(columns, times, rounds.diffs()), rounds.start, rounds.last_time()
        )
        if not rounds.outputs:
            return
        if len(rounds.outputs) < len(rounds.inputs):  # else every input row was new
            columns, times = _columns(rounds.outputs, dtypes), rounds.times(False)
        result = Updates(columns, times, np.ones(len(rounds.outputs), dtype=np.int64))
        seen = self.reduce.seen
        assert seen is not None
        if seen.identity:
            seen.admit_absent(key_hash(result.columns), result.columns)
        else:
            added = seen.admit(key_hash(result.columns), result.columns)
            assert len(added) == len(result), "fused rounds admit each new key once"
        self.reduce.grown(result)
        for leave in self.leaves:
            leave(result)


class _Rounds:
    """Consecutive rounds from `start`: their input rows, the new keys among them,
    and how many of each per round, until they are handed over as `Updates`."""

    def __init__(self, start: Time, first_diffs: list[int] | None) -> None:
        self.start = start
        self.first_diffs = first_diffs  # of the first round's input (None: all 1)
        self.inputs: list[Row] = []
        self.outputs: list[Row] = []
        self.input_counts: list[int] = []
        self.output_counts: list[int] = []
        self.admitted: set[Row] = set()  # `outputs`, for membership

    def iteration(self) -> int:
        """The iteration after the last round."""
        return self.start[-1] + len(self.input_counts)

    def next_time(self) -> Time:
        """The time of the round after the last one."""
        return (*self.start[:-1], self.iteration())

    def last_time(self) -> Time:
        return (*self.start[:-1], self.iteration() - 1)

    def diffs(self) -> Diffs:
        diffs = np.ones(len(self.inputs), dtype=np.int64)
        if self.first_diffs is not None:
            diffs[: len(self.first_diffs)] = self.first_diffs
        return diffs

    def times(self, inputs: bool) -> Times:
        """The time column of the inputs, or of the outputs."""
        counts = self.input_counts if inputs else self.output_counts
        iterations = np.repeat(np.arange(len(counts), dtype=np.int64), counts) + self.start[-1]
        prefix = np.array(self.start[:-1], dtype=np.int64).reshape(-1, 1)
        return np.vstack([np.repeat(prefix, len(iterations), axis=1), iterations[None, :]])


def _columns(rows: list[Row], dtypes: tuple[np.dtype, ...]) -> tuple[Column, ...]:
    """Rows (at least one) as typed columns: one conversion when all have one type."""
    if any(d != dtypes[0] for d in dtypes):
        return tuple(columns_of(rows, dtypes))
    n, k = len(rows), len(dtypes)
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtypes[0], count=n * k)
    return tuple(flat[i::k].copy() for i in range(k)) if k > 1 else (flat,)


def fused_rounds(scope: Scope) -> Fused | None:
    """The fused rounds of an iteration scope, if it has a chain (`Chain`)."""
    for op in scope.operators:
        chain = _chain_at(scope, op)
        if chain is not None:
            return chain.run
    return None


def _chain_at(scope: Scope, op: object) -> Chain | None:
    """The chain whose distinct is `op`, if it is one (integer columns: `lists_ok`)."""
    if not (isinstance(op, ReduceOp) and op.reducer is distinct and op.lists_ok):
        return None
    arrange = op.source
    if not isinstance(arrange, ArrangeOp) or len(arrange.dtypes) != arrange.key_arity:
        return None
    feedback = [r for r in op.output.receivers if isinstance(r, Feedback)]
    leaves: list[Edge] = [r for r in op.output.receivers if isinstance(r, Leave)]
    if len(feedback) != 1 or len(feedback) + len(leaves) != len(op.output.receivers):
        return None
    paths = _paths_into(feedback[0].out, arrange.queue.push)
    if paths is None or not arrange.key_arity:
        return None
    return Chain(scope, op, arrange, paths, leaves)


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
    """A receiver's row form (`same` for a concatenation) and output stream; None
    when it has no row form (a stateful operator, a map without one, a back edge)."""
    if isinstance(receiver, Edge):
        return None if receiver.rows is None else (receiver.rows, receiver.out)
    concatenated = getattr(receiver, "__self__", None)  # `concat` connects `Stream.send`
    if isinstance(concatenated, Stream) and receiver == concatenated.send:
        return same, concatenated
    return None
