"""Membership through a batch's pair bitmap equals the hash lookup it replaces.

`lookup_batch(..., columns=[])` answers from `DensePairs` when the batch holds
only pairs of small non-negative integers at one time with one diff; every
other batch takes the hash path. Both paths are compared on twin batches (one
whose cache refuses the bitmap); `tests/datalog/test_batch_count.py` counts
triangles through it.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from differential.batch import Updates
from differential.time import Antichain
from differential.trace.batch import Batch, Description, key_hash
from differential.trace.cursor import lookup_batch
from differential.trace.dense import DensePairs
from differential.tuning import TUNING, tuned

SMALL = st.integers(-2, 40)
PAIRS = st.lists(st.tuples(SMALL, SMALL), max_size=120)


def _batch(rows: list[tuple[int, ...]], times: list[int], diffs: list[int], dtype: str) -> Batch:
    cols = tuple(np.array([r[i] for r in rows], dtype=dtype) for i in range(len(rows[0])))
    updates = Updates(cols, np.array([times], dtype=np.int64), np.array(diffs, dtype=np.int64))
    return Batch.build(updates, 2, Description(Antichain([(0,)]), Antichain(), Antichain()))


def _answer(found: tuple[np.ndarray, Updates] | None) -> list[tuple[int, int, int]]:
    if found is None:
        return []
    query, u = found
    return sorted(zip(query.tolist(), u.times[0].tolist(), u.diffs.tolist(), strict=True))


def _around(x: int, y: int, rows: list[tuple[int, ...]]) -> list[tuple[int, int]]:
    """An entry, its neighbours on the grid, the next row's first cell (where a
    wrong width would land) and cells just outside the grid."""
    x_max, y_max = max(r[0] for r in rows), max(r[1] for r in rows)
    near = [(x, y), (x, y + 1), (x + 1, y), (x - 1, y), (x, y - 1), (x + 1, 0), (x - 1, y_max)]
    return [*near, (-1, y), (x, -1), (x_max + 1, y), (x, y_max + 1)]


@given(
    PAIRS.filter(bool).map(lambda pairs: [(0, 0), *pairs]),
    PAIRS,
    st.sampled_from(["uniform", "two times", "two diffs", "values"]),
    st.sampled_from(["int64", "int32"]),
)
def test_the_bitmap_answers_as_the_hash_lookup(
    entries: list[tuple[int, int]], queries: list[tuple[int, int]], shape: str, dtype: str
) -> None:
    rows: list[tuple[int, ...]] = sorted(set(entries))
    n = len(rows)
    times = [3] * n if shape != "two times" else [3 + i % 2 for i in range(n)]
    diffs = [2] * n if shape != "two diffs" else [1 + i % 2 for i in range(n)]
    if shape == "values":
        rows = [(*r, i % 3) for i, r in enumerate(rows)]
    asked = [*queries, *(q for r in rows[:20] for q in _around(r[0], r[1], rows))]
    asked *= 64 // len(asked) + 1  # at least `TUNING.few_keys` queries: a lookup of many keys
    keys = [np.array([q[i] for q in asked], dtype=dtype) for i in range(2)]
    dense, hashed = _batch(rows, times, diffs, dtype), _batch(rows, times, diffs, dtype)
    with tuned(TUNING.but(min_indexed=0)):
        hashed.cache.dense = False  # this twin never builds the bitmap
        got = lookup_batch(dense, keys, key_hash(keys), [])
        want = lookup_batch(hashed, keys, key_hash(keys), [])
    built = isinstance(dense.cache.dense, DensePairs)
    uniform = len(set(times)) == len(set(diffs)) == 1 and shape != "values"
    grid = (max(r[0] for r in rows) + 1) * (max(r[1] for r in rows) + 1)
    small = grid <= 8 * TUNING.dense_bytes_per_entry * n
    assert built == (uniform and small and min(min(r[:2]) for r in rows) >= 0)
    assert _answer(got) == _answer(want)


def test_a_grid_too_large_for_its_entries_is_not_built() -> None:
    x = np.array([0, 1, 1 << 20], dtype=np.int64)
    times, diffs = np.zeros((1, 3), dtype=np.int64), np.ones(3, dtype=np.int64)
    assert DensePairs.of((x, x), times, diffs) is None
    assert DensePairs.of((x[:2], x[:2]), times[:, :2], diffs[:2]) is not None
