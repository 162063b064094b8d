"""The growing step of least-value reduces (`reduce_extreme`, ADR 0046) at every time
of the lattice, with retractions of the least value itself.

Datalog's subsumptions only retract dominated candidates while the step applies;
here rows come and go freely (each present from one time until a later one, so
no collection is ever negative), and the output accumulated at every time among
the input times and their joins must be the least present value per key: the
step's guard (a retraction at or below the new least takes the general path) is
what keeps it exact.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from differential.dataflow import Scope, Stream
from differential.operators.arrange import ArrangeOp
from differential.operators.reduce import Groups, ReduceOp, minimum
from differential.tuning import TUNING, tuned
from tests.differential.test_lattice import (
    I64,
    Timed,
    _check,
    _collect,
    _least_present,
    _per_key,
    _run_scope,
    _send,
)

SPANS = st.lists(
    st.tuples(
        st.tuples(st.integers(0, 2), st.integers(0, 4)),  # (key, value)
        st.tuples(st.integers(0, 1), st.integers(0, 3)),  # from
        st.integers(0, 3),  # for this many iterations (0: to the end)
    ),
    max_size=12,
)


def least(groups: Groups) -> Any:
    return minimum(groups)


least.growing_least = 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("held", [True, False])  # the output read from a table, or the trace
@pytest.mark.parametrize("spread", [1, 10**15])  # keys by index, or sorted (a wide range)
@pytest.mark.parametrize("sorted_from", [2, 1 << 40])  # arranged changes grouped by runs, or not
@pytest.mark.parametrize("runs", [True, False])  # a batch read by its runs (ADR 0068), or not
@given(spans=SPANS)
def test_the_least_growing_step_is_right_at_every_time(
    held: bool, spread: int, sorted_from: int, runs: bool, spans: list[Any]
) -> None:
    updates: Timed = []
    for (key, value), start, length in spans:
        row = (key * spread - 10**15 * (spread > 1), value)
        updates.append((row, start, 1))
        if length:
            updates.append((row, (start[0], start[1] + length), -1))
    note(f"updates: {updates}")
    scope = Scope(2, None, "lattice")
    stream = Stream(scope, [I64, I64], "input")
    reduce = ReduceOp(ArrangeOp(stream, 1), least, [I64], "least")
    output = _collect(reduce.output)
    with tuned(TUNING.but(sorted_from=sorted_from, least_held=held, least_runs=runs)):
        _send(stream, updates)
        _run_scope(scope)
    _check([updates], output, lambda acc: _per_key(acc, _least_present))


def test_a_retracted_least_is_replaced_by_the_next_one() -> None:
    """Values 1 and 3 at (0, 0); 1 goes at (0, 1): the least is 3 from then on."""
    updates: Timed = [((0, 1), (0, 0), 1), ((0, 3), (0, 0), 1), ((0, 1), (0, 1), -1)]
    scope = Scope(2, None, "lattice")
    stream = Stream(scope, [I64, I64], "input")
    reduce = ReduceOp(ArrangeOp(stream, 1), least, [I64], "least")
    output = _collect(reduce.output)
    _send(stream, updates)
    _run_scope(scope)
    at_end: Counter[tuple[int, ...]] = Counter()
    for row, _, diff in output:
        at_end[row] += diff
    assert +at_end == Counter({(0, 3): 1})
