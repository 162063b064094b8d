"""Fused rounds: an iteration scope's few-row rounds run as one loop on Python rows.

Layer: differential (operators). Imports `dataflow`, `batch`, `small`, `time`, the
arrange, reduce and linear operators and `trace`.

A recursion like `c(x + 1) :- c(x), x < n.` derives one fact per round for a
million rounds. Each round the scheduler would find the next time, step the
distinct's arrangement and the distinct, build an `Updates` per operator and
evaluate each expression with numpy on one-row arrays: ~190 Python calls for one
row. Fused rounds do the same work on Python tuples (ADR 0029):

- each recursive relation of the scope (one for a counter, two for
  `b(x + 1) :- a(x)` with `a(x) :- b(x)`) is a `distinct` with its input arranged
  by all its integer columns and its output fed only to its variable (`Feedback`)
  and the parent scope (`Leave`), and every path from a variable to a distinct's
  input is a chain of maps and filters with a row form (`linear.Edge.rows`) and
  concatenations, read by nothing else;
- the rounds from a time apply when that time is the scope's only work (the
  arrangements' queues hold only it, at most `TUNING.few` insertions in all, and
  no other operator has work) and every distinct is in its growing state with all
  its input at times `<=` it: the conditions of the distinct's growing tactic (`reduce_growing`);
- each round keeps, per relation, the rows whose key is neither in its distinct's
  key set (a read-only probe) nor new in these rounds, maps them through the
  paths, and goes on one iteration later while 1 to `TUNING.few` rows come back;
- every `TUNING.handover` new keys, and at the end, the rounds are handed to the
  operators as their own steps would have left them: the input deferred in the
  arrangement, the new keys admitted to the key set, the output recorded in the
  distinct and sent to the parent scope (which runs only once this scope is
  quiet); rows left over go to the arrangements' queues for the scheduler.

The operators hold the same updates as after their own rounds (batched
differently), so later epochs, retractions included, read the same state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import cast

import numpy as np

from differential.batch import Diffs, Updates, python_rows
from differential.dataflow import Operator, Receiver, Scope, Stream, check_budget
from differential.operators import later_rounds
from differential.operators.arrange import ArrangeOp
from differential.operators.chain_joins import JoinStage, row_columns
from differential.operators.chain_routes import Route, compile_route
from differential.operators.fused import Path, Relation, Stage
from differential.operators.join import JoinOp
from differential.operators.linear import Edge, Feedback, Leave, Row, RowMap, same
from differential.operators.reduce import ReduceOp, distinct
from differential.time import Time, Times, column
from differential.tuning import TUNING

Fused = Callable[[Time], bool]


class Chain:
    """Distincts fed back to themselves (and each other) through linear edges with
    row forms: the recursive relations of one iteration scope."""

    def __init__(self, scope: Scope, relations: list[Relation], joins: list[JoinStage]) -> None:
        self.scope = scope
        self.relations = relations
        self.joins = joins  # on the paths: joins with sides the rounds do not change
        own = {id(op) for r in relations for op in (r.reduce, r.arrange)}
        own |= {id(join.dynamic) for join in joins}  # (its queue: `_start`)
        self.others = [op for op in scope.operators if id(op) not in own]

    def run(self, time: Time) -> bool:
        """Run the rounds from `time` fused, if it applies (else False: nothing done
        but sealing arrangements, which their own next step does first anyway)."""
        parts = self._quiet(time)
        if parts is None:
            return False
        start = self._start(time, parts)
        if start is None and self.joins:  # (later rounds follow maps and filters only)
            return False
        if start is None:  # history beyond `time`, or retractions: key by key
            counts = [_counts(p) for p in parts]
            return later_rounds.run(self.scope, self.relations, time, counts)
        rows, diffs = start
        # Per relation, every key of its key set as Python rows, while they are few
        # enough (`TUNING.fused_seen`): membership is then a set's alone, no probe.
        seen = [r.reduce.held(TUNING.few) for r in self.relations]
        rounds = [_Rounds(time, d, s) for d, s in zip(diffs, seen, strict=True)]
        routes: list[Route] | None = None  # the generic walk until the run is long
        while True:
            check_budget()
            many = len(rounds) > 1
            rows = (self._rounds if many else self._rounds_of_one)(rows, rounds, routes)
            if not 0 < sum(map(len, rows)) <= TUNING.few:
                break
            self._hand_over(rounds)  # `TUNING.handover` new keys: bound what waits
            if routes is None:
                routes = [compile_route(r.paths) for r in self.relations]
            seen = [None if s is None or len(s) > TUNING.fused_seen else s for s in seen]
            rounds = [_Rounds(rounds[0].next_time(), None, s) for s in seen]
        self._hand_over(rounds)
        later = rounds[0].next_time()
        for relation, left in zip(self.relations, rows, strict=True):
            if left:  # too many for rows: the scheduler takes them from here
                ones = np.ones(len(left), dtype=np.int64)
                arrange = relation.arrange
                arrange.enqueue(
                    Updates(row_columns(left, arrange.dtypes), column(later, len(left)), ones)
                )
        return True

    def _rounds(
        self, inputs: list[list[Row]], rounds: list[_Rounds], routes: list[Route] | None
    ) -> list[list[Row]]:
        """Rounds from `inputs` (rows per relation), recorded in `rounds`, until none
        come back, too many do, or `TUNING.handover` keys are new: the rows of the round
        after the last. A relation without rows in a round costs nothing there (in
        mutual recursion most rounds have rows in one relation only). `routes`: the
        relations' compiled routes (`chain_routes`), else the generic walk."""
        walks = routes or [_walk(r.paths) for r in self.relations]
        steps = [
            (_admitter(r, record), walk)
            for r, record, walk in zip(self.relations, rounds, walks, strict=True)
        ]
        now, new, few = rounds[0].end, 0, TUNING.few
        while new < TUNING.handover:
            images: list[list[Row]] = [[] for _ in steps]
            count = 0
            for (admit, route), rows in zip(steps, inputs):  # noqa: B905 (equal lengths)
                if not rows or not (fresh := admit(rows, now)):
                    continue
                new += len(fresh)  # each new row one round later, at joins too
                count += route(fresh, images, now + 1)
            now += 1
            inputs = images
            if not 0 < count <= few:
                break
        for record in rounds:
            record.end = now
        return inputs

    def _rounds_of_one(
        self, inputs: list[list[Row]], rounds: list[_Rounds], routes: list[Route] | None
    ) -> list[list[Row]]:
        """`_rounds` for a scope of one recursive relation (a counter): the same
        steps without the per-round lists of rows by relation."""
        (relation,), (record,), (rows,) = self.relations, rounds, inputs
        admit, paths = _admitter(relation, record), [path for path, _ in relation.paths]
        outputs, joins, targets = record.outputs, self.joins, [t for _, t in relation.paths]
        now, few, handover = record.end, TUNING.few, TUNING.handover
        route = routes[0] if routes else None
        while len(outputs) < handover:
            fresh = admit(rows, now)
            now += 1
            rows = []
            if route is not None:
                route(fresh, [rows], now)
            elif joins:
                for path, target in zip(paths, targets, strict=True):
                    _route(path, target, fresh, [rows], now)
            else:
                for path in paths:
                    _through(path, fresh, rows)
            if not 0 < len(rows) <= few:
                break
        record.end = now
        return [rows]

    def _quiet(self, time: Time) -> list[list[Updates]] | None:
        """Each relation's input at `time`, when fused rounds may start there: it is
        the scope's only work (nothing else pending, no other time queued for the
        distincts), with at most `TUNING.few` rows."""
        if any(True for op in self.others for _ in op.pending(time[:-1])):
            return None
        waiting = [r.arrange.waiting_only(time) for r in self.relations]
        parts = [p for p in waiting if p is not None]
        if len(parts) < len(waiting):
            return None
        staged = [p for j in self.joins for p in j.dynamic.waiting_only(time) or []]
        return None if sum(len(p) for ps in [*parts, staged] for p in ps) > TUNING.few else parts

    def _start(
        self, time: Time, parts: list[list[Updates]]
    ) -> tuple[list[list[Row]], list[list[int] | None]] | None:
        """The first round's rows and diffs per relation, when the growing rounds
        apply at `time`: a few insertions, every distinct growing."""
        rows: list[list[Row]] = []
        diffs: list[list[int] | None] = []
        for updates in parts:
            rows.append([row for p in updates for row in python_rows(p.columns, len(p))])
            diffs.append([d for p in updates for d in p.diffs.tolist()] or None)
        # A round may start with rows only at a join's side (`staged`: a variable read
        # through a join alone, as `r(x, z) :- e(x, y), r(y, z).`); without a join
        # rows must be the relations' own.
        if min((min(d) for d in diffs if d), default=1 if self.joins else 0) <= 0:
            return None
        if not all(relation.growing_at(time) for relation in self.relations):
            return None
        if not all(join.ready(time) for join in self.joins):
            return None
        staged = [_staged(join, time) for join in self.joins]
        if None in staged or (not any(diffs) and not any(staged)):
            return None
        for relation in self.relations:
            relation.arrange.take_waiting(time)
        for join, sent in zip(self.joins, staged, strict=True):
            join.dynamic.take_waiting(time)
            if sent:  # rows already at the join's side: the rest of their way now, at `time`
                _route([join], -1, sent, rows, time[-1])
        return rows, diffs

    def _hand_over(self, rounds: list[_Rounds]) -> None:
        """Give the operators the rounds' updates, as their own steps would have."""
        self.scope.steps += rounds[0].end - rounds[0].start[-1]
        for relation, record in zip(self.relations, rounds, strict=True):
            if record.inputs:
                _hand_over(relation, record)
        for join in self.joins:
            join.hand_over(rounds[0].start[:-1])


def _admitter(relation: Relation, rounds: _Rounds) -> Callable[[list[Row], int], list[Row]]:
    """The distinct's growing step for one round's rows, recorded in `rounds`: the
    rows whose key is neither in its output (the run's set when it holds the key
    set's keys, else a probe of the key set) nor new in these rounds, once each."""
    holds, hash_of, admitted = relation.reduce.holds(), relation.hash_of, rounds.admitted
    take, keep = rounds.inputs.extend, rounds.outputs.extend
    taken, kept = rounds.input_iterations, rounds.output_iterations
    exact = rounds.exact

    def admit(rows: list[Row], now: int) -> list[Row]:
        """The round at iteration `now`."""
        fresh = []
        for row in rows:
            if row in admitted:
                continue
            if exact or not holds(hash_of(row), row):  # type: ignore[arg-type]
                admitted.add(row)
                fresh.append(row)
        if len(rows) == 1:  # (most rounds of a long chain)
            take(rows)
            taken.append(now)
        elif rows:
            take(rows)
            taken.extend([now] * len(rows))
        if len(fresh) == 1:
            keep(fresh)
            kept.append(now)
        elif fresh:
            keep(fresh)
            kept.extend([now] * len(fresh))
        return fresh

    return admit


def _staged(join: JoinStage, time: Time) -> list[Row] | None:
    """The rows waiting at `time` in the join's dynamic side, each repeated by its
    multiplicity (None: a retraction among them)."""
    rows: list[Row] = []
    for part in join.dynamic.waiting_only(time) or []:
        for row, n in zip(python_rows(part.columns, len(part)), part.diffs.tolist(), strict=True):
            if n <= 0:
                return None
            rows.extend([row] * n)
    return rows


def _hand_over(relation: Relation, rounds: _Rounds) -> None:
    """One relation's rounds: its input deferred in the arrangement, its new keys
    admitted to the distinct's key set, its output recorded in the distinct and sent
    to the parent scope (which runs only once this scope is quiet)."""
    dtypes = relation.arrange.dtypes
    columns = row_columns(rounds.inputs, dtypes)
    times = rounds.times(True)
    first, last = rounds.span()
    relation.arrange.defer(Updates(columns, times, rounds.diffs()), first, last)
    if not rounds.outputs:
        return
    if len(rounds.outputs) < len(rounds.inputs):  # else every input row was new
        columns, times = row_columns(rounds.outputs, dtypes), rounds.times(False)
    result = Updates(columns, times, np.ones(len(rounds.outputs), dtype=np.int64))
    relation.reduce.grown(result)
    for leave in relation.leaves:
        leave(result)


class _Rounds:
    """Consecutive rounds from `start`: their input rows, the new keys among them,
    and how many of each per round, until they are handed over as `Updates`."""

    def __init__(self, start: Time, first_diffs: list[int] | None, seen: set[Row] | None) -> None:
        self.start = start
        self.end = start[-1]  # the iteration after the last round
        self.first_diffs = first_diffs  # of the first round's input (None: all 1)
        self.inputs: list[Row] = []
        self.outputs: list[Row] = []
        # the iteration of each input row, and of each output row
        self.input_iterations: list[int] = []
        self.output_iterations: list[int] = []
        # `outputs`, for membership; `seen` (then `exact`) holds the key set's keys too
        self.admitted: set[Row] = set() if seen is None else seen
        self.exact = seen is not None

    def next_time(self) -> Time:
        """The time of the round after the last one."""
        return (*self.start[:-1], self.end)

    def span(self) -> tuple[Time, Time]:
        """The times of the first and the last round with input (there is one)."""
        prefix = self.start[:-1]
        return (*prefix, self.input_iterations[0]), (*prefix, self.input_iterations[-1])

    def diffs(self) -> Diffs:
        diffs = np.ones(len(self.inputs), dtype=np.int64)
        if self.first_diffs is not None:
            diffs[: len(self.first_diffs)] = self.first_diffs
        return diffs

    def times(self, inputs: bool) -> Times:
        """The time column of the inputs, or of the outputs."""
        listed = self.input_iterations if inputs else self.output_iterations
        iterations = np.array(listed, dtype=np.int64)
        prefix = np.array(self.start[:-1], dtype=np.int64).reshape(-1, 1)
        return np.vstack([np.repeat(prefix, len(iterations), axis=1), iterations[None, :]])


def _counts(parts: list[Updates]) -> dict[Row, int]:
    """Rows and their summed multiplicities (zero sums kept: they change nothing)."""
    counts: dict[Row, int] = {}
    for part in parts:
        for row, n in zip(python_rows(part.columns, len(part)), part.diffs.tolist(), strict=True):
            counts[row] = counts.get(row, 0) + n
    return counts


def fused_rounds(scope: Scope) -> Fused | None:
    """The fused rounds of an iteration scope, if its recursive relations form a
    chain (`Chain`): every distinct of the scope a relation's."""
    relations = [r for op in scope.operators if (r := _relation_at(op)) is not None]
    if not relations:
        return None
    targets: dict[Receiver, int] = {r.arrange.receiver: i for i, r in enumerate(relations)}
    graph = _Graph(scope)
    for relation in relations:
        variable = next(r for r in relation.reduce.output.receivers if isinstance(r, Feedback))
        paths = _paths_into(variable.out, targets, graph)
        if paths is None:
            return None
        relation.paths = paths
    joins = list(graph.stages.values())
    own = {id(op) for r in relations for op in (r.reduce, r.arrange)}
    moving = own | {id(join.dynamic) for join in joins}
    if any(id(join.static) in moving for join in joins):  # (a side the rounds change)
        return None
    chain = Chain(scope, relations, joins)
    read = {id(arranged) for op in chain.others for arranged in op.inputs()}
    return None if any(id(r.arrange) in read for r in relations) else chain.run


class _Graph:
    """Who reads each arrangement of a scope, and the join stages met so far."""

    def __init__(self, scope: Scope) -> None:
        ops = scope.operators
        self.arranges: dict[Receiver, ArrangeOp] = {
            op.receiver: op for op in ops if isinstance(op, ArrangeOp)
        }
        self.readers: dict[int, list[Operator]] = {}
        for op in ops:
            for read in op.inputs():
                self.readers.setdefault(id(read), []).append(op)
        self.stages: dict[int, JoinStage] = {}

    def join_at(self, receiver: Receiver, targets: dict[Receiver, int]) -> JoinStage | None:
        """The join stage fed by `receiver`, when it is an arrangement read only by a
        join of integer columns with another arrangement, with the ways its output
        reaches `targets` (None otherwise)."""
        arrange = self.arranges.get(receiver)
        readers = self.readers.get(id(arrange), []) if arrange is not None else []
        if arrange is None or len(readers) != 1 or type(readers[0]) is not JoinOp:
            return None
        join = readers[0]
        static = join.right if join.left is arrange else join.left
        if static is arrange or not all(d.kind in "iu" for d in join.layout):
            return None
        stage = self.stages.get(id(arrange))
        if stage is None:
            stage = self.stages[id(arrange)] = JoinStage(join, arrange, static)
            onward = _paths_into(join.output, targets, self)
            if onward is None:
                return None
            stage.onward = cast(list[tuple[list[object], int]], onward)
        return stage


def _relation_at(op: object) -> Relation | None:
    """The relation whose distinct is `op`, if it is one that rounds can fuse:
    integer keys only (`lists_ok`), output to its variable and the parent scope."""
    if not (isinstance(op, ReduceOp) and op.reducer is distinct and op.lists_ok):
        return None
    arrange = op.source
    if not isinstance(arrange, ArrangeOp) or not 0 < arrange.key_arity == len(arrange.dtypes):
        return None
    receivers = op.output.receivers
    leaves: list[Edge] = [r for r in receivers if isinstance(r, Leave)]
    feedback = [r for r in receivers if isinstance(r, Feedback)]
    if len(feedback) != 1 or len(leaves) + 1 != len(receivers):
        return None
    return Relation(op, arrange, leaves)


def _paths_into(
    stream: Stream, targets: dict[Receiver, int], graph: _Graph
) -> list[tuple[Path, int]] | None:
    """The ways rows sent on `stream` reach one of `targets`, each the row forms met
    on it and the target's index (None: a receiver on the way has no row form)."""
    paths: list[tuple[Path, int]] = []
    for receiver in stream.receivers:
        if receiver in targets:
            paths.append(([], targets[receiver]))
            continue
        onward = _onward(receiver)
        if onward is None:
            join = graph.join_at(receiver, targets)
            if join is None:
                return None
            paths.append(([join], -1))  # (the join routes its images: `_route`)
            continue
        stage, out = onward
        rest = _paths_into(out, targets, graph)
        if rest is None:
            return None
        paths.extend(([stage, *path] if stage is not same else path, t) for path, t in rest)
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


def _walk(paths: list[tuple[Path, int]]) -> Route:
    """The generic walk of a relation's `paths` (`chain_routes` compiles the same)."""

    def walk(rows: list[Row], images: list[list[Row]], now: int) -> int:
        return sum(_route(path, target, rows, images, now) for path, target in paths)

    return walk


def _route(path: Path, target: int, rows: list[Row], images: list[list[Row]], now: int) -> int:
    """Send `rows` along `path` into `images` (rows per relation): through its maps
    into `images[target]`, or, when the path ends at a join (`target` -1), through
    the join (its side receiving them at iteration `now`) and on along each of its
    ways; how many rows arrived."""
    if target >= 0:
        return _through(path, rows, images[target])
    join: JoinStage = path[-1]  # type: ignore[assignment]
    passed: list[Row] = rows
    if len(path) > 1:
        passed = []
        _through(path, rows, passed, len(path) - 1)
    joined = join.join_rows(passed, now)
    count = 0
    for onward, to in join.onward:
        count += _route(onward, to, joined, images, now)  # type: ignore[arg-type]
    return count


def _through(
    path: Sequence[Stage], rows: Iterable[Row], out: list[Row], stages: int | None = None
) -> int:
    """Append to `out` each row's image through the maps and filters of `path` (its
    first `stages`, all by default; a filter's None drops the row); how many were
    appended. (Paths without joins, or the maps before a path's join.)"""
    before = len(out)
    if (stages or len(path)) == 1:  # (most paths: one map or filter)
        one: RowMap = path[0]  # type: ignore[assignment]
        out.extend([mapped for row in rows if (mapped := one(row)) is not None])
        return len(out) - before
    if stages is not None:
        path = path[:stages]
    for row in rows:
        image: Row | None = row
        for stage in path:
            image = stage(image)  # type: ignore[arg-type, operator]  # None: dropped
            if image is None:
                break
        else:
            out.append(image)  # type: ignore[arg-type]
    return len(out) - before
