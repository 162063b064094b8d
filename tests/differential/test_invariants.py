"""Invariants of incremental maintenance (pydbsp's, DESIGN §10).

The result may depend only on the inputs, never on how the changes were batched
or ordered; a change undone is no change; a dataflow started late agrees with one
maintained from the start; dropping a dataflow leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from differential.engine import Engine
from differential.graph import Dataflow
from differential.operators.reduce import count
from tests.differential.harness import (
    I64,
    Accumulated,
    Builder,
    Op,
    Row,
    build_antijoin,
    build_components,
    build_join,
    build_reach,
    build_reduce,
    new_engine,
    requests,
)

Txn = dict[str, list[Op]]
# Both kernels (Python for a few rows, numpy for many) meet the same oracle.
pytestmark = pytest.mark.usefixtures("small_path")

INPUTS = {"a": 2, "b": 2, "edge": 2, "root": 1}
DOMAIN = {"a": 4, "b": 4, "edge": 6, "root": 6}
SHAPES: dict[str, Builder] = {
    "join": build_join,
    "antijoin": build_antijoin,
    "count": build_reduce(count, [I64]),
    "reach": build_reach,
    "components": build_components,
}


def all_shapes(eng: Engine) -> dict[str, Accumulated]:
    """Start one dataflow per shape; return their accumulated outputs by name."""
    out = {}
    for name, build in SHAPES.items():
        df = eng.dataflow(name)
        out[name] = Accumulated(build(df))
        eng.start(df)
    return out


def results(accs: dict[str, Accumulated]) -> dict[str, dict[Row, int]]:
    return {name: acc.rows() for name, acc in accs.items()}


def run(txns: Sequence[Txn]) -> dict[str, dict[Row, int]]:
    """Every shape's final output after committing `txns` in order."""
    eng = new_engine(INPUTS)
    accs = all_shapes(eng)
    for txn in txns:
        eng.commit({name: requests(ops, INPUTS[name]) for name, ops in txn.items()})
    return results(accs)


def singletons(ops: Sequence[tuple[str, Op]]) -> list[Txn]:
    return [{name: [op]} for name, op in ops]


def together(ops: Sequence[tuple[str, Op]]) -> list[Txn]:
    txn: Txn = {}
    for name, op in ops:
        txn.setdefault(name, []).append(op)
    return [txn]


def tagged_ops(distinct_rows: bool = False) -> st.SearchStrategy[list[tuple[str, Op]]]:
    """Requests on any of the inputs, in order; optionally each row at most once."""
    one = st.sampled_from(list(INPUTS)).flatmap(
        lambda name: st.tuples(
            st.just(name),
            st.tuples(
                st.booleans(),
                st.tuples(*[st.integers(0, DOMAIN[name] - 1)] * INPUTS[name]),
            ),
        )
    )
    if distinct_rows:
        return st.lists(one, max_size=24, unique_by=lambda t: (t[0], t[1][1]))
    return st.lists(one, max_size=24)


def inserts(ops: Sequence[tuple[str, Op]]) -> list[tuple[str, Op]]:
    return [(name, (True, row)) for name, (_, row) in ops]


@given(tagged_ops())
def test_one_big_commit_equals_one_update_per_commit(ops: list[tuple[str, Op]]) -> None:
    note(f"ops: {ops}")
    assert run(together(ops)) == run(singletons(ops))


@given(tagged_ops(distinct_rows=True), st.randoms(use_true_random=False))
def test_any_order_of_the_same_updates_gives_the_same_result(
    ops: list[tuple[str, Op]], rnd: object
) -> None:
    """Distinct rows, so every order has one final state; all rows inserted first so
    that the retractions among `ops` hit."""
    shuffled = list(ops)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    note(f"ops: {ops}\nshuffled: {shuffled}")
    base = together(inserts(ops))
    assert run(base + singletons(shuffled)) == run(base + singletons(ops))


@given(tagged_ops(), tagged_ops(distinct_rows=True))
def test_insert_then_retract_across_two_commits_is_a_no_op(
    base: list[tuple[str, Op]], extra: list[tuple[str, Op]]
) -> None:
    new = [(n, row) for n, (_, row) in extra if not _held(base, n, row)]
    note(f"base: {base}\nnew rows: {new}")
    eng = new_engine(INPUTS)
    accs = all_shapes(eng)
    commit_all(eng, together(base))
    before = results(accs)
    commit_all(eng, together([(n, (True, row)) for n, row in new]))
    commit_all(eng, together([(n, (False, row)) for n, row in new]))
    assert results(accs) == before
    delivered = {name: len(acc.epochs) for name, acc in accs.items()}
    commit_all(
        eng, together([(n, (True, row)) for n, row in new] + [(n, (False, row)) for n, row in new])
    )
    assert results(accs) == before, "insert and retract in one transaction"
    assert all(len(acc.epochs) == delivered[name] + 1 for name, acc in accs.items())


def commit_all(eng: Engine, txns: Sequence[Txn]) -> None:
    for txn in txns:
        eng.commit({n: requests(o, INPUTS[n]) for n, o in txn.items()})


def _held(ops: Sequence[tuple[str, Op]], name: str, row: Row) -> bool:
    """Whether `row` of `name` is present after `ops` (set semantics, last request wins)."""
    held = False
    for n, (inserting, r) in ops:
        if n == name and r == row:
            held = inserting
    return held


@given(st.lists(tagged_ops(), min_size=1, max_size=6), st.lists(tagged_ops(), max_size=3))
def test_a_dataflow_built_late_agrees_with_one_maintained_from_the_start(
    history: list[list[tuple[str, Op]]], later: list[list[tuple[str, Op]]]
) -> None:
    note(f"history: {history}\nlater: {later}")
    eng = new_engine(INPUTS)
    early = all_shapes(eng)
    for ops in history:
        commit_all(eng, together(ops))
    late = all_shapes(eng)
    assert all(acc.epochs == [eng.epoch] for acc in late.values()), "one snapshot, at start"
    assert results(late) == results(early)
    for ops in later:
        commit_all(eng, together(ops))
        assert results(late) == results(early)


def test_dropping_a_dataflow_releases_its_handles_and_unread_arrangements() -> None:
    eng = new_engine(INPUTS)
    edges = [(True, (i, (i + 1) % 5)) for i in range(5)]
    eng.commit({"edge": requests(edges, 2), "root": requests([(True, (0,))], 1)})
    first, second = eng.dataflow("first"), eng.dataflow("second")
    reach_first = Accumulated(build_reach(first))
    eng.start(first)
    reach_second = Accumulated(build_reach(second))
    eng.start(second)
    edge_arrangements = list(eng.inputs["edge"].arrangements.values())
    assert [a.readers for a in edge_arrangements] == [2]

    eng.drop(first)
    assert [a.readers for a in eng.inputs["edge"].arrangements.values()] == [1]
    eng.commit({"edge": requests([(False, (2, 3))], 2)})
    assert reach_second.rows() == {(0,): 1, (1,): 1, (2,): 1}
    assert reach_first.epochs == [1], "a dropped dataflow hears nothing more"

    eng.drop(second)
    assert eng.dataflows == []
    assert all(inp.arrangements == {} for inp in eng.inputs.values())
    assert all(a.spine.handles == [] for a in edge_arrangements)

    eng.commit({"edge": requests([(True, (2, 3))], 2)})
    third = eng.dataflow("third")
    reach_third = Accumulated(build_reach(third))
    eng.start(third)
    assert reach_third.rows() == {(x,): 1 for x in range(5)}
    eng.commit({"edge": requests([(False, (0, 1))], 2)})
    assert reach_third.rows() == {(0,): 1}
    eng.drop(third)
    assert all(inp.arrangements == {} for inp in eng.inputs.values())


def test_a_dataflow_reading_no_input_still_delivers_an_empty_snapshot() -> None:
    eng = new_engine(INPUTS)
    df: Dataflow = eng.dataflow("join")
    acc = Accumulated(build_join(df))
    eng.start(df)
    eng.commit({"a": requests([(True, (1, 1))], 2)})
    assert acc.rows() == {} and acc.epochs == [0, 1]
    assert np.array_equal(np.array(acc.epochs), np.arange(2))
