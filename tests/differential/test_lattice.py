"""Operators at every time of the lattice, not only after every commit.

In the style of differential-dataflow's `tests/reduce_reference.rs`: updates
arrive at partially ordered times `(epoch, iteration)`; for every time `T` among
the input times and all their joins, the operator's output accumulated at `T`
must equal the operator applied to its inputs accumulated at `T` (DESIGN §3).
The commit-level oracle tests only see the times a commit makes final; these
see the interesting times inside an iteration scope, where a reduce must
re-evaluate a key at the join of two incomparable change times and a join emits
at `t1 ⊔ t2`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from differential.batch import Updates
from differential.dataflow import Scope, Stream
from differential.operators.arrange import ArrangeOp
from differential.operators.enter import EnterArranged
from differential.operators.iterate import Subscope, Variable
from differential.operators.join import JoinOp
from differential.operators.linear import concat, enter, leave
from differential.operators.reduce import ReduceOp, count, distinct, minimum
from differential.time import Time
from tests.differential.harness import Op, SetModel, collection, new_engine, requests
from tests.differential.test_oracle import graph_streams

pytestmark = pytest.mark.usefixtures("small_path")

I64 = np.dtype(np.int64)
Row = tuple[int, ...]
Timed = list[tuple[Row, Time, int]]  # (row, time, diff)

TIMES = st.tuples(st.integers(0, 3), st.integers(0, 3))
UPDATES = st.lists(
    st.tuples(st.tuples(st.integers(0, 2), st.integers(0, 2)), TIMES, st.sampled_from([-1, 1, 2])),
    max_size=14,
)


def _le(a: Time, b: Time) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True))


def _lattice(times: set[Time]) -> set[Time]:
    """The times and all their joins (closed under coordinate-wise max)."""
    closed = set(times)
    while True:
        more = {tuple(map(max, a, b)) for a, b in itertools.combinations(closed, 2)} - closed
        if not more:
            return closed
        closed |= more


def _at(updates: Timed, when: Time) -> Counter[Row]:
    total: Counter[Row] = Counter()
    for row, time, diff in updates:
        if _le(time, when):
            total[row] += diff
    return Counter({r: n for r, n in total.items() if n})


def _send(stream: Stream, updates: Timed) -> None:
    for row, time, diff in updates:  # one push per update: times interleave freely
        columns = tuple(np.array([v], dtype=np.int64) for v in row)
        times = np.array(time, dtype=np.int64).reshape(2, 1)
        stream.send(Updates(columns, times, np.array([diff], dtype=np.int64)))


def _collect(stream: Stream) -> Timed:
    seen: Timed = []

    def receive(u: Updates) -> None:
        for row in u.rows():
            seen.append((tuple(row[:-2]), row[-2], row[-1]))  # type: ignore[arg-type]

    stream.connect(receive)
    return seen


def _check(inputs: Sequence[Timed], output: Timed, reference: Callable[..., Counter[Row]]) -> None:
    times = {t for updates in inputs for _, t, _ in updates}
    for when in sorted(_lattice(times)):
        expected = reference(*(_at(u, when) for u in inputs))
        assert _at(output, when) == expected, f"at time {when}"


def _least_present(values: Counter[int]) -> int | None:
    present = [v for v, n in values.items() if n > 0]
    return min(present) if present else None


REDUCERS = {
    "distinct": (distinct, [], lambda acc: Counter({r: 1 for r, n in acc.items() if n > 0})),
    "count": (count, [I64], lambda acc: _per_key(acc, lambda vals: sum(vals.values()) or None)),
    "min": (minimum, [I64], lambda acc: _per_key(acc, _least_present)),
}


def _per_key(acc: Counter[Row], fold: Callable[[Counter[int]], int | None]) -> Counter[Row]:
    groups: dict[int, Counter[int]] = {}
    for (key, value), n in acc.items():
        groups.setdefault(key, Counter())[value] += n
    out: Counter[Row] = Counter()
    for key, values in groups.items():
        result = fold(values)
        if result is not None:
            out[(key, result)] = 1
    return out


def _run_scope(scope: Scope) -> None:
    scope.run(())


@pytest.mark.parametrize("name", list(REDUCERS))
@given(updates=UPDATES)
def test_reduce_is_right_at_every_time_of_the_lattice(name: str, updates: Timed) -> None:
    note(f"updates: {updates}")
    reducer, out_dtypes, reference = REDUCERS[name]
    # distinct and min read positive multiplicities; count takes any diffs
    valid = updates if name == "count" else _nonnegative(updates)
    scope = Scope(2, None, "lattice")
    keys = 2 if name == "distinct" else 1
    stream = Stream(scope, [I64, I64], "input")
    reduce = ReduceOp(ArrangeOp(stream, keys), reducer, out_dtypes, name)
    output = _collect(reduce.output)
    _send(stream, valid)
    _run_scope(scope)
    _check([valid], output, reference)


def _nonnegative(updates: Timed) -> Timed:
    """Updates whose accumulation is never negative at any time (each negative diff
    follows a positive one on the same row at a time `<=` it)."""
    kept: Timed = []
    for row, time, diff in updates:
        if diff < 0:
            kept.append((row, time, 2))
            kept.append((row, (time[0], time[1] + 1), diff))
        else:
            kept.append((row, time, diff))
    return kept


@given(left=UPDATES, right=UPDATES)
def test_join_is_right_at_every_time_of_the_lattice(left: Timed, right: Timed) -> None:
    note(f"left: {left}\nright: {right}")
    scope = Scope(2, None, "lattice")
    streams = [Stream(scope, [I64, I64], side) for side in ("left", "right")]
    a, b = ArrangeOp(streams[0], 1), ArrangeOp(streams[1], 1)
    output = _collect(JoinOp(a, b, [0, 1, 2]).output)
    _send(streams[0], left)
    _send(streams[1], right)
    _run_scope(scope)

    def joined(x: Counter[Row], y: Counter[Row]) -> Counter[Row]:
        out: Counter[Row] = Counter()
        for (k1, v1), n1 in x.items():
            for (k2, v2), n2 in y.items():
                if k1 == k2:
                    out[(k1, v1, v2)] += n1 * n2
        return Counter({r: n for r, n in out.items() if n})

    _check([left, right], output, joined)


def _within(edges: set[Row], roots: set[Row], hops: int) -> Counter[Row]:
    """Nodes within `hops` steps of a root (hops >= 0), as a set collection."""
    reached = {r[0] for r in roots}
    frontier = set(reached)
    for _ in range(hops):
        frontier = {b for a, b in edges if a in frontier} - reached
        reached |= frontier
    return Counter({(n,): 1 for n in reached})


@given(graph_streams())
def test_iteration_is_right_at_every_epoch_and_iteration(
    stream: list[dict[str, list[Op]]],
) -> None:
    """Inside the scope of `reach(y) :- root(y). reach(y) :- reach(x), edge(x, y).`,
    the distinct's output accumulated at `(epoch, i)` is exactly the nodes within
    `i` steps of a root, with the inputs as of `epoch`: every pair of an outer and
    an inner time, not only what leaves the scope."""
    note(f"stream: {stream}")
    eng = new_engine({"edge": 2, "root": 1})
    df = eng.dataflow("lattice")
    edges = df.import_input("edge", [0, 1], 1)
    roots = collection(df, "root", 1).output
    sub = Subscope(df.root)
    var = Variable(sub.inner, [I64], "reach")
    step = JoinOp(ArrangeOp(var.output, 1), EnterArranged(sub.inner, edges), [1]).output
    dist = ReduceOp(ArrangeOp(concat([enter(roots, sub.inner), step]), 1), distinct, [], "d")
    var.set(dist.output)
    inner = _collect(dist.output)
    df.capture(leave(dist.output), "reach")
    eng.start(df)
    model = SetModel(["edge", "root"])
    states = []
    for txn in stream:
        eng.commit({name: requests(ops, 2 if name == "edge" else 1) for name, ops in txn.items()})
        for name, ops in txn.items():
            model.apply(name, ops)
        states.append((eng.epoch, set(model.relations["edge"]), set(model.relations["root"])))
    for epoch, edge_rows, root_rows in states:
        for hops in range(7):  # 5 nodes: at most 4 hops matter; more must be stable
            expected = _within(edge_rows, root_rows, hops)
            assert _at(inner, (epoch, hops)) == expected, f"epoch {epoch}, iteration {hops}"
