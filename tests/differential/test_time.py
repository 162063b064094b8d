"""Lattice laws of timestamps under the product order, and antichains."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from differential.time import Antichain, advance_by, column, join, less_equal, meet
from tests.differential.strategies import as_column, time_lists, times

Time = tuple[int, ...]


def le(a: Time, b: Time) -> bool:
    return bool(less_equal(column(a), column(b))[0])


@st.composite
def depth_and_times(draw: st.DrawFn, count: int) -> tuple[int, list[np.ndarray]]:
    """`count` time columns of one depth and one length."""
    depth = draw(st.integers(1, 3))
    n = draw(st.integers(1, 10))
    return depth, [as_column(draw(time_lists(depth, n, n)), depth) for _ in range(count)]


@given(depth_and_times(3))
def test_join_is_the_least_upper_bound(case: tuple[int, list[np.ndarray]]) -> None:
    _, (a, b, c) = case
    j = join(a, b)
    assert less_equal(a, j).all() and less_equal(b, j).all()
    above_both = less_equal(a, c) & less_equal(b, c)
    assert less_equal(j[:, above_both], c[:, above_both]).all()


@given(depth_and_times(3))
def test_meet_is_the_greatest_lower_bound(case: tuple[int, list[np.ndarray]]) -> None:
    _, (a, b, c) = case
    m = meet(a, b)
    assert less_equal(m, a).all() and less_equal(m, b).all()
    below_both = less_equal(c, a) & less_equal(c, b)
    assert less_equal(c[:, below_both], m[:, below_both]).all()


@given(depth_and_times(3))
def test_less_equal_is_a_partial_order(case: tuple[int, list[np.ndarray]]) -> None:
    _, (a, b, c) = case
    assert less_equal(a, a).all()
    both = less_equal(a, b) & less_equal(b, a)
    assert (a[:, both] == b[:, both]).all()  # antisymmetric
    chain = less_equal(a, b) & less_equal(b, c)
    assert less_equal(a[:, chain], c[:, chain]).all()  # transitive


def test_product_order_leaves_crossing_times_incomparable() -> None:
    assert not le((2, 5), (3, 1)) and not le((3, 1), (2, 5))
    assert le((2, 1), (3, 1)) and le((2, 1), (2, 5))


@st.composite
def frontier_case(draw: st.DrawFn) -> tuple[Antichain, np.ndarray, np.ndarray]:
    """A frontier, times to advance, and times at or beyond the frontier."""
    depth = draw(st.integers(1, 3))
    frontier = Antichain(draw(time_lists(depth, 1, 4)))
    ts = as_column(draw(time_lists(depth, 1, 12)), depth)
    beyond = []
    for _ in range(draw(st.integers(1, 12))):
        base = draw(st.sampled_from(list(frontier)))
        bump = draw(times(depth, 4))
        beyond.append(tuple(x + y for x, y in zip(base, bump, strict=True)))
    return frontier, ts, as_column(beyond, depth)


@given(frontier_case())
def test_advance_by_preserves_comparisons_with_every_time_beyond_the_frontier(
    case: tuple[Antichain, np.ndarray, np.ndarray],
) -> None:
    frontier, ts, beyond = case
    advanced = advance_by(ts, frontier)
    assert frontier.beyond(beyond).all()
    for j in range(beyond.shape[1]):
        target = beyond[:, j : j + 1]
        assert (less_equal(ts, target) == less_equal(advanced, target)).all()


@given(frontier_case())
def test_advance_by_moves_times_forward_and_is_idempotent(
    case: tuple[Antichain, np.ndarray, np.ndarray],
) -> None:
    frontier, ts, _ = case
    advanced = advance_by(ts, frontier)
    assert less_equal(ts, advanced).all()
    assert (advance_by(advanced, frontier) == advanced).all()


def test_advance_by_to_one_epoch_collapses_history_but_keeps_iterations() -> None:
    ts = as_column([(1, 0), (2, 3), (5, 1)], 2)
    advanced = advance_by(ts, Antichain([(4, 0)]))
    assert advanced.T.tolist() == [[4, 0], [4, 3], [5, 1]]


@given(st.integers(1, 3).flatmap(lambda d: time_lists(d, 0, 10)))
def test_antichain_keeps_exactly_the_minimal_elements(ts: list[Time]) -> None:
    chain = Antichain(ts)
    elements = list(chain)
    assert all(not le(a, b) for a in elements for b in elements if a != b)
    assert sorted(elements) == sorted({t for t in ts if not any(le(s, t) and s != t for s in ts)})
    for t in ts:
        assert chain.less_equal(t)
    if ts:
        assert chain.beyond(as_column(ts, len(ts[0]))).all()


def test_the_empty_antichain_is_beyond_nothing_and_advances_nothing() -> None:
    empty = Antichain()
    assert empty.empty and not empty.less_equal((0,))
    ts = as_column([(3,), (1,)], 1)
    assert (advance_by(ts, empty) == ts).all()


def test_dominates_compares_frontiers() -> None:
    assert Antichain([(1, 0)]).dominates(Antichain([(2, 0), (1, 3)]))
    assert not Antichain([(2, 0)]).dominates(Antichain([(1, 3)]))
