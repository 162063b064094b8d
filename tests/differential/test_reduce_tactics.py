"""Every tactic of the reduce driver against its reference tactic (ADR 0050).

`ReduceOp` picks, per step, a growing tactic (`GrowingDistinct`, `LeastGrowing`)
while its input only grows, else the rows tactic for a few keys and the columns
tactic otherwise. The columns tactic alone, with no growing tactic, is the
reference: with every tactic on (and the rows tactic's thresholds at the default,
at zero and far up) the change emitted at each time of the lattice must be the
reference's, update for update once consolidated (a reduce's output at a time is
determined by its input: `out(t) = f(in@t) - sum of out(s) for s < t`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from differential.dataflow import Scope, Stream
from differential.operators.arrange import ArrangeOp
from differential.operators.reduce import ReduceOp, count, distinct, maximum, minimum
from differential.operators.reduce_tactics import ColumnsTactic
from differential.tuning import Tuning, tuned
from tests.differential.test_lattice import I64, Timed, _collect, _run_scope, _send
from tests.differential.test_least_growing import least

SPANS = st.lists(
    st.tuples(
        st.tuples(st.integers(0, 3), st.integers(0, 4)),  # (key, value)
        st.tuples(st.integers(0, 1), st.integers(0, 3)),  # from
        st.integers(0, 3),  # for this many iterations (0: to the end)
    ),
    max_size=14,
)
# name: (reducer, output value dtypes, key-only input)
REDUCERS: dict[str, tuple[Any, list[Any], bool]] = {
    "distinct": (distinct, [], True),  # its growing tactic: GrowingDistinct
    "least": (least, [I64], False),  # its growing tactic: LeastGrowing
    "count": (count, [I64], False),
    "minimum": (minimum, [I64], False),
    "maximum": (maximum, [I64], False),
}
TUNINGS = {
    "default": Tuning.default(),
    "columns_only": Tuning.columns_only(),
    "rows_first": Tuning.rows_first(),
}


def _run(name: str, updates: Timed, reference: bool) -> Counter[tuple[Any, ...]]:
    reducer, out_dtypes, keys_only = REDUCERS[name]
    scope = Scope(2, None, "lattice")
    stream = Stream(scope, [I64] if keys_only else [I64, I64], "input")
    reduce = ReduceOp(ArrangeOp(stream, 1), reducer, out_dtypes, name)
    if reference:
        reduce.growing, reduce.growing_distinct = None, None
        reduce.tactics = [ColumnsTactic(reduce)]
    output = _collect(reduce.output)
    _send(stream, [((row[0],) if keys_only else row, t, d) for row, t, d in updates])
    _run_scope(scope)
    out: Counter[tuple[Any, ...]] = Counter()
    for row, time, diff in output:
        out[(row, time)] += diff
    return +out


@pytest.mark.parametrize("tuning", list(TUNINGS))
@pytest.mark.parametrize("name", list(REDUCERS))
@given(spans=SPANS)
def test_every_tactic_emits_the_reference_tactics_changes_at_every_time(
    name: str, tuning: str, spans: list[Any]
) -> None:
    updates: Timed = []
    for row, start, length in spans:  # each row present from one time until a later one
        updates.append((row, start, 1))
        if length:
            updates.append((row, (start[0], start[1] + length), -1))
    note(f"updates: {updates}")
    expected = _run(name, updates, reference=True)
    with tuned(TUNINGS[tuning]):
        assert _run(name, updates, reference=False) == expected


def test_the_reference_run_takes_no_growing_or_rows_tactic() -> None:
    """The switch the twin test relies on: the reference reduce has only the columns
    tactic, the default one a growing tactic and the rows tactic first."""
    scope = Scope(2, None, "lattice")
    stream = Stream(scope, [I64], "input")
    reduce = ReduceOp(ArrangeOp(stream, 1), distinct, [], "distinct")
    assert reduce.growing is not None
    assert [type(t).__name__ for t in reduce.tactics] == ["RowsTactic", "ColumnsTactic"]
