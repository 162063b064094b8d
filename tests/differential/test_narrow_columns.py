"""Narrow integer columns (ADR 0073, `Tuning.narrow_columns`) against their widened twin.

A request may hold an integer column narrower than its relation's type (an int32
column of int64 numbers): the packed hash reads it at its own width, and an input
commits exactly what it commits for the widened columns, whatever the widths of
the batches before and after (an int32 load, then int64 values that do not fit it),
with retractions.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from differential.batch import Updates, consolidate
from differential.inputs import Input, Requests
from differential.time import column
from differential.trace.batch import ordered_hash
from differential.tuning import TUNING, tuned
from tests.budget import examples

NARROW = [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32]
WIDE = np.dtype(np.int64)


def narrow_column(dtype: type[np.integer], values: list[int]) -> np.ndarray:
    """`values` clipped into `dtype`'s range, as a column of it."""
    bounds = np.iinfo(dtype)
    return np.array([min(max(v, bounds.min), bounds.max) for v in values], dtype=dtype)


value = st.one_of(
    st.integers(-3, 3),
    st.integers(0, (1 << 23) + 3),  # about the packed width of two columns
    st.integers(-(1 << 31), (1 << 32) - 1),
)


@settings(max_examples=examples(200))
@given(
    dtypes=st.lists(st.sampled_from([*NARROW, np.int64]), min_size=1, max_size=3),
    n=st.integers(1, 30),
    data=st.data(),
)
def test_the_ordered_hash_of_narrow_columns_is_that_of_the_widened_ones(
    dtypes: list[type[np.integer]], n: int, data: st.DataObject
) -> None:
    drawn = [data.draw(st.lists(value, min_size=n, max_size=n)) for _ in dtypes]
    columns = [narrow_column(d, v) for d, v in zip(dtypes, drawn, strict=True)]
    found = ordered_hash(columns)
    expected = ordered_hash([c.astype(np.int64) for c in columns])
    assert (found is None) == (expected is None)
    if found is not None and expected is not None:
        assert found.dtype == np.int64 and np.array_equal(found, expected)


def test_a_negative_int32_does_not_pack_as_its_32_bit_pattern() -> None:
    # -1 as uint32 is 2**32 - 1: beyond the packed width, so no packed hash, as for int64
    columns = [np.array([1, -1], np.int32), np.array([2, 3], np.int32)]
    assert ordered_hash(columns) is None
    assert ordered_hash([c.astype(np.int64) for c in columns]) is None
    small = [np.array([1, -1], np.int8), np.array([2, 3], np.int8)]  # 8 bits within 23
    assert ordered_hash(small) is None


def test_requests_widen_a_narrow_column_only_when_its_columns_are_read() -> None:
    a, b = np.array([1, 2], np.int32), np.array([3, 4], np.int64)
    requests = Requests((a, b), np.ones(2, bool), (WIDE, WIDE))
    assert requests.given[0] is a and requests.given[1] is b
    widened = requests.columns
    assert [c.dtype for c in widened] == [WIDE, WIDE]
    assert widened[1] is b and np.array_equal(widened[0], a)
    assert requests.columns is widened  # once
    plain = Requests((b, b), np.ones(2, bool))  # no types given: as they are
    assert plain.columns == plain.given


Batch = tuple[bool, list[tuple[int, int]], type[np.integer]]

rows = st.lists(
    st.tuples(
        st.one_of(st.integers(0, 40), st.integers(-(1 << 31), (1 << 31) - 1)),
        st.one_of(st.integers(0, 40), st.sampled_from([-1, 1 << 23, (1 << 31) - 1])),
    ),
    max_size=30,
)
batches = st.lists(
    st.tuples(st.booleans(), rows, st.sampled_from([np.int32, np.int64, np.uint32])), max_size=6
)


def committed(batch_list: list[Batch], narrow: bool, semantics: str) -> list[Updates]:
    """Each epoch's diffs, and the contents at the end, of an input fed `batch_list`
    (inserting or retracting rows given at a width; at the relation's, int64, when
    they do not fit it) with `Tuning.narrow_columns` as `narrow`."""
    found = Input("e", [WIDE, WIDE], semantics=semantics)  # type: ignore[arg-type]
    out = []
    with tuned(TUNING.but(narrow_columns=narrow, few=0, sorted_from=2, uniform_from=2)):
        for epoch, (inserting, rows_, dtype) in enumerate(batch_list, start=1):
            bounds = np.iinfo(dtype)
            fits = all(bounds.min <= v <= bounds.max for row in rows_ for v in row)
            given = dtype if fits else np.int64
            cols = tuple(np.array([r[i] for r in rows_], dtype=given) for i in range(2))
            diffs = found.diffs(Requests(cols, np.full(len(rows_), inserting), (WIDE, WIDE)), epoch)
            assert all(c.dtype == WIDE for c in diffs.columns)  # stored at the relation's type
            found.stage(diffs, epoch)
            found.seal(epoch + 1)
            out.append(diffs)
    contents = found.presence.spine.accumulate(None)
    out.append(consolidate(contents.with_times(column((0,), len(contents)))))
    return out


@settings(max_examples=examples(150), deadline=None)
@given(batch_list=batches, semantics=st.sampled_from(["set", "multiset"]))
def test_an_input_fed_narrow_columns_commits_what_it_commits_for_wide_ones(
    batch_list: list[Batch], semantics: str
) -> None:
    narrow = committed(batch_list, True, semantics)
    wide = committed(batch_list, False, semantics)
    for a, b in zip(narrow, wide, strict=True):
        assert [c.dtype for c in a.columns] == [c.dtype for c in b.columns]
        for x, y in zip(a.columns, b.columns, strict=True):
            assert np.array_equal(x, y)
        assert np.array_equal(a.times, b.times) and np.array_equal(a.diffs, b.diffs)


def test_an_int32_load_then_int64_values_beyond_it_then_retractions() -> None:
    rng = np.random.default_rng(3)
    src = rng.integers(0, 5000, 20_000).astype(np.int32)
    dst = rng.integers(0, 5000, 20_000).astype(np.int32)
    big = (np.array([1 << 40, -(1 << 35), 7]), np.array([3, 1 << 62, -9]))
    gone = (src[:100], dst[:100])
    batch_list: list[Batch] = [
        (True, list(zip(src.tolist(), dst.tolist(), strict=True)), np.int32),
        (True, list(zip(*(c.tolist() for c in big), strict=True)), np.int64),
        (False, list(zip(*(c.tolist() for c in gone), strict=True)), np.int32),
        (True, [(1 << 40, 3), (5, 5)], np.int64),
    ]
    narrow = committed(batch_list, True, "set")
    wide = committed(batch_list, False, "set")
    expected = set(zip(src.tolist(), dst.tolist(), strict=True))
    expected |= {(1 << 40, 3), (-(1 << 35), 1 << 62), (7, -9), (5, 5)}
    expected -= set(zip(*(c.tolist() for c in gone), strict=True)) - {(5, 5)}
    for found in (narrow[-1], wide[-1]):
        assert set(zip(*(c.tolist() for c in found.columns), strict=True)) == expected
        assert (found.diffs == 1).all()
    assert np.array_equal(narrow[0].columns[0], wide[0].columns[0])
