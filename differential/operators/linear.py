"""Linear (stateless) operators: map, filter, flat_map, concat, negate, enter, leave.

Layer: differential (operators). Imports `differential.dataflow`, `batch`.

Each acts on whole columns the moment updates reach it and keeps no state, so
none is scheduled: `f(a + b) = f(a) + f(b)` lets them run on any split of a
collection's updates. Times pass through unchanged, except that `enter` appends
an iteration coordinate (0) and `leave` drops it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from differential.batch import Column, Updates, consolidate
from differential.dataflow import Scope, Stream

Columns = tuple[Column, ...]
ColumnFn = Callable[[Columns], Sequence[Column]]
MaskFn = Callable[[Columns], npt.NDArray[np.bool_]]
ExpandFn = Callable[[Columns], tuple[npt.NDArray[np.intp], Sequence[Column]]]


def map_updates(
    stream: Stream, fn: Callable[[Updates], Updates], dtypes: Sequence[np.dtype], name: str = ""
) -> Stream:
    """The stream of `fn(updates)`; `fn` must be linear and keep times unchanged."""
    out = Stream(stream.scope, dtypes, name or stream.name, upstream=[stream])
    stream.connect(lambda u: out.send(fn(u)))
    return out


def map_columns(stream: Stream, fn: ColumnFn, dtypes: Sequence[np.dtype]) -> Stream:
    """Replace each update's data by `fn(columns)` (same number of rows)."""
    return map_updates(stream, lambda u: u.with_columns(fn(u.columns)), dtypes)


def project(stream: Stream, indices: Sequence[int]) -> Stream:
    """Keep (and reorder, or repeat) the columns at `indices`. Onto no columns,
    the updates of each time are summed into one (a count of rows, whatever
    reads it: the rows of a batch all at one time become a single update)."""
    idx = list(indices)
    if not idx:
        return map_updates(stream, _per_time, [])
    dtypes = [stream.dtypes[i] for i in idx]
    return map_columns(stream, lambda cols: [cols[i] for i in idx], dtypes)


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


def filter_rows(stream: Stream, predicate: MaskFn) -> Stream:
    """Keep the updates whose columns satisfy `predicate` (a vectorized mask)."""
    return map_updates(stream, lambda u: u.select(predicate(u.columns)), stream.dtypes)


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
    stream.connect(lambda u: out.send(u.with_times(u.times[:-1])))
    return out
