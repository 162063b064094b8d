"""Runs of packed rows (ADR 0068): a packed consolidation finds the runs of equal rows
by comparing the bits above the packed diff (in blocks of `TUNING.probe` rows), and
sums a run's diffs by adding its repeated rows to its first (`np.add.at`) where few
rows repeat, or by reducing every row where most do. Both give what sorting a
permutation and gathering every column gives (`Tuning.packed_diffs` off: the
reference), at every block size, and the hand-checked sums.

The inputs are a round's candidates: a key repeated in the tuple, one time, diffs
of +1 and -1 that cancel in pairs (a value leaving one neighbour and reaching
another), runs of one, two and more rows.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from differential import batch as batch_module
from differential.batch import Updates, consolidate
from differential.time import uniform_times
from differential.tuning import TUNING, tuned
from tests.differential.test_load_paths import assert_same


def candidates(keys: list[int], values: list[int], diffs: list[int]) -> Updates:
    key = np.array(keys, dtype=np.int64)
    return Updates(
        (key, key, np.array(values, dtype=np.int64)),
        uniform_times((4, 2), len(keys)),
        np.array(diffs, dtype=np.int64),
    )


def triples(u: Updates) -> list[tuple[int, int, int]]:
    """(key, value, diff) of each consolidated row."""
    columns = (u.columns[0].tolist(), u.columns[2].tolist(), u.diffs.tolist())
    return list(zip(*columns, strict=True))


def consolidated(u: Updates, probe: int) -> tuple[Updates, int]:
    """`consolidate(u)` packed (blocks of `probe` rows) and how often it added repeated
    rows one by one; checked against the reference."""
    calls = [0]
    original = batch_module._add_repeats

    def counted(*args: object) -> None:
        calls[0] += 1
        original(*args)  # type: ignore[arg-type]

    packing = TUNING.but(few=0, probe=probe, packed_diffs=True)
    with tuned(packing), mock.patch.object(batch_module, "_add_repeats", counted):
        packed = consolidate(u)
    with tuned(TUNING.but(few=0, packed_diffs=False)):
        reference = consolidate(u)
    assert_same(packed, reference)
    assert packed.columns[0] is packed.columns[1], "the repeated key stays one array"
    return packed, calls[0]


@pytest.mark.parametrize("probe", [2, 3, 1 << 16])
def test_few_repeats_are_added_to_their_runs(probe: int) -> None:
    """Key 1 is offered 7 by three rows (+1, +1, -1: a run of three summing to 1), key
    2 is offered 5 and it is taken back (a pair cancelling), everything else once."""
    u = candidates(
        [3, 1, 2, 1, 4, 2, 1, 5, 6, 7, 8, 9],
        [9, 7, 5, 7, 1, 5, 7, 2, 3, 4, 5, 6],
        [1, 1, 1, 1, -1, -1, -1, 1, 1, -1, 1, 1],
    )
    out, added = consolidated(u, probe)
    assert added == 1, "few rows repeat: added one by one"
    assert triples(out) == [
        *[(1, 7, 1), (3, 9, 1), (4, 1, -1), (5, 2, 1)],
        *[(6, 3, 1), (7, 4, -1), (8, 5, 1), (9, 6, 1)],
    ]


@pytest.mark.parametrize("probe", [2, 1 << 16])
def test_most_rows_repeating_are_reduced_per_run(probe: int) -> None:
    """Ten pairs that cancel, one run of four (+1 three times, -1 once: 2), and one
    row alone: most rows repeat the one before."""
    keys, values, diffs = [], [], []
    for k in range(10):
        keys += [k, k]
        values += [k + 1, k + 1]
        diffs += [1, -1]
    keys += [20, 20, 20, 20, 21]
    values += [0, 0, 0, 0, 3]
    diffs += [1, 1, -1, 1, -1]
    out, added = consolidated(candidates(keys, values, diffs), probe)
    assert added == 0, "most rows repeat: every row reduced"
    assert triples(out) == [(20, 0, 2), (21, 3, -1)]


@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 3), st.sampled_from([1, -1, 2, -3])),
        min_size=1,
        max_size=80,
    ),
    st.sampled_from([2, 5, 1 << 16]),
)
def test_packed_runs_equal_the_reference(rows: list[tuple[int, int, int]], probe: int) -> None:
    keys, values, diffs = (list(c) for c in zip(*rows, strict=True))
    consolidated(candidates(keys, values, diffs), probe)
