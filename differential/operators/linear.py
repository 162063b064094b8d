"""Linear (stateless) operators: map, filter, flat_map, concat, negate, enter, leave.

Layer: differential (operators). Imports `differential.dataflow`, `batch`.

Each acts on whole columns the moment updates reach it and keeps no state, so
none is scheduled: `f(a + b) = f(a) + f(b)` lets them run on any split of a
collection's updates. Times pass through unchanged, except that `enter` appends
an iteration coordinate (0), `leave` drops it and a variable's `Feedback` adds one
to it.

A map's receiver is an `Edge`, which may also carry the map's row form: the same
map on one Python row of multiplicity one, giving its image or None where it
drops. The fused rounds of an iteration scope (`operators.chain`, ADR 0029) run a
few rows through such edges without building any `Updates`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from differential.batch import Column, Updates, consolidate
from differential.dataflow import Scope, Stream
from differential.time import shifted

Columns = tuple[Column, ...]
ColumnFn = Callable[[Columns], Sequence[Column]]
MaskFn = Callable[[Columns], npt.NDArray[np.bool_]]
ExpandFn = Callable[[Columns], tuple[npt.NDArray[np.intp], Sequence[Column]]]
Row = tuple[object, ...]
RowMap = Callable[[Row], Row | None]


class Edge:
    """A map's receiver: sends `fn(updates)` on to `out`; `rows` is the same map on
    Python rows of multiplicity one, when it has one."""

    __slots__ = ("fn", "out", "rows")

    def __init__(self, fn: Callable[[Updates], Updates], out: Stream, rows: RowMap | None) -> None:
        self.fn = fn
        self.out = out
        self.rows = rows

    def __call__(self, updates: Updates) -> None:
        self.out.send(self.fn(updates))


class Leave(Edge):
    """`leave`'s receiver: its output is in the parent scope, which runs only once
    the nested scope is quiet, so what it sends may wait until then."""


class Feedback(Edge):
    """A variable's receiver of its result: sends it on to the variable's stream one
    iteration later (the back edge of an iteration scope)."""

    def __init__(self, variable: Stream) -> None:
        step = np.zeros((variable.scope.depth, 1), dtype=np.int64)
        step[-1, 0] = 1
        super().__init__(lambda u: u.with_times(shifted(u.times, step)), variable, None)


def map_updates(
    stream: Stream,
    fn: Callable[[Updates], Updates],
    dtypes: Sequence[np.dtype],
    name: str = "",
    rows: RowMap | None = None,
) -> Stream:
    """The stream of `fn(updates)`; `fn` must be linear and keep times unchanged.
    `rows`, if given, is `fn` on rows of multiplicity one."""
    out = Stream(stream.scope, dtypes, name or stream.name, upstream=[stream])
    stream.connect(Edge(fn, out, rows))
    return out


def map_columns(
    stream: Stream, fn: ColumnFn, dtypes: Sequence[np.dtype], rows: RowMap | None = None
) -> Stream:
    """Replace each update's data by `fn(columns)` (same number of rows)."""
    return map_updates(stream, lambda u: u.with_columns(fn(u.columns)), dtypes, rows=rows)


def project(stream: Stream, indices: Sequence[int]) -> Stream:
    """Keep (and reorder, or repeat) the columns at `indices`. Onto no columns,
    the updates of each time are summed into one (a count of rows, whatever
    reads it: the rows of a batch all at one time become a single update)."""
    idx = list(indices)
    if not idx:
        return map_updates(stream, _per_time, [])
    dtypes = [stream.dtypes[i] for i in idx]
    return map_columns(
        stream, lambda cols: [cols[i] for i in idx], dtypes, _picking(idx, stream.arity)
    )


def _per_time(u: Updates) -> Updates:
    """`u` without its columns, one update per time (none where the diffs cancel)."""
    bare = Updates((), u.times, u.diffs)
    if len(u) <= 1:
        return bare
    if not (u.times == u.times[:, :1]).all():
        return consolidate(bare)
    total = int(u.diffs.sum())
    n = 1 if total else 0
    return Updates((), u.times[:, :n], np.full(n, total, dtype=np.int64))


def _picking(idx: list[int], arity: int) -> RowMap:
    """`project`'s row form."""
    if idx == list(range(arity)):
        return same
    if len(idx) > 1:
        return operator.itemgetter(*idx)
    at = idx[0]
    return lambda row: (row[at],)


def same(row: Row) -> Row:
    """The row form of a map that keeps its rows as they are."""
    return row


def filter_rows(stream: Stream, predicate: MaskFn, rows: RowMap | None = None) -> Stream:
    """Keep the updates whose columns satisfy `predicate` (a vectorized mask);
    `rows`, if given, is its row form (the row where it holds, else None)."""

    def select(u: Updates) -> Updates:
        return u.select(predicate(u.columns))

    return map_updates(stream, select, stream.dtypes, rows=rows)


def flat_map(stream: Stream, fn: ExpandFn, dtypes: Sequence[np.dtype]) -> Stream:
    """`fn(columns)` returns `(source row of each output, output columns)`."""

    def expand(u: Updates) -> Updates:
        rows, cols = fn(u.columns)
        return Updates(tuple(cols), u.times[:, rows], u.diffs[rows])

    return map_updates(stream, expand, dtypes)


def negate(stream: Stream) -> Stream:
    return map_updates(stream, Updates.negate, stream.dtypes)


def concat(streams: Sequence[Stream]) -> Stream:
    """The sum of several collections of the same shape."""
    first = streams[0]
    out = Stream(first.scope, first.dtypes, first.name, upstream=streams)
    for s in streams:
        assert s.scope is first.scope, "concat needs streams of one scope"
        assert s.arity == first.arity, "concat needs streams of one arity"
        s.connect(out.send)
    return out


def enter(stream: Stream, inner: Scope) -> Stream:
    """The outer collection inside `inner`: time `t` becomes `(t, 0)`."""
    assert inner.parent is stream.scope, "enter goes one scope down"
    out = Stream(inner, stream.dtypes, stream.name, upstream=[stream])

    def lift(u: Updates) -> None:
        zeros = np.zeros((1, len(u)), dtype=np.int64)
        out.send(u.with_times(np.concatenate([u.times, zeros])))

    stream.connect(lift)
    return out


def leave(stream: Stream) -> Stream:
    """The inner collection outside its scope: `(t, i)` becomes `t` (sums over i)."""
    outer = stream.scope.parent
    assert outer is not None, "leave needs a nested scope"
    out = Stream(outer, stream.dtypes, stream.name, upstream=[stream])
    stream.connect(Leave(lambda u: u.with_times(u.times[:-1]), out, None))
    return out
