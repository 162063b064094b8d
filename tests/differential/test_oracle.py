"""Oracle tests: every dataflow shape against a from-scratch recomputation.

In the style of differential-dataflow's `tests/reduce_reference.rs`: hypothesis
draws streams of transactions (inserts and retractions on small domains, so that
retractions hit); after EVERY commit the output accumulated from the delivered
changes must equal a plain-Python evaluation on the current inputs. Inside
iteration scopes times are partially ordered `(epoch, iteration)`; retracting
edges on cycles across epochs is what exercises the reduce's interesting times
and the join's `t1 ⊔ t2`, checked indirectly through the results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from differential.operators.reduce import count, distinct, maximum, minimum, monoid, sum_values
from tests.differential import strategies as ds
from tests.differential.harness import (
    I64,
    Accumulated,
    Builder,
    Op,
    Row,
    SetModel,
    build_antijoin,
    build_components,
    build_join,
    build_nested_reach,
    build_parity,
    build_reach,
    build_reduce,
    components_reference,
    new_engine,
    parity_reference,
    reach_reference,
    requests,
)

Reference = Callable[[dict[str, set[Row]]], dict[Row, int]]
Stream = list[dict[str, list[Op]]]

# Both kernels (Python for a few rows, numpy for many) meet the same oracle.
pytestmark = pytest.mark.usefixtures("small_path")

AB = {"a": (2, 4), "b": (2, 4)}
GRAPH = {"edge": (2, 5), "root": (1, 5)}


def run_oracle(
    inputs: dict[str, tuple[int, int]], build: Builder, reference: Reference, stream: Stream
) -> None:
    """Build the dataflow before the first commit, then check it after every commit.

    Hypothesis tests `note()` the stream first, so a failure prints it in full.
    """
    eng = new_engine({name: arity for name, (arity, _) in inputs.items()})
    model = SetModel(list(inputs))
    df = eng.dataflow("oracle")
    acc = Accumulated(build(df))
    eng.start(df)
    for epoch, txn in enumerate(stream, start=1):
        eng.commit({name: requests(txn[name], inputs[name][0]) for name in txn})
        for name, ops in txn.items():
            model.apply(name, ops)
        expected = reference(model.relations)
        assert acc.rows() == expected, f"epoch {epoch}: inputs {model.relations}"


# -- join and antijoin -------------------------------------------------------------


def join_reference(rel: dict[str, set[Row]]) -> dict[Row, int]:
    return {(x, y, z): 1 for x, y in rel["a"] for x2, z in rel["b"] if x == x2}


def antijoin_reference(rel: dict[str, set[Row]]) -> dict[Row, int]:
    keys = {x for x, _ in rel["b"]}
    return {(x, y): 1 for x, y in rel["a"] if x not in keys}


@given(ds.streams(AB))
def test_join_matches_recomputation_after_every_commit(stream: Stream) -> None:
    note(f"stream: {stream}")
    run_oracle(AB, build_join, join_reference, stream)


@given(ds.streams(AB))
def test_antijoin_matches_recomputation_after_every_commit(stream: Stream) -> None:
    note(f"stream: {stream}")
    run_oracle(AB, build_antijoin, antijoin_reference, stream)


# -- the reduce family -------------------------------------------------------------


def folded(rel: dict[str, set[Row]]) -> dict[int, Counter[int]]:
    """`(x, y % 3)` of `a` as a multiset of values per key."""
    groups: dict[int, Counter[int]] = {}
    for x, y in rel["a"]:
        groups.setdefault(x, Counter())[y % 3] += 1
    return groups


REDUCES: dict[str, tuple[Builder, Reference]] = {
    "distinct": (
        build_reduce(distinct, [I64]),
        lambda rel: {(x, v): 1 for x, vs in folded(rel).items() for v in vs},
    ),
    "count": (
        build_reduce(count, [I64]),
        lambda rel: {(x, vs.total()): 1 for x, vs in folded(rel).items()},
    ),
    "sum_values": (
        build_reduce(sum_values, [I64]),
        lambda rel: {(x, sum(v * c for v, c in vs.items())): 1 for x, vs in folded(rel).items()},
    ),
    "minimum": (
        build_reduce(minimum, [I64]),
        lambda rel: {(x, min(vs)): 1 for x, vs in folded(rel).items()},
    ),
    "maximum": (
        build_reduce(maximum, [I64]),
        lambda rel: {(x, max(vs)): 1 for x, vs in folded(rel).items()},
    ),
    "monoid(maximum)": (
        build_reduce(monoid(np.maximum), [I64]),
        lambda rel: {(x, max(vs)): 1 for x, vs in folded(rel).items()},
    ),
}


@pytest.mark.parametrize("name", list(REDUCES))
@given(stream=ds.streams({"a": (2, 4)}))
def test_reduce_matches_recomputation_after_every_commit(name: str, stream: Stream) -> None:
    note(f"stream: {stream}")
    build, reference = REDUCES[name]
    run_oracle({"a": (2, 4)}, build, reference, stream)


# -- iteration: partially ordered times ----------------------------------------------


def graph_streams() -> st.SearchStrategy[Stream]:
    """A populated first epoch (cycles are likely on 5 nodes), then edits of it."""
    return st.builds(
        lambda first, rest: [first, *rest],
        ds.first_epoch_inserts(GRAPH, max_size=10),
        ds.streams(GRAPH, min_epochs=1, max_epochs=5),
    )


@given(graph_streams())
def test_reachability_matches_recomputation_after_every_commit(stream: Stream) -> None:
    note(f"stream: {stream}")
    run_oracle(GRAPH, build_reach, lambda rel: reach_reference(rel["edge"], rel["root"]), stream)


@given(graph_streams())
def test_components_match_union_find_after_every_commit(stream: Stream) -> None:
    note(f"stream: {stream}")
    run_oracle(GRAPH, build_components, lambda rel: components_reference(rel["edge"]), stream)


def test_retracting_the_edge_that_closes_a_cycle_empties_reachability() -> None:
    """A known case: a cycle must not keep itself alive once its entry edge goes."""
    stream: Stream = [
        {"edge": [(True, (0, 1)), (True, (1, 2)), (True, (2, 1))], "root": [(True, (0,))]},
        {"edge": [(False, (0, 1))], "root": []},
        {"edge": [(True, (0, 2))], "root": []},
        {"edge": [(False, (2, 1)), (False, (0, 2))], "root": []},
    ]
    run_oracle(GRAPH, build_reach, lambda rel: reach_reference(rel["edge"], rel["root"]), stream)


@given(graph_streams())
def test_mutual_recursion_matches_recomputation_after_every_commit(stream: Stream) -> None:
    note(f"stream: {stream}")
    run_oracle(GRAPH, build_parity, lambda rel: parity_reference(rel["edge"], rel["root"]), stream)


@given(graph_streams())
def test_nested_scopes_match_recomputation_after_every_commit(stream: Stream) -> None:
    note(f"stream: {stream}")
    run_oracle(
        GRAPH, build_nested_reach, lambda rel: reach_reference(rel["edge"], rel["root"]), stream
    )


def random_stream(seed: int, nodes: int, epochs: int) -> Stream:
    """A seeded stream on a bigger graph: a dense start, then edits of a few edges each."""
    rng = np.random.default_rng(seed)

    def edge_ops(n: int, p_insert: float) -> list[Op]:
        pairs = rng.integers(0, nodes, size=(n, 2))
        return [(bool(rng.random() < p_insert), (int(a), int(b))) for a, b in pairs]

    stream: Stream = [{"edge": edge_ops(3 * nodes, 1.0), "root": [(True, (0,)), (True, (1,))]}]
    for _ in range(epochs):
        root_ops: list[Op] = [(bool(rng.random() < 0.5), (int(rng.integers(0, nodes)),))]
        stream.append({"edge": edge_ops(4, 0.4), "root": root_ops if rng.random() < 0.2 else []})
    return stream


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("shape", ["reach", "components", "parity"])
def test_iteration_on_larger_seeded_streams(shape: str, seed: int) -> None:
    graph = {"edge": (2, 14), "root": (1, 14)}
    build, reference = {
        "reach": (build_reach, lambda r: reach_reference(r["edge"], r["root"])),
        "components": (build_components, lambda r: components_reference(r["edge"])),
        "parity": (build_parity, lambda r: parity_reference(r["edge"], r["root"])),
    }[shape]
    stream = random_stream(seed, nodes=14, epochs=40)
    try:
        run_oracle(graph, build, reference, stream)
    except AssertionError as err:
        raise AssertionError(f"seed {seed}: {err}\nstream: {stream}") from err
