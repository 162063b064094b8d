"""The list paths of a few rows against the numpy paths, at every time of the lattice,
over the values where Python integers and numpy columns part ways (ADR 0030).

`test_lattice.py` checks reduce and join at depth 2 over small int64 values. Here
the same checks run over uint64 and int64 columns holding their extremes (uint64
above 2**63, int64's least value), int32 keys, keys of two columns (mixed hashes),
and times of depth 1, 2 and 3 (the depths `time.at_or_before` specialises, and a
nested iteration's), with the small-batch kernels on, off, and on for at most two
rows (`few_limit`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from differential.batch import Updates
from differential.dataflow import Scope, Stream
from differential.operators.arrange import ArrangeOp
from differential.operators.join import JoinOp
from differential.operators.reduce import ReduceOp, count, distinct, maximum, minimum
from differential.time import Time
from differential.tuning import TUNING, tuned
from tests.budget import examples
from tests.differential.test_lattice import _check, _collect


@pytest.fixture(scope="module", params=[0, 2, TUNING.few])
def few_limit(request: pytest.FixtureRequest) -> Iterator[int]:
    """The small-batch limit: off (numpy), on (as the engine runs), and so low that
    one operator moves between rows and columns from step to step (keys scheduled as
    rows meet keys as columns, lookups refused past their limit go to numpy)."""
    limit = request.param
    with tuned(TUNING.but(few=limit)), tuned(TUNING.but(few_pairs=8 * limit)):
        yield limit


pytestmark = pytest.mark.usefixtures("few_limit")

Row = tuple[int, ...]
Timed = list[tuple[Row, Time, int]]

EXTREMES = {
    "int64": (-(2**63), -1, 0, 2**63 - 1),
    "uint64": (0, 1, 2**63 - 1, 2**63, 2**64 - 1),
    "int32": (-(2**31), -1, 0, 2**31 - 1),
}
DEPTHS = (1, 2, 3)
# "mixed": the columns cycle through the three dtypes (a key of an int64 and a uint64
# column hashes both by their 64-bit patterns, in Python as in numpy).
DTYPES = (*EXTREMES, "mixed")
MIXED = ("uint64", "int64", "int32")


def column_dtypes(dtype: str, width: int) -> list[str]:
    return [MIXED[i % 3] if dtype == "mixed" else dtype for i in range(width)]


def updates(dtype: str, width: int, depth: int) -> st.SearchStrategy[Timed]:
    time = st.tuples(*[st.integers(0, 2)] * depth)
    row = st.tuples(*[st.sampled_from(EXTREMES[d]) for d in column_dtypes(dtype, width)])
    return st.lists(st.tuples(row, time, st.sampled_from([-1, 1, 2])), max_size=12)


def _send(stream: Stream, timed: Timed, dtypes: Sequence[np.dtype]) -> None:
    depth = stream.scope.depth
    for row, time, diff in timed:  # one push per update: times interleave freely
        columns = tuple(np.array([v], dtype=d) for v, d in zip(row, dtypes, strict=True))
        times = np.array(time, dtype=np.int64).reshape(depth, 1)
        stream.send(Updates(columns, times, np.array([diff], dtype=np.int64)))


def _nonnegative(timed: Timed) -> Timed:
    """Never negative at any time: a retraction follows an insertion `<=` it."""
    kept: Timed = []
    for row, time, diff in timed:
        if diff < 0:
            kept.append((row, time, 2))
            kept.append((row, (*time[:-1], time[-1] + 1), diff))
        else:
            kept.append((row, time, diff))
    return kept


def _per_key(k: int, fold: Callable[[Counter[Row]], Row | None]) -> Callable[..., Counter[Row]]:
    def reference(acc: Counter[Row]) -> Counter[Row]:
        groups: dict[Row, Counter[Row]] = {}
        for row, n in acc.items():
            groups.setdefault(row[:k], Counter())[row[k:]] += n
        out: Counter[Row] = Counter()
        for key, values in groups.items():
            result = fold(values)
            if result is not None:
                out[(*key, *result)] = 1
        return out

    return reference


def _extreme(pick: Callable[..., Row]) -> Callable[[Counter[Row]], Row | None]:
    def fold(values: Counter[Row]) -> Row | None:
        present = [v for v, n in values.items() if n > 0]
        return pick(present) if present else None

    return fold


def _count(values: Counter[Row]) -> Row | None:
    total = sum(values.values())
    return (total,) if total else None


REDUCERS = ("distinct", "count", "min", "max")


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("reducer", REDUCERS)
@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=examples(12), deadline=None)
@given(data=st.data())
def test_reduce_over_extreme_values_at_every_time(
    dtype: str, reducer: str, depth: int, data: st.DataObject
) -> None:
    k = data.draw(st.sampled_from([1, 2]), label="key arity")
    width = k if reducer == "distinct" else k + 1
    timed = data.draw(updates(dtype, width, depth), label="updates")
    if reducer != "count":  # distinct, min and max read positive multiplicities
        timed = _nonnegative(timed)
    note(f"updates: {timed}")
    dts = [np.dtype(d) for d in column_dtypes(dtype, width)]
    scope = Scope(depth, None, "lattice")
    stream = Stream(scope, dts, "input")
    i64, value = np.dtype(np.int64), dts[-1]  # the value column (a key column for distinct)
    op, out, expect = {
        "distinct": (distinct, [], lambda acc: Counter({r: 1 for r, n in acc.items() if n > 0})),
        "count": (count, [i64], _per_key(k, _count)),
        "min": (minimum, [value], _per_key(k, _extreme(min))),
        "max": (maximum, [value], _per_key(k, _extreme(max))),
    }[reducer]
    reduce = ReduceOp(ArrangeOp(stream, k), op, out, reducer)
    output = _collect(reduce.output)
    _send(stream, timed, dts)
    scope.run(())
    _check([timed], output, expect)


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=examples(25), deadline=None)
@given(data=st.data())
def test_join_over_extreme_values_at_every_time(
    dtype: str, depth: int, data: st.DataObject
) -> None:
    k = data.draw(st.sampled_from([1, 2]), label="key arity")
    left = data.draw(updates(dtype, k + 1, depth), label="left")
    right = data.draw(updates(dtype, k + 1, depth), label="right")
    # Output columns reordered and repeated: the key, both values, the key again.
    projection = [k, *range(k), k + 1, 0]
    note(f"left: {left}\nright: {right}")
    dts = [np.dtype(d) for d in column_dtypes(dtype, k + 1)]
    scope = Scope(depth, None, "lattice")
    streams = [Stream(scope, dts, side) for side in ("left", "right")]
    a, b = ArrangeOp(streams[0], k), ArrangeOp(streams[1], k)
    output = _collect(JoinOp(a, b, projection).output)
    _send(streams[0], left, dts)
    _send(streams[1], right, dts)
    scope.run(())

    def joined(x: Counter[Row], y: Counter[Row]) -> Counter[Row]:
        out: Counter[Row] = Counter()
        for l_row, n1 in x.items():
            for r_row, n2 in y.items():
                if l_row[:k] == r_row[:k]:
                    layout = (*l_row, *r_row[k:])
                    out[tuple(layout[i] for i in projection)] += n1 * n2
        return Counter({r: n for r, n in out.items() if n})

    _check([left, right], output, joined)
