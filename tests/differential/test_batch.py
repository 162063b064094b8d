"""Consolidation of columnar updates against a dict-based reference."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from differential.batch import Updates, concat, consolidate
from tests.differential.strategies import updates

KINDS = st.sampled_from([("i",), ("i", "i"), ("f",), ("i", "f", "i"), ()])


@st.composite
def any_updates(draw: st.DrawFn) -> Updates:
    return draw(updates(kinds=draw(KINDS), depth=draw(st.integers(1, 3))))


def reference(u: Updates) -> list[tuple[object, ...]]:
    """Rows `(*data, time, diff)` summed per (data, time), zeros dropped, sorted."""
    sums: dict[tuple[object, ...], int] = defaultdict(int)
    for row in u.rows():
        sums[row[:-1]] += row[-1]  # type: ignore[operator]
    return sorted((*k, v) for k, v in sums.items() if v)


@given(any_updates())
def test_consolidate_equals_the_dict_reference(u: Updates) -> None:
    out = consolidate(u)
    assert out.rows() == reference(u)
    assert out.arity == u.arity and out.depth == u.depth
    assert all(c.dtype == d.dtype for c, d in zip(out.columns, u.columns, strict=True))


@given(any_updates())
def test_consolidate_is_idempotent(u: Updates) -> None:
    once = consolidate(u)
    assert consolidate(once).rows() == once.rows()


@given(any_updates(), st.randoms(use_true_random=False))
def test_consolidate_does_not_depend_on_the_order_of_updates(u: Updates, rnd: object) -> None:
    perm = np.arange(len(u))
    rnd.shuffle(perm)  # type: ignore[attr-defined]
    assert consolidate(u.take(perm)).rows() == consolidate(u).rows()


@given(any_updates(), st.integers(0, 40))
def test_consolidating_parts_then_the_whole_equals_consolidating_once(u: Updates, cut: int) -> None:
    cut = min(cut, len(u))
    parts = [consolidate(u.take(np.arange(cut))), consolidate(u.take(np.arange(cut, len(u))))]
    assert consolidate(concat(parts)).rows() == consolidate(u).rows()


def test_consolidate_cancels_to_empty() -> None:
    u = Updates.at([np.array([3, 3, 1]), np.array([2.5, 2.5, 0.0])], (4,), np.array([1, -1, 0]))
    out = consolidate(u)
    assert len(out) == 0 and out.columns[1].dtype == np.float64


def test_consolidate_orders_by_data_then_time() -> None:
    u = Updates(
        (np.array([2, 1, 1, 1]),),
        np.array([[0, 3, 1, 2], [0, 0, 5, 0]]),
        np.array([1, 1, 1, 1]),
    )
    assert [r[:2] for r in consolidate(u).rows()] == [
        (1, (1, 5)),
        (1, (2, 0)),
        (1, (3, 0)),
        (2, (0, 0)),
    ]


@given(
    st.sampled_from([np.int32, np.int64, np.uint64]),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2)), min_size=1, max_size=30),
)
def test_consolidate_orders_extreme_integer_columns(
    dtype: type, picks: list[tuple[int, int]]
) -> None:
    """Whole-range values of narrow, signed and unsigned dtypes (the packed-key sort)."""
    info = np.iinfo(dtype)
    values: np.ndarray = np.array([info.min, info.min + 1, info.max - 1, info.max], dtype=dtype)
    col = values[[p for p, _ in picks]]
    small = np.array([s for _, s in picks], dtype=np.int64)
    u = Updates(
        (small, col), np.zeros((1, len(picks)), dtype=np.int64), np.ones(len(picks), np.int64)
    )
    assert consolidate(u).rows() == reference(u)
