"""Late inputs and measurements: what the engine offers introspection.

An input's `size` is the number of distinct rows its state holds, under every
semantics, staged epoch included and aborted epochs excluded; a late input's
changes for an epoch are asked for after the other dataflows ran it, and the
dataflows reading it see them in that same epoch; measuring arrangements changes
nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from differential.engine import Engine
from differential.graph import Dataflow
from differential.inputs import Requests, Semantics
from differential.operators.arrange import ArrangeOp
from differential.operators.join import JoinOp
from differential.operators.reduce import ReduceOp, distinct
from tests.differential.harness import I64, Accumulated, collection, counter, requests
from tests.differential.strategies import ops

STREAMS = st.lists(ops(2, 3, max_size=8), min_size=1, max_size=6)


@pytest.mark.parametrize("semantics", ["set", "multiset", "last_write_wins"])
@given(stream=STREAMS)
def test_size_is_the_number_of_distinct_rows_held(semantics: Semantics, stream: list) -> None:
    note(f"stream: {stream}")
    engine = Engine()
    source = engine.create_input("r", [I64, I64], semantics)
    for txn in stream:
        engine.commit({"r": requests(txn, 2)})
        held = counter(source.presence.spine.accumulate(None))
        assert source.size == sum(1 for n in held.values() if n > 0)


def test_size_counts_the_staged_epoch_and_forgets_an_aborted_one() -> None:
    engine = Engine()
    source = engine.create_input("r", [I64, I64], "multiset")
    sizes: list[int] = []
    engine.create_input("probe", [I64], late=True)
    engine.late_changes = lambda epoch: sizes.append(source.size) or {}
    df = engine.dataflow("reads probe")
    collection(df, "probe", 1)
    engine.start(df)
    engine.commit({"r": requests([(True, (1, 1)), (True, (1, 1)), (True, (2, 2))], 2)})
    assert sizes == [2] and source.size == 2

    def fail(epoch: int) -> Mapping[str, Requests]:
        raise RuntimeError("measuring failed")

    engine.late_changes = fail
    with pytest.raises(RuntimeError):
        engine.commit({"r": requests([(True, (3, 3))], 2)})
    assert source.size == 2 and engine.epoch == 1


def _observed(engine: Engine, name: str, arity: int) -> tuple[Dataflow, Accumulated]:
    df = engine.dataflow(f"observe {name}")
    acc = Accumulated(df.capture(collection(df, name, arity).output, name))
    engine.start(df)
    return df, acc


def test_a_late_input_changes_in_the_epoch_its_cause_committed() -> None:
    engine = Engine()
    edges = engine.create_input("edge", [I64, I64])
    engine.create_input("count", [I64], late=True)
    reads_edges, _ = _observed(engine, "edge", 2)
    published: list[int] = []

    def late_changes(epoch: int) -> Mapping[str, Requests]:
        assert reads_edges.imports[0].delivered == epoch  # it ran this epoch already
        old = [(False, (published[-1],))] if published else []
        published.append(edges.size)
        return {"count": requests([*old, (True, (edges.size,))], 1)}

    engine.late_changes = late_changes
    reads_counts, counts = _observed(engine, "count", 1)
    assert reads_counts.late and not reads_edges.late
    engine.commit({"edge": requests([(True, (1, 2)), (True, (2, 3))], 2)})
    assert counts.rows() == {(2,): 1} and counts.epochs[-1] == engine.epoch == 1
    engine.commit({"edge": requests([(False, (1, 2))], 2)})
    assert counts.rows() == {(1,): 1} and counts.epochs[-1] == 2


def test_a_dataflow_joining_a_late_and_a_plain_input_sees_both_changes_of_an_epoch() -> None:
    engine = Engine()
    engine.create_input("edge", [I64, I64])
    engine.create_input("mark", [I64], late=True)
    engine.late_changes = lambda epoch: {"mark": requests([(True, (epoch,))], 1)}
    df = engine.dataflow("join")
    marks = df.import_input("mark", [0], 1)
    sources = df.import_input("edge", [0, 1], 1)
    acc = Accumulated(df.capture(JoinOp(sources, marks, [0, 1]).output, "out"))
    engine.start(df)
    assert df.late
    engine.commit({"edge": requests([(True, (1, 5)), (True, (2, 6))], 2)})
    assert acc.rows() == {(1, 5): 1}  # edge 1 meets mark 1 in epoch 1
    engine.commit({"edge": requests([(True, (2, 7))], 2)})
    assert acc.rows() == {(1, 5): 1, (2, 6): 1, (2, 7): 1}


def test_late_inputs_refuse_plain_requests_and_amend_only_while_unread() -> None:
    engine = Engine()
    engine.create_input("plain", [I64])
    engine.create_input("late", [I64], late=True)
    with pytest.raises(ValueError, match="late inputs"):
        engine.commit({"late": requests([(True, (1,))], 1)})
    with pytest.raises(ValueError, match="not late"):
        engine.amend({"plain": requests([(True, (1,))], 1)})
    engine.amend({"late": requests([(True, (1,))], 1)})
    assert engine.inputs["late"].size == 1 and engine.epoch == 0
    _, acc = _observed(engine, "late", 1)
    assert acc.rows() == {(1,): 1}
    with pytest.raises(ValueError, match="read by a dataflow"):
        engine.amend({"late": requests([(True, (2,))], 1)})
    engine.late_changes = lambda epoch: {"plain": requests([(True, (epoch,))], 1)}
    with pytest.raises(ValueError, match="only late inputs"):
        engine.commit({})
    assert engine.epoch == 0


def test_measuring_arrangements_arranges_and_merges_nothing() -> None:
    engine = Engine()
    engine.create_input("edge", [I64, I64])
    df = engine.dataflow("sources")
    edges = collection(df, "edge", 2).output
    keys = ReduceOp(ArrangeOp(edges, 2), distinct, [], "distinct")
    df.capture(keys.output, "out")
    engine.start(df)
    for i in range(40):  # more batches than a spine lets wait unmerged
        engine.commit({"edge": requests([(True, (i, i + 1))], 2)})
    shared = engine.inputs["edge"].arrangements[((0, 1), 2)]
    batches = list(shared.spine._batches)
    first = (shared.held(), df.traces(), engine.stats())
    assert (shared.held(), df.traces(), engine.stats()) == first
    assert shared.spine._batches == batches
    assert shared.held()[0] == len(shared) == 40
    assert np.array_equal(
        np.sort(shared.spine.accumulate(None).columns[0]), np.arange(40, dtype=np.int64)
    )
