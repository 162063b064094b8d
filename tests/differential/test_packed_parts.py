"""Packed parts (ADR 0063): merging batches, or arranging a time's updates that came in
parts, by packing each part's rows into one array in place (`Tuning.packed_parts`)
builds exactly the batch that concatenating the parts and building gives (the
reference): merges whole or fueled a slice at a time, and unsorted parts.

The inputs are shaped like a recursive reduce's: each batch a round's changes at one
time (its time column one repeated value) or a merge of several rounds, the key
repeated in the tuple (one array shared), diffs that cancel across batches once
their times are advanced to the same time, diffs that do not pack, and keys of two
columns (no identity hash: the reference answers).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from differential.batch import Updates, concat, consolidate_packed, consolidate_packed_parts
from differential.sort import pack, pack_parts
from differential.time import Antichain, uniform_times
from differential.trace.batch import Batch, Description, build_parts, merge
from differential.trace.fuel import Merging
from differential.tuning import TUNING, tuned
from tests.differential.strategies import updates
from tests.differential.test_load_paths import assert_same, assert_same_batch


@st.composite
def rounds(draw: st.DrawFn) -> list[Updates]:
    """Two to four batches' updates (depth 2: epoch and round), the key repeated in
    the tuple in some, each at one round or at several."""
    n = draw(st.integers(2, 4))
    arity = draw(st.sampled_from([2, 3]))
    shared = draw(st.booleans())
    out = []
    for r in range(n):
        u = draw(updates(kinds=("i",) * arity, depth=2, domain=4, max_size=30))
        if shared and arity == 3:
            u = Updates((u.columns[0], u.columns[0], u.columns[2]), u.times, u.diffs)
        if len(u) > 1 and draw(st.booleans()):  # one round: one repeated time
            u = u.with_times(uniform_times((draw(st.integers(0, 1)), r), len(u)))
        if len(u) and draw(st.booleans()):  # a diff too wide to pack
            wide = u.diffs.copy()
            wide[0] = 2**61
            u = Updates(u.columns, u.times, wide)
        out.append(u)
    return out


def batches(parts: list[Updates], key_arity: int) -> list[Batch]:
    description = Description(Antichain([(0, 0)]), Antichain(), Antichain())
    return [Batch.build(p, key_arity, description) for p in parts]


def twin(f):  # type: ignore[no-untyped-def]
    """`f()` with packed merges and without (numpy kernels at every size)."""
    with tuned(TUNING.but(few=0, packed_parts=True)):
        packed = f()
    with tuned(TUNING.but(few=0, packed_parts=False)):
        reference = f()
    return packed, reference


SINCES = st.sampled_from(
    [Antichain(), Antichain([(0, 0)]), Antichain([(2, 1)]), Antichain([(1, 5)])]
)


@given(rounds(), st.sampled_from([1, 2]), SINCES)
def test_a_packed_merge_builds_the_batch_concatenating_builds(
    parts: list[Updates], key_arity: int, since: Antichain
) -> None:
    inputs = [b for b in batches(parts, key_arity) if len(b)]
    if not inputs:
        return
    packed, reference = twin(lambda: merge(inputs, since))
    assert_same_batch(packed, reference)


@given(rounds(), st.sampled_from([1, 2]))
def test_arranging_parts_builds_the_batch_concatenating_builds(
    parts: list[Updates], key_arity: int
) -> None:
    """A round's changes from two joins (unsorted parts), arranged at once."""
    description = Description(Antichain([(0, 0)]), Antichain(), Antichain())
    packed, reference = twin(lambda: build_parts(parts, key_arity, description))
    assert_same_batch(packed, reference)


@given(rounds(), SINCES, st.integers(1, 7))
def test_a_fueled_packed_merge_builds_the_batch_concatenating_builds(
    parts: list[Updates], since: Antichain, fuel: int
) -> None:
    inputs = [b for b in batches(parts, 1) if len(b)]
    if not inputs:
        return

    def fueled() -> Batch:
        merging = Merging(inputs, since)
        while merging.result is None:
            merging.work(fuel)
        return merging.result

    packed, reference = twin(fueled)
    assert_same_batch(packed, reference)


@given(rounds())
def test_consolidating_parts_equals_consolidating_their_concatenation(
    parts: list[Updates],
) -> None:
    parts = [p for p in parts if len(p)]
    if not parts:
        return
    whole = concat(parts)
    for diff in (None, 1):
        found = consolidate_packed_parts(parts, diff)
        expected = consolidate_packed(whole, diff)
        assert (found is None) == (expected is None)
        if found is not None and expected is not None:
            assert_same(found, expected)


@given(rounds())
def test_packing_parts_equals_packing_their_concatenation(parts: list[Updates]) -> None:
    columns = [[*p.columns, *p.times] for p in parts]
    whole = [np.concatenate(c) for c in zip(*columns, strict=True)]
    found, expected = pack_parts(columns), pack(whole)
    assert found is not None and expected is not None
    assert found[1] == expected[1] and np.array_equal(found[0], expected[0])


def test_rounds_that_all_differ_merge_without_a_run_index_and_cancel_when_advanced() -> None:
    key = np.array([1, 2, 3], dtype=np.int64)
    label = np.array([1, 1, 2], dtype=np.int64)
    first = Updates((key, key, label), uniform_times((0, 1), 3), np.array([1, 1, 1]))
    second = Updates((key[:2], key[:2], label[:2]), uniform_times((0, 2), 2), np.array([-1, 1]))
    inputs = batches([first, second], 1)
    with tuned(TUNING.but(few=0, packed_parts=True)):
        kept = merge(inputs, Antichain())
        advanced = merge(inputs, Antichain([(0, 2)]))  # both rounds become (0, 2)
    assert [tuple(t) for t in kept.times.T.tolist()] == [(0, 1), (0, 2), (0, 1), (0, 2), (0, 1)]
    assert kept.diffs.tolist() == [1, -1, 1, 1, 1]
    assert kept.columns[0] is kept.columns[1] is kept.hashes
    rows = list(zip(*(c.tolist() for c in advanced.columns), advanced.diffs.tolist(), strict=True))
    assert rows == [(2, 2, 1, 2), (3, 3, 2, 1)]  # (1, 1) cancelled: +1 at (0, 1), -1 at (0, 2)
