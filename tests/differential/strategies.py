"""Hypothesis strategies for the differential tests: times, updates, request streams."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

from differential.batch import Updates
from tests.differential.harness import Op

# -- times -------------------------------------------------------------------------


def times(depth: int, top: int = 6) -> st.SearchStrategy[tuple[int, ...]]:
    return st.tuples(*[st.integers(0, top)] * depth)


def time_lists(depth: int, min_size: int = 1, max_size: int = 12) -> st.SearchStrategy:
    return st.lists(times(depth), min_size=min_size, max_size=max_size)


def as_column(ts: Sequence[tuple[int, ...]], depth: int) -> np.ndarray:
    """Time tuples as a `(depth, n)` int64 column."""
    return np.array(ts, dtype=np.int64).reshape(-1, depth).T.copy()


# -- updates -----------------------------------------------------------------------


@st.composite
def updates(
    draw: st.DrawFn,
    kinds: Sequence[str] = ("i", "i"),
    depth: int = 1,
    domain: int = 4,
    max_size: int = 40,
) -> Updates:
    """Unconsolidated updates over small domains (so duplicates are common).

    `kinds` gives each column's dtype kind: "i" int64, "f" float64 (small halves,
    including negative values; never -0.0 or NaN, whose order is not a tuple order).
    """
    n = draw(st.integers(0, max_size))
    cols = []
    for kind in kinds:
        raw = draw(st.lists(st.integers(-domain, domain), min_size=n, max_size=n))
        if kind == "f":
            cols.append(np.array([x / 2 for x in raw], dtype=np.float64) + 0.0)
        else:
            cols.append(np.array(raw, dtype=np.int64))
    ts = draw(st.lists(times(depth, 3), min_size=n, max_size=n))
    diffs = draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n))
    return Updates(tuple(cols), as_column(ts, depth), np.array(diffs, dtype=np.int64))


# -- request streams ---------------------------------------------------------------


def ops(arity: int, domain: int, max_size: int = 6) -> st.SearchStrategy[list[Op]]:
    """One transaction's requests on one relation: inserts and retracts, in order."""
    row = st.tuples(*[st.integers(0, domain - 1)] * arity)
    return st.lists(st.tuples(st.booleans(), row), max_size=max_size)


def streams(
    relations: dict[str, tuple[int, int]], min_epochs: int = 1, max_epochs: int = 6
) -> st.SearchStrategy[list[dict[str, list[Op]]]]:
    """Epochs of transactions: `relations` maps name to `(arity, domain)`.

    Insert-heavy early epochs would make retraction rare; instead each request is
    an insert or a retract with equal odds, and rows are drawn from small domains so
    that retractions hit present rows often.
    """
    epoch = st.fixed_dictionaries(
        {name: ops(arity, domain) for name, (arity, domain) in relations.items()}
    )
    return st.lists(epoch, min_size=min_epochs, max_size=max_epochs)


def first_epoch_inserts(
    relations: dict[str, tuple[int, int]], max_size: int = 12
) -> st.SearchStrategy[dict[str, list[Op]]]:
    """A first transaction that only inserts: a populated start for later retractions."""
    return st.fixed_dictionaries(
        {
            name: st.lists(
                st.tuples(st.just(True), st.tuples(*[st.integers(0, domain - 1)] * arity)),
                max_size=max_size,
            )
            for name, (arity, domain) in relations.items()
        }
    )
