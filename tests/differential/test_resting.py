"""`Engine.rest` and `Engine.wake`: a live dataflow sits out an epoch that changes no
input it reads (a why-not watch's followed relations, docs/adr/0071), and misses
nothing; a dataflow dropped while it rests stays dropped."""

from __future__ import annotations

from differential.engine import Engine
from tests.differential.harness import I64, Accumulated, collection, requests


def _reader(engine: Engine, name: str) -> tuple[object, Accumulated]:
    df = engine.dataflow(f"reads {name}")
    seen = Accumulated(df.capture(collection(df, name, 1).output, name))
    engine.start(df)
    return df, seen


def test_a_resting_dataflow_sits_out_its_epoch_and_misses_nothing() -> None:
    engine = Engine()
    engine.create_input("a", [I64])
    engine.create_input("b", [I64])
    reads_a, seen_a = _reader(engine, "a")
    _, seen_b = _reader(engine, "b")
    engine.rest([reads_a])
    assert reads_a not in engine.dataflows and engine.resting == [reads_a]
    engine.commit({"b": requests([(True, (1,))], 1)})  # nothing `a` reads changes
    engine.wake()
    assert reads_a in engine.dataflows and not engine.resting
    engine.commit({"a": requests([(True, (7,)), (True, (8,))], 1)})
    assert seen_a.rows() == {(7,): 1, (8,): 1} and seen_a.epochs == [0, 2]
    assert seen_b.rows() == {(1,): 1}


def test_a_dataflow_dropped_while_it_rests_does_not_come_back() -> None:
    engine = Engine()
    engine.create_input("a", [I64])
    reads_a, _ = _reader(engine, "a")
    engine.rest([reads_a])
    engine.retire(reads_a)  # a listener closed the watch during the epoch
    engine.wake()
    assert reads_a not in engine.dataflows
    assert not engine.inputs["a"].arrangements, "nothing reads `a` any more"
    engine.commit({"a": requests([(True, (1,))], 1)})
