"""Timestamps under the product partial order, and antichains (frontiers).

Layer: differential (bottom). Imports numpy only.

A timestamp is a vector of int64 coordinates: `(epoch,)` in the root scope,
`(epoch, iteration)` inside one iteration scope, one more coordinate per level
of nesting. A column of `n` timestamps of depth `d` is an int64 array of shape
`(d, n)`: one row per coordinate. Every lattice operation is vectorized over
such columns; single timestamps are plain tuples.

The order is the product order: `s <= t` iff every coordinate of `s` is `<=`
the same coordinate of `t`. `join` (least upper bound) is the coordinate-wise
max, `meet` the coordinate-wise min. Lexicographic order is a linear extension
of the product order; the scheduler processes times in that order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import numpy.typing as npt

from differential.tuning import TUNING

Times = npt.NDArray[np.int64]  # shape (depth, n)
Time = tuple[int, ...]


def column(time: Time, n: int = 1) -> Times:
    """`n` copies of one timestamp as a time column: from `TUNING.uniform_from` rows on,
    read-only and without memory per row (`uniform_times`)."""
    if n >= TUNING.uniform_from:
        return uniform_times(time, n)
    if n <= 8:  # one numpy call for the few rows of a small change
        return np.array([[x] * n for x in time], dtype=np.int64).reshape(len(time), n)
    return np.repeat(np.asarray(time, dtype=np.int64).reshape(-1, 1), n, axis=1)


def uniform_times(time: Time, n: int) -> Times:
    """`n` copies of one time as a read-only time column that takes no memory per row:
    stride 0 along the rows (a static load's batch has one time, so has each round of
    an iteration; ADR 0044)."""
    return np.broadcast_to(np.asarray(time, dtype=np.int64).reshape(-1, 1), (len(time), n))


def shifted(times: Times, step: Times) -> Times:
    """`times + step` (`step` one time, shape `(depth, 1)`): one repeated time staying
    one (`uniform_times`), as a round's changes cross the back edge of an iteration."""
    if times.ndim == 2 and times.shape[1] > 1 and times.strides[1] == 0:
        return uniform_times(tuple((times[:, 0] + step[:, 0]).tolist()), times.shape[1])
    return times + step


def join_times(a: Time | None, b: Time) -> Time:
    """The least upper bound of two times (`a` None: nothing yet, so `b`)."""
    return b if a is None else tuple(map(max, a, b))


def le(a: Time, b: Time) -> bool:
    """`a <= b` in the product order."""
    for x, y in zip(a, b, strict=True):  # noqa: SIM110 (a loop: no generator per call)
        if x > y:
            return False
    return True


def at_or_before(time: Time) -> Callable[[Time], bool]:
    """`lambda t: le(t, time)`, without a loop for the depths of the root scope and
    of one iteration scope (the list paths ask it of every entry they read)."""
    if len(time) == 1:
        (a,) = time
        return lambda t: t[0] <= a
    if len(time) == 2:
        a, b = time
        return lambda t: t[0] <= a and t[1] <= b
    return lambda t: le(t, time)


def split_by_time(times: Times) -> list[tuple[Time, npt.NDArray[np.intp]]]:
    """The distinct times of a time column, in lexicographic order, each with the
    positions that carry it."""
    order = np.lexsort(times[::-1])
    ordered = times[:, order]
    cuts = np.flatnonzero(np.any(ordered[:, 1:] != ordered[:, :-1], axis=0)) + 1
    return [(tuple(times[:, p[0]].tolist()), p) for p in np.split(order, cuts)]


def less_equal(a: Times, b: Times) -> npt.NDArray[np.bool_]:
    """Element-wise `a <= b` in the product order (broadcasts over columns)."""
    return np.all(a <= b, axis=0)


def join(a: Times, b: Times) -> Times:
    """Element-wise least upper bound."""
    return np.maximum(a, b)


def meet(a: Times, b: Times) -> Times:
    """Element-wise greatest lower bound."""
    return np.minimum(a, b)


class Antichain:
    """A set of mutually incomparable times: a frontier.

    A frontier `F` stands for the set of times `t` with some `f in F`, `f <= t`
    (the times that may still change). The empty antichain is the frontier of a
    finished computation: nothing may change any more.
    """

    __slots__ = ("_elements",)

    def __init__(self, elements: Iterable[Time] = ()) -> None:
        self._elements: list[Time] = []
        for t in elements:
            if self._elements:
                self.insert(t)
            else:  # the first element needs no comparisons
                self._elements.append(tuple(map(int, t)))

    def __iter__(self) -> Iterator[Time]:
        return iter(self._elements)

    def __len__(self) -> int:
        return len(self._elements)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Antichain) and sorted(self) == sorted(other)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._elements)))

    def __repr__(self) -> str:
        return f"Antichain({sorted(self._elements)})"

    @property
    def empty(self) -> bool:
        return not self._elements

    def insert(self, time: Time) -> bool:
        """Add `time` unless some element is `<=` it; drop elements it precedes."""
        t = tuple(map(int, time))
        if any(le(e, t) for e in self._elements):
            return False
        self._elements = [e for e in self._elements if not le(t, e)]
        self._elements.append(t)
        return True

    def less_equal(self, time: Time) -> bool:
        """True when some element is `<=` `time`: the frontier has not passed it."""
        return any(le(e, time) for e in self._elements)

    def dominates(self, other: Antichain) -> bool:
        """True when every time beyond `other` is also beyond `self`."""
        return all(self.less_equal(t) for t in other)

    def beyond(self, times: Times) -> npt.NDArray[np.bool_]:
        """Vectorized `less_equal`: which columns of `times` are at or beyond the frontier."""
        out = np.zeros(times.shape[1], dtype=bool)
        for e in self._elements:
            out |= less_equal(np.asarray(e, dtype=np.int64).reshape(-1, 1), times)
        return out


def advance_by(times: Times, frontier: Antichain) -> Times:
    """Logical compaction of a time column to a frontier.

    Each `t` becomes the meet over `f in frontier` of `t ⊔ f`: the least time
    that every time at or beyond the frontier compares with exactly as it
    compares with `t`. Accumulations at times beyond the frontier are unchanged.
    An empty frontier leaves the times as they are.
    """
    if frontier.empty or times.shape[1] == 0:
        return times
    # Every time at or beyond the frontier already: no copy (checked past a few rows,
    # where the check costs less than the copy it saves).
    elements = list(frontier) if times.shape[1] > TUNING.few else []
    if len(elements) == 1 and bool(
        (times.min(axis=1) >= np.asarray(elements[0], dtype=np.int64)).all()
    ):
        return times
    result: Times | None = None
    for f in frontier:
        joined = np.maximum(times, np.asarray(f, dtype=np.int64).reshape(-1, 1))
        result = joined if result is None else np.minimum(result, joined)
    assert result is not None
    return result
