"""The Python kernels for a handful of rows give exactly what the numpy path gives.

Every function with a small-batch path is run twice on the same input, once with
the path forced on (`FEW` large) and once forced off (`FEW` zero), and the two
results must be equal bit for bit: same order, same consolidation, same hashes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar
from unittest import mock

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from differential import small
from differential.batch import Updates, consolidate, python_times
from differential.time import Antichain
from differential.trace import batch as trace_batch
from differential.trace.batch import Batch, Description, key_hash
from differential.trace.cursor import Entry, FewKeys, lookup_batch, lookup_entries, python_entries
from differential.tuning import TUNING, tuned
from tests.differential.strategies import updates

T = TypeVar("T")
KINDS = st.sampled_from([("i",), ("i", "i"), ("i", "i", "i"), ("u", "i"), ()])
EXTREMES = st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63), 2**62, -(2**62)])


@contextmanager
def few(limit: int) -> Iterator[None]:
    with tuned(TUNING.but(few=limit)):
        yield


def both_ways(fn: Callable[[], T]) -> tuple[T, T]:
    with few(10_000):
        python = fn()
    with few(0):
        vectorized = fn()
    return python, vectorized


def assert_same_updates(a: Updates, b: Updates) -> None:
    assert len(a.columns) == len(b.columns)
    for x, y in zip(a.columns, b.columns, strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert np.array_equal(a.times, b.times) and np.array_equal(a.diffs, b.diffs)
    assert a.diffs.dtype == np.int64


@st.composite
def any_updates(draw: st.DrawFn) -> Updates:
    kinds = draw(KINDS)
    signed = tuple("i" if k == "u" else k for k in kinds)
    drawn = draw(updates(kinds=signed, depth=draw(st.integers(1, 3))))
    columns = tuple(
        c.astype(np.uint64) * np.uint64(2**40) if k == "u" else c
        for c, k in zip(drawn.columns, kinds, strict=True)
    )
    return drawn.with_columns(columns)


@given(any_updates())
def test_consolidating_few_rows_in_python_equals_numpy(u: Updates) -> None:
    python, vectorized = both_ways(lambda: consolidate(u))
    assert_same_updates(python, vectorized)


@given(any_updates(), st.integers(0, 3))
def test_building_a_small_batch_in_python_equals_numpy(u: Updates, key_arity: int) -> None:
    key_arity = min(key_arity, u.arity)
    description = Description(Antichain([(0,) * u.depth]), Antichain(), Antichain())
    python, vectorized = both_ways(lambda: Batch.build(u, key_arity, description))
    assert_same_updates(python.updates(), vectorized.updates())
    assert np.array_equal(python.hashes, vectorized.hashes)


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 1), st.integers(-2, 2)),
        max_size=40,
    )
)
def test_small_batches_keep_keys_that_share_a_hash_apart(
    rows: list[tuple[int, int, int, int]],
) -> None:
    cols = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(3)]
    u = Updates(tuple(cols[:2]), cols[2].reshape(1, -1), np.array([r[3] for r in rows], np.int64))
    description = Description(Antichain([(0,)]), Antichain(), Antichain())
    with mock.patch.object(trace_batch, "key_hash", lambda keys: keys[0] % 2):
        python, vectorized = both_ways(lambda: Batch.build(u, 2, description))
    assert_same_updates(python.updates(), vectorized.updates())


@given(st.lists(st.tuples(EXTREMES | st.integers(), st.floats(allow_nan=False)), max_size=40))
def test_hashing_few_keys_in_python_equals_numpy(rows: list[tuple[int, float]]) -> None:
    ints = np.array([r[0] % 2**64 for r in rows], dtype=np.uint64).view(np.int64)
    floats = np.array([r[1] for r in rows], dtype=np.float64)
    for columns in ([ints, floats], [ints, ints.view(np.uint64)], [floats]):
        python, vectorized = both_ways(lambda cols=columns: key_hash(cols))  # type: ignore[misc]
        assert python.dtype == np.int64 and np.array_equal(python, vectorized)


@given(any_updates(), st.lists(st.integers(-5, 5), max_size=8))
def test_looking_up_few_keys_in_python_equals_numpy(u: Updates, probe: list[int]) -> None:
    if u.arity == 0 or u.columns[0].dtype.kind != "i":
        return
    description = Description(Antichain([(0,) * u.depth]), Antichain(), Antichain())
    batch = Batch.build(u, 1, description)
    keys = (np.array(probe, dtype=np.int64),)
    hashes = key_hash(keys)
    expected = both_ways(lambda: lookup_batch(batch, keys, hashes))[1]
    with tuned(TUNING.but(listed=0)):  # binary search, then ranges in Python
        searched = both_ways(lambda: lookup_batch(batch, keys, hashes))[0]
    listed = both_ways(lambda: lookup_batch(batch, keys, hashes))[0]  # bisect in Python
    for found in (searched, listed):
        if expected is None or found is None:
            assert found is expected is None  # nothing matches: nothing is gathered
            continue
        assert np.array_equal(found[0], expected[0])
        assert_same_updates(found[1], expected[1])


@given(
    updates(kinds=("i", "i", "i"), domain=3),
    st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), max_size=8),
    st.booleans(),
)
def test_few_keys_of_two_columns_find_exactly_their_entries(
    u: Updates, probe: list[tuple[int, int]], collide: bool
) -> None:
    """Mixed hashes are confirmed against the key rows, in Python or with numpy, also
    when keys share a hash on purpose (`collide`)."""
    keys = tuple(np.array([p[i] for p in probe], dtype=np.int64) for i in range(2))
    description = Description(Antichain([(0,)]), Antichain(), Antichain())
    hashing = (lambda cols: cols[0] % 2) if collide else key_hash
    with mock.patch.object(trace_batch, "key_hash", hashing):
        batch = Batch.build(u, 2, description)
    hashes = hashing(keys)
    stored = list(zip(*(c.tolist() for c in batch.keys), strict=True))
    expected = sorted((q, e) for q, p in enumerate(probe) for e, k in enumerate(stored) if k == p)
    for listed, expanded in ((0, 0), (0, 1_000), (1_000, 0)):  # list, or search (and expand)
        with (
            tuned(TUNING.but(listed=listed, expanded=expanded)),
        ):
            python, vectorized = both_ways(lambda: lookup_batch(batch, keys, hashes))
        for found in (python, vectorized):
            pairs = [] if found is None else found[0].tolist()
            assert len(pairs) == len(expected)
            if found is not None:
                got = sorted(zip(pairs, found[1].diffs.tolist(), strict=True))
                assert got == sorted((q, int(batch.diffs[e])) for q, e in expected)


@given(
    updates(kinds=("i", "i"), domain=2),
    st.lists(st.tuples(st.integers(-2, 2), st.integers(-2, 2)), max_size=4),
    st.sampled_from([1, 2]),
    st.booleans(),
)
def test_entries_of_a_few_keys_stop_past_their_limit(
    u: Updates, probe: list[tuple[int, int]], key_arity: int, collide: bool
) -> None:
    """Read as Python entries, small batches from lists and large ones by ranges, the
    entries are `lookup_batch`'s, unless there are more than the limit: then False.
    Mixed hashes (two key columns), colliding or not, are confirmed against the keys."""
    hashing = (lambda cols: cols[0] % 2) if collide and key_arity == 2 else key_hash
    with mock.patch.object(trace_batch, "key_hash", hashing):
        batch = Batch.build(u, key_arity, Description(Antichain([(0,)]), Antichain(), Antichain()))
    keys = tuple(np.array([p[i] for p in probe], dtype=np.int64) for i in range(key_arity))
    part = lookup_batch(batch, keys, hashing(keys))
    expected = [] if part is None else python_entries(part[0], part[1], key_arity)
    # by ranges; a large batch listed once asked enough (from then on); a small one
    for listed, cost in ((0, 0), (0, 10**9), (1_000, 0)):
        with (
            tuned(TUNING.but(listed=listed, listed_cost=cost)),
        ):
            found: list[Entry] = []
            assert lookup_entries(batch, FewKeys.of(keys, hashing(keys)), found)
            assert sorted(found) == sorted(expected)
            if expected:
                limit = len(expected) - 1
                assert not lookup_entries(batch, FewKeys.of(keys, hashing(keys)), [], limit)


@given(
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=3),
    st.sampled_from([np.int64, np.uint64]),
)
def test_hashing_one_python_key_equals_numpy(key: list[int], dtype: type) -> None:
    """`small.row_hash` (the fused rounds' probe, ADR 0029) is `key_hash` of one row."""
    values = [v % 2**64 if dtype is np.uint64 else v for v in key]
    columns = [np.array([v], dtype=dtype) for v in values]
    identity = len(values) == 1
    hash_of = small.row_hash(identity, dtype is np.int64)
    assert hash_of(tuple(values)) == int(key_hash(columns)[0])


@given(
    st.integers(1, 3),
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=0, max_size=12),
    st.sampled_from([np.int64, np.uint64, np.int32, np.uint32]),
)
def test_hashing_python_keys_equals_numpy(width: int, flat: list[int], dtype: type) -> None:
    """`small.key_hashes` (the reduce's few keys as rows) is `key_hash` of their columns."""
    info = np.iinfo(dtype)
    values = [v % (int(info.max) - int(info.min) + 1) + int(info.min) for v in flat]
    rows = [tuple(values[i : i + width]) for i in range(0, len(values) - width + 1, width)]
    columns = [np.array([r[c] for r in rows], dtype=dtype) for c in range(width)]
    assert small.key_hashes(rows, width == 1) == key_hash(columns).tolist()


@given(st.integers(0, 3), st.integers(0, 6), st.integers(-(2**63), 2**63 - 1))
def test_python_times_are_each_updates_time_as_a_tuple(depth: int, n: int, seed: int) -> None:
    times = np.random.default_rng(seed % 2**32).integers(-9, 9, size=(depth, n), dtype=np.int64)
    got = python_times(times)
    assert got == [tuple(int(times[d, i]) for d in range(depth)) for i in range(n)]
    assert all(type(c) is int for t in got for c in t)
