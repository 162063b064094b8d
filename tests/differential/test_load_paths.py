"""The bulk-load shortcuts (ADR 0044) give exactly what the paths they shortcut give.

Each shortcut is run next to the general path on the same input: a sorted input
found in order against the sort; values sorted in parts against one sort; distinct
rows by packed values against a set; a batch built from rows in order against one
built by sorting; repeated times and diffs held as one value (`uniform`) against
the materialized columns; the packed key hash against its row-by-row twin; a
bulk insert's diffs against the general set semantics.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from differential import small
from differential.batch import (
    Updates,
    concat,
    consolidate,
    distinct_rows,
    entered_times,
    in_order,
    joined_times,
    multiplied,
    order_of,
    pack,
    sorted_values,
    take_diffs,
    take_times,
    uniform,
    uniform_diffs,
    unpack,
)
from differential.inputs import Input, Requests
from differential.time import Antichain, shifted, uniform_times
from differential.trace.batch import Batch, Description, key_hash, ordered_hash, rows_of_hashes
from differential.tuning import TUNING, tuned
from tests.differential.strategies import as_column, updates

KINDS = st.sampled_from([("i",), ("i", "i"), ("i", "i", "i"), ("f", "i"), ("i", "f")])


@contextmanager
def shortcuts(on: bool) -> Iterator[None]:
    """Every size threshold of the shortcuts at its smallest (`on`) or out of reach."""
    big = 1 << 40
    with (
        tuned(
            TUNING.but(
                few=0,
                sorted_from=2 if on else big,
                probe=2,
                value_sort_part=3 if on else big,
                uniform_from=2 if on else big,
            )
        ),
    ):
        yield


def assert_same(a: Updates, b: Updates) -> None:
    assert len(a.columns) == len(b.columns)
    for x, y in zip(a.columns, b.columns, strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert a.times.shape == b.times.shape and np.array_equal(a.times, b.times)
    assert np.array_equal(a.diffs, b.diffs)


def assert_same_batch(a: Batch, b: Batch) -> None:
    assert np.array_equal(a.hashes, b.hashes)
    assert_same(a.updates(), b.updates())


def sorted_rows(u: Updates) -> Updates:
    """`u` in (data, time) order, unconsolidated: an input already sorted."""
    if not len(u):
        return u
    order = np.lexsort([*u.times[::-1], *u.columns[::-1]])
    return u.take(order)


# -- in order, sorted values, distinct rows ------------------------------------------


@given(updates(kinds=("i", "i"), depth=2, domain=3))
def test_in_order_says_whether_rows_are_sorted_lexicographically(u: Updates) -> None:
    keys = [*u.columns, *u.times]
    rows = list(zip(*(k.tolist() for k in keys), strict=True))
    strictly = rows == sorted(set(rows))
    with shortcuts(True):  # blocks of 2 rows
        assert in_order(keys) == (rows == sorted(rows))
        assert order_of(keys) == (1 if strictly else 0 if rows == sorted(rows) else -1)
        assert in_order([*sorted_rows(u).columns, *sorted_rows(u).times])


@given(st.lists(st.integers(-(2**62), 2**62), max_size=60))
def test_values_sorted_in_parts_equal_one_sort(values: list[int]) -> None:
    key = np.array(values, dtype=np.int64)
    with shortcuts(True):  # parts of 3 rows
        assert sorted_values(key.copy()).tolist() == sorted(values)


@given(updates(kinds=("i", "i"), domain=5), st.booleans())
def test_distinct_rows_are_the_sorted_set_of_rows(u: Updates, presorted: bool) -> None:
    source = sorted_rows(u) if presorted else u
    expected = sorted(set(zip(*(c.tolist() for c in u.columns), strict=True)))
    for on in (True, False):
        with shortcuts(on):
            found = distinct_rows(source.columns)
        assert list(zip(*(c.tolist() for c in found), strict=True)) == expected
        assert all(f.dtype == c.dtype for f, c in zip(found, u.columns, strict=True))


def test_distinct_rows_of_rows_that_do_not_pack_sort_them() -> None:
    wide = np.array([2**62, -(2**62), 5, 2**62, 5], dtype=np.int64)
    other = np.array([1, 2, 3, 1, 3], dtype=np.int64)
    assert pack([wide, other]) is None
    found = distinct_rows([wide, other])
    assert list(zip(*(c.tolist() for c in found), strict=True)) == [
        (-(2**62), 2),
        (5, 3),
        (2**62, 1),
    ]


@given(
    st.integers(-(2**62), 2**62),
    st.lists(
        st.tuples(st.integers(0, 2**30), st.integers(0, 2**20), st.integers(-3, 3)),
        min_size=1,
        max_size=30,
    ),
)
def test_pack_computed_by_wrapping_arithmetic_unpacks_to_the_rows(
    offset: int, drawn: list[tuple[int, int, int]]
) -> None:
    """Large values in a small range: `col << shift` wraps, the packed key does not."""
    rows = [(a + offset, b + 2**62, c) for a, b, c in drawn]
    kinds = ["i8", "u8", "i4"]
    columns = [np.array(c, dtype=d) for c, d in zip(zip(*rows, strict=True), kinds, strict=True)]
    packed = pack(columns)
    assert packed is not None
    key, specs = packed
    assert [rows[i] for i in np.argsort(key, kind="stable")] == sorted(rows)
    for back, column in zip(unpack(key, specs, [c.dtype for c in columns]), columns, strict=True):
        assert back.dtype == column.dtype and np.array_equal(back, column)


# -- consolidation and batches built from rows in order ------------------------------


@st.composite
def any_updates(draw: st.DrawFn) -> Updates:
    return draw(updates(kinds=draw(KINDS), depth=draw(st.integers(1, 2)), domain=3))


@given(any_updates(), st.booleans())
def test_consolidating_rows_in_order_equals_sorting_them(u: Updates, presorted: bool) -> None:
    source = sorted_rows(u) if presorted else u
    with shortcuts(True):
        fast = consolidate(source)
    with shortcuts(False):
        general = consolidate(source)
    assert_same(fast, general)


@given(any_updates(), st.integers(0, 2), st.booleans())
def test_a_batch_built_from_rows_in_order_equals_one_built_by_sorting(
    u: Updates, key_arity: int, presorted: bool
) -> None:
    key_arity = min(key_arity, u.arity)
    source = u
    if presorted and len(u):  # in the batch's own order: (hash, values, time)
        hashes = key_hash(u.columns[:key_arity]) if key_arity else np.zeros(len(u), np.int64)
        keys = [*u.times[::-1], *u.columns[key_arity:][::-1], *u.columns[:key_arity][::-1], hashes]
        source = u.take(np.lexsort(keys))
    description = Description(Antichain([(0,) * u.depth]), Antichain(), Antichain())
    with shortcuts(True):
        fast = Batch.build(source, key_arity, description)
    with shortcuts(False):
        general = Batch.build(source, key_arity, description)
    assert_same_batch(fast, general)


@given(updates(kinds=("i", "i"), depth=1, domain=3, max_size=20))
def test_a_batch_of_one_time_and_one_diff_holds_each_once(u: Updates) -> None:
    rows = distinct_rows(u.columns) if len(u) else u.columns
    n = len(rows[0])
    one = Updates(rows, as_column([(4,)] * n, 1), np.ones(n, dtype=np.int64))
    description = Description(Antichain([(0,)]), Antichain(), Antichain())
    with shortcuts(True):
        built = Batch.build(one, 1, description)
    with shortcuts(False):
        general = Batch.build(one, 1, description)
    assert_same_batch(built, general)
    if len(built) > 1:
        assert uniform(built.times) and uniform(built.diffs)


# -- one repeated time or diff ---------------------------------------------------------


@given(
    st.integers(2, 9),
    st.tuples(st.integers(0, 5), st.integers(0, 5)),
    st.tuples(st.integers(0, 5), st.integers(0, 5)),
    st.lists(st.integers(0, 8), max_size=12),
)
def test_one_repeated_time_or_diff_behaves_like_its_copies(
    n: int, t: tuple[int, int], s: tuple[int, int], picked: list[int]
) -> None:
    index = np.array([i % n for i in picked], dtype=np.intp)
    a, b = uniform_times(t, n), uniform_times(s, n)
    full_a, full_b = np.array(a), np.array(b)
    assert np.array_equal(take_times(a, index), full_a[:, index])
    mask = np.arange(n) % 2 == 0
    assert np.array_equal(take_times(a, mask), full_a[:, mask])
    assert np.array_equal(joined_times(a, b), np.maximum(full_a, full_b))
    assert np.array_equal(joined_times(a, full_b), np.maximum(full_a, full_b))
    assert np.array_equal(entered_times(a), np.vstack([full_a, np.zeros((1, n), np.int64)]))
    step = np.array([[0], [1]], dtype=np.int64)
    assert np.array_equal(shifted(a, step), full_a + step)
    d, e = uniform_diffs(-2, n), uniform_diffs(3, n)
    assert np.array_equal(take_diffs(d, index), np.array(d)[index])
    assert np.array_equal(multiplied(d, e), np.array(d) * np.array(e))
    parts = [Updates((np.arange(n),), a, d), Updates((np.arange(n),), a, d)]
    joined = concat(parts)
    assert uniform(joined.times) and uniform(joined.diffs)
    assert np.array_equal(joined.times, np.hstack([full_a, full_a]))
    mixed = concat([parts[0], Updates((np.arange(n),), b, e)])
    assert np.array_equal(mixed.times, np.hstack([full_a, full_b]))
    assert np.array_equal(mixed.diffs, np.r_[np.array(d), np.array(e)])


# -- key hashes ------------------------------------------------------------------------


VALUES = st.one_of(st.integers(0, 2**23 - 1), st.sampled_from([2**23, -1, 2**63 - 1, -(2**63)]))


@given(st.integers(2, 3), st.lists(st.lists(VALUES, min_size=3, max_size=3), max_size=40))
def test_the_packed_key_hash_equals_its_row_by_row_twin(width: int, rows: list[list[int]]) -> None:
    columns = [np.array([r[c] for r in rows], dtype=np.int64) for c in range(width)]
    with tuned(TUNING.but(few=0)):
        vectorized = key_hash(columns).tolist()
    patterns = [[v & (2**64 - 1) for v in c.tolist()] for c in columns]
    assert vectorized == small.mixed_hash(patterns, len(rows))
    fits = [all(0 <= r[c] < 2 ** small.packed_width(width) for c in range(width)) for r in rows]
    keys = [tuple(r[:width]) for r in rows]
    packed = np.array([h for h, f in zip(vectorized, fits, strict=True) if f], dtype=np.int64)
    in_range = [k for k, f in zip(keys, fits, strict=True) if f]
    # order-preserving where every value fits: the hashes sort like the rows
    assert [in_range[i] for i in np.argsort(packed, kind="stable")] == sorted(in_range)


# -- a bulk insert ----------------------------------------------------------------------


@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=40),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=40),
)
def test_a_bulk_insert_commits_what_the_general_set_semantics_commit(
    before: list[tuple[int, int]], rows: list[tuple[int, int]]
) -> None:
    for on in (True, False):
        with shortcuts(on):
            found = Input("e", [np.dtype(np.int64)] * 2)
            if before:
                cols = tuple(np.array(c, dtype=np.int64) for c in zip(*before, strict=True))
                found.stage(found.diffs(Requests(cols, np.ones(len(before), bool)), 1), 1)
                found.seal(2)
            if not rows:
                continue
            cols = tuple(np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
            requests = Requests(cols, np.ones(len(rows), bool))
            fast = found.diffs(requests, 2)
            general = found._set_diffs_sorted(requests, 2)
        assert sorted(fast.rows()) == sorted(general.rows())
        assert sorted(fast.rows()) == sorted((x, y, (2,), 1) for x, y in set(rows) - set(before))


@given(updates(kinds=("i", "i", "i"), depth=1, domain=3), st.booleans())
def test_rows_in_hash_order_whose_keys_collide_are_built_like_sorted_ones(
    u: Updates, by_hash_only: bool
) -> None:
    """Keys sharing a hash may sit interleaved in hash order: that is not the batch's
    order (each key's entries together), so such rows are sorted after all."""
    from differential.trace import batch as trace_batch

    collide = lambda keys: (keys[0] % 2).astype(np.int64)  # noqa: E731
    hashes = collide(u.columns[:2]) if len(u) else np.zeros(0, np.int64)
    keys = [*u.times[::-1], u.columns[2], *([] if by_hash_only else u.columns[:2][::-1]), hashes]
    source = u.take(np.lexsort(keys)) if len(u) else u
    description = Description(Antichain([(0,)]), Antichain(), Antichain())
    with mock.patch.object(trace_batch, "key_hash", collide):
        with shortcuts(True):
            fast = Batch.build(source, 2, description)
        with shortcuts(False):
            general = Batch.build(source, 2, description)
    assert_same_batch(fast, general)


@given(
    st.integers(1, 3),
    st.sampled_from(["i8", "u8"]),
    st.lists(st.lists(VALUES, min_size=3, max_size=3), min_size=1, max_size=30),
)
def test_an_ordered_hash_is_the_key_hash_and_sorts_like_the_rows(
    width: int, dtype: str, rows: list[list[int]]
) -> None:
    if dtype == "u8":
        rows = [[v % 2**64 for v in r] for r in rows]
    columns = [np.array([r[c] for r in rows], dtype=dtype) for c in range(width)]
    found = ordered_hash(columns)
    keys = [tuple(r[:width]) for r in rows]
    limit = 2**63 if width == 1 else 2 ** small.packed_width(width)
    fits = all(0 <= v < limit for k in keys for v in k) or (width == 1 and dtype == "i8")
    assert (found is not None) == fits
    if found is None:
        return
    assert np.array_equal(found, key_hash(columns))
    assert found is not columns[0]  # a copy: sorting it leaves the rows alone
    assert [keys[i] for i in np.argsort(found, kind="stable")] == sorted(keys)
    back = rows_of_hashes(found, [c.dtype for c in columns])
    assert all(
        b.dtype == c.dtype and np.array_equal(b, c) for b, c in zip(back, columns, strict=True)
    )
