"""Recursive aggregation through subsumption, against networkx and the reference.

Random graphs change under random streams of edge insertions and retractions;
after every commit the subscribed BFS levels, Dijkstra distances and weakly
connected component labels (each a subsumed recursive relation) must equal
networkx on the current edges, and a Pareto frontier over (hops, distance)
(pairwise dominance on two columns) must equal the reference evaluator. Run
with the small-batch kernels on and off (`small_path`).
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog.db.database import Database
from datalog.eval import reference
from datalog.eval.symbols import SymbolTable
from datalog.lang.checks import check_program
from datalog.lang.parser import parse_program
from datalog.lang.pretty import format_program, format_subsumption
from datalog.lang.subsumption import normalize
from datalog.plan.subsume import dominance_reducer
from differential.operators.reduce import Groups
from tests.budget import examples
from tests.datalog.answers import Accumulated

pytestmark = pytest.mark.usefixtures("small_path")

PROGRAM = """
.decl edge(x: number, y: number, w: number)
.decl source(x: number)
.decl level(x: number, n: number) btree_delete
level(s, 0) :- source(s).
level(y, n + 1) :- level(x, n), edge(x, y, _).
level(x, n1) <= level(x, n2) :- n2 <= n1.
.decl dist(x: number, d: number)
dist(s, 0) :- source(s).
dist(y, d + w) :- dist(x, d), edge(x, y, w).
dist(x, d1) <= dist(x, d2) :- d2 < d1.
.decl node(x: number)
node(x) :- edge(x, _, _) ; edge(_, x, _).
.decl label(x: number, l: number)
label(x, x) :- node(x).
label(y, l) :- label(x, l), edge(x, y, _).
label(y, l) :- label(x, l), edge(y, x, _).
label(x, l1) <= label(x, l2) :- l2 <= l1.
.decl pareto(x: number, h: number, d: number)
pareto(s, 0, 0) :- source(s).
pareto(y, h + 1, d + w) :- pareto(x, h, d), edge(x, y, w).
pareto(x, h1, d1) <= pareto(x, h2, d2) :- h2 <= h1, d2 <= d1.
"""
QUERIES = ("level(x, n)", "dist(x, d)", "label(x, l)", "pareto(x, h, d)")
Edge = tuple[int, int, int]


def expected(edges: set[Edge]) -> dict[str, set[tuple[Any, ...]]]:
    """BFS levels, Dijkstra distances from 0 and WCC min labels, by networkx."""
    graph = nx.DiGraph()
    graph.add_node(0)
    for x, y, w in sorted(edges, key=lambda e: -e[2]):  # the least weight of (x, y) wins
        graph.add_edge(x, y, w=w)
    levels = nx.single_source_shortest_path_length(graph, 0)
    dists = nx.single_source_dijkstra_path_length(graph, 0, weight="w")
    nodes = {x for e in edges for x in e[:2]}
    labels = set()
    for component in nx.weakly_connected_components(graph.subgraph(nodes)):
        labels |= {(x, min(component)) for x in component}
    return {
        "level(x, n)": set(levels.items()),
        "dist(x, d)": set(dists.items()),
        "label(x, l)": labels,
    }


def reference_pareto(edges: set[Edge]) -> set[tuple[Any, ...]]:
    checked = check_program(parse_program(PROGRAM))
    relations = reference.evaluate(checked, {"edge": edges, "source": [(0,)]})
    return relations["pareto"]


edge_st = st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(1, 4))
stream_st = st.lists(
    st.lists(st.tuples(st.booleans(), edge_st), min_size=1, max_size=4), min_size=1, max_size=6
)


@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(initial=st.sets(edge_st, max_size=10), stream=stream_st)
def test_subsumed_recursion_equals_networkx_and_the_reference_after_every_commit(
    initial: set[Edge], stream: list[list[tuple[bool, Edge]]]
) -> None:
    db = Database()
    db.define(PROGRAM)
    answers = {query: Accumulated() for query in QUERIES}
    for query, acc in answers.items():
        db.subscribe(query, acc)
    edges = set(initial)
    with db.transaction() as tx:
        tx.insert("source", [(0,)])
        tx.insert("edge", sorted(edges))
    for step, transaction in enumerate([[], *stream]):
        with db.transaction() as tx:
            for insert, edge in transaction:
                (tx.insert if insert else tx.retract)("edge", [edge])
                (edges.add if insert else edges.discard)(edge)
        note(f"after transaction {step}: edges {sorted(edges)}")
        for query, rows in expected(edges).items():
            assert answers[query].rows() == rows, query
        assert answers["pareto(x, h, d)"].rows() == reference_pareto(edges)
        assert set(db.query("pareto(x, h, d)")) == reference_pareto(edges)


def test_a_retracted_shortcut_raises_the_distance_and_a_cut_removes_it() -> None:
    db = Database()
    db.define(PROGRAM)
    acc = Accumulated()
    db.subscribe("dist(x, d)", acc)
    with db.transaction() as tx:
        tx.insert("source", [(0,)])
        tx.insert("edge", [(0, 1, 5), (0, 2, 1), (2, 1, 1), (1, 3, 1)])
    assert acc.rows() == {(0, 0), (1, 2), (2, 1), (3, 3)}
    with db.transaction() as tx:
        tx.retract("edge", [(2, 1, 1)])
    assert acc.rows() == {(0, 0), (1, 5), (2, 1), (3, 6)}
    with db.transaction() as tx:
        tx.retract("edge", [(0, 1, 5)])
    assert acc.rows() == {(0, 0), (2, 1)}


def test_facts_inserted_into_a_subsumed_relation_are_subsumed() -> None:
    db = Database()
    db.define(".decl best(k: number, v: number)\nbest(k, a) <= best(k, b) :- b < a.")
    with db.transaction() as tx:
        tx.insert("best", [(1, 5), (1, 3), (2, 7)])
    assert sorted(db.query("best(k, v)")) == [(1, 3), (2, 7)]
    with db.transaction() as tx:
        tx.retract("best", [(1, 3)])
    assert sorted(db.query("best(k, v)")) == [(1, 5), (2, 7)]


CLAUSES = {
    "least": "r(k, a, b) <= r(k, c, e) :- c <= a.",
    "greatest, strict": "r(k, a, b) <= r(k, c, e) :- a < c.",
    "two columns": "r(k, a, b) <= r(k, c, e) :- c <= a, e <= b.",
    "no group": "r(k, a, b) <= r(j, c, e) :- c + e < a + b.",
}


@pytest.mark.parametrize("clause", CLAUSES.values(), ids=CLAUSES.keys())
@settings(max_examples=examples(60), deadline=None)
@given(rows=st.sets(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 3))))
def test_the_reducer_keeps_what_the_reference_keeps(
    clause: str, rows: set[tuple[int, int, int]]
) -> None:
    program = parse_program(f".decl r(k: number, a: number, b: number)\n{clause}")
    dominance = normalize(program.subsumptions[0], ("number", "number", "number"))
    key = list(dominance.group)
    ordered = sorted(rows, key=lambda r: (tuple(r[i] for i in key), r))
    groups: dict[tuple[int, ...], int] = {}
    owner = [groups.setdefault(tuple(r[i] for i in key), len(groups)) for r in ordered]
    columns = tuple(np.array([r[i] for r in ordered], dtype=np.int64) for i in range(3))
    counts = np.ones(len(ordered), dtype=np.int64)
    reducer = dominance_reducer([dominance], SymbolTable())
    _, out_columns, _ = reducer(
        Groups(np.array(owner, dtype=np.intp), columns, counts, len(groups))
    )
    kept = set(zip(*(c.tolist() for c in out_columns), strict=True))
    assert kept == rows - reference.dominated(set(rows), [dominance])


def test_a_non_strict_condition_never_removes_a_tuple_because_of_itself() -> None:
    db = Database()
    db.define(".decl r(k: number, v: number) btree_delete\nr(k, a) <= r(k, b) :- b <= a.")
    with db.transaction() as tx:
        tx.insert("r", [(1, 4), (2, 2), (2, 9)])
    assert sorted(db.query("r(k, v)")) == [(1, 4), (2, 2)]


def test_subsumptive_clauses_print_and_parse_back() -> None:
    text = "r(x, a1, b1) <= r(x, a2, b2) :- a2 <= a1, b2 + 1 < b1."
    program = parse_program(f".decl r(x: number, a: number, b: number)\n{text}")
    assert format_subsumption(program.subsumptions[0]) == text
    assert parse_program(format_program(program)) == program
