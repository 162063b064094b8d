"""Packed diffs (ADR 0057): consolidating and arranging integer rows whose diffs differ
by sorting the rows packed with their diffs gives exactly what sorting a permutation
and gathering every column gives (`Tuning.packed_diffs` off: the reference).

Each case runs both tactics on the same input and compares every column, time and
diff, and for batches the hashes too: consolidation, a batch built from changes
(an identity key and others), a batch built from sorted runs (a merge), with diffs
that cancel, diffs far apart (which do not pack: the reference answers) and times
that differ or agree, a key column repeated in the values.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from differential.batch import Updates, consolidate
from differential.time import Antichain
from differential.trace.batch import Batch, Description, merge
from differential.tuning import TUNING, tuned
from tests.differential.strategies import as_column, updates
from tests.differential.test_load_paths import assert_same, assert_same_batch

KINDS = st.sampled_from([("i",), ("i", "i"), ("i", "i", "i")])


@st.composite
def changes(draw: st.DrawFn) -> Updates:
    """Integer updates, their diffs small (they pack) or some far apart (they do not)."""
    u = draw(updates(kinds=draw(KINDS), depth=draw(st.integers(1, 2)), domain=4, max_size=60))
    if u.arity > 1 and draw(st.booleans()):  # the key repeated in the tuple, as a reduce's
        copy = u.columns[0] if draw(st.booleans()) else u.columns[0].copy()
        u = Updates((u.columns[0], copy, *u.columns[2:]), u.times, u.diffs)
    if draw(st.booleans()):  # every row at one time, as a round's changes are
        u = Updates(u.columns, as_column([(3,) * u.depth] * len(u), u.depth), u.diffs)
    if len(u) and draw(st.booleans()):
        wide = u.diffs.copy()
        wide[draw(st.integers(0, len(u) - 1))] = draw(st.sampled_from([2**40, -(2**61)]))
        u = Updates(u.columns, u.times, wide)
    return u


def both(f, u: Updates):  # type: ignore[no-untyped-def]
    """`f(u)` with packed diffs and without (numpy kernels at every size)."""
    with tuned(TUNING.but(few=0, packed_diffs=True)):
        packed = f(u)
    with tuned(TUNING.but(few=0, packed_diffs=False)):
        reference = f(u)
    return packed, reference


DESCRIPTION = Description(Antichain([(0,)]), Antichain(), Antichain())


@given(changes())
def test_consolidating_with_packed_diffs_equals_the_reference(u: Updates) -> None:
    packed, reference = both(consolidate, u)
    assert_same(packed, reference)


@given(changes(), st.integers(1, 2))
def test_a_batch_built_with_packed_diffs_equals_the_reference(u: Updates, key_arity: int) -> None:
    key_arity = min(key_arity, u.arity)
    description = Description(Antichain([(0,) * u.depth]), Antichain(), Antichain())
    packed, reference = both(lambda x: Batch.build(x, key_arity, description), u)
    assert_same_batch(packed, reference)


@given(st.lists(changes(), min_size=2, max_size=4), st.booleans())
def test_merging_batches_with_packed_diffs_equals_the_reference(
    parts: list[Updates], advance: bool
) -> None:
    """Sorted runs (batches) merged, their times advanced or not (a compaction)."""
    depth = parts[0].depth
    parts = [p for p in parts if p.depth == depth and p.arity == parts[0].arity]
    description = Description(Antichain([(0,) * depth]), Antichain(), Antichain())
    since = Antichain([(2,) + (1,) * (depth - 1)]) if advance else Antichain()

    def merged(_: Updates) -> Batch:
        return merge([Batch.build(p, 1, description) for p in parts], since)

    packed, reference = both(merged, parts[0])
    assert_same_batch(packed, reference)


def test_packed_diffs_cancel_to_nothing_and_sum_per_row() -> None:
    key = np.array([5, 3, 5, 3, 5, 7], dtype=np.int64)
    value = np.array([1, 2, 1, 2, 1, 0], dtype=np.int64)
    diffs = np.array([1, -1, -1, 1, 2, 3], dtype=np.int64)
    u = Updates((key, value), as_column([(0,)] * 6, 1), diffs)
    with tuned(TUNING.but(few=0, packed_diffs=True)):
        found = consolidate(u)
        built = Batch.build(u, 1, DESCRIPTION)
    expected = [(5, 1, 2), (7, 0, 3)]  # (3, 2) cancels; (5, 1) sums 1 - 1 + 2
    assert (
        list(zip(*(c.tolist() for c in found.columns), found.diffs.tolist(), strict=True))
        == expected
    )
    assert (
        list(zip(*(c.tolist() for c in built.columns), built.diffs.tolist(), strict=True))
        == expected
    )
    assert built.hashes.tolist() == [5, 7]


def test_a_repeated_column_is_packed_once_and_shared() -> None:
    key = np.array([5, 3, 5, 3, 9], dtype=np.int64)
    value = np.array([1, 2, 1, 2, 0], dtype=np.int64)
    diffs = np.array([1, 1, 1, -1, -1], dtype=np.int64)
    u = Updates((key, key.copy(), value), as_column([(0,)] * 5, 1), diffs)
    with tuned(TUNING.but(few=0, packed_diffs=True)):
        built = Batch.build(u, 1, DESCRIPTION)
    rows = list(zip(*(c.tolist() for c in built.columns), built.diffs.tolist(), strict=True))
    assert rows == [(5, 5, 1, 2), (9, 9, 0, -1)]
    assert built.columns[1] is built.columns[0] is built.hashes
