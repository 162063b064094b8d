"""The growing step of least-value subsumptions (`differential.operators.reduce_extreme`,
ADR 0046) against the general reduce it shortcuts.

Twin runs of WCC, SSSP and BFS on random small graphs under random inserts and
retractions, with the step offered and withheld: the same one-shot answers and
subscription changes at every commit, the same state of the live dataflows' inner
reduces and arrangements at the iterations of the next epoch (what later epochs
read), and the answers equal the reference evaluator's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from datalog import Change, Database
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from datalog.plan import subsume
from differential.operators import reduce_extreme
from differential.tuning import TUNING, tuned
from tests.budget import examples
from tests.datalog.test_chain import inner_state

BASE = ".decl edge(x: number, y: number, w: number)\n.decl source(x: number)\n"
PROGRAMS = {
    "label(x, l)": """
        .decl node(x: number)
        node(x) :- edge(x, _, _) ; edge(_, x, _).
        .decl label(x: number, l: number) btree_delete
        label(x, x) :- node(x).
        label(y, l) :- label(x, l), edge(x, y, _).
        label(y, l) :- label(x, l), edge(y, x, _).
        label(x, l1) <= label(x, l2) :- l2 <= l1.""",
    "dist(x, d)": """
        .decl dist(x: number, d: number) btree_delete
        dist(s, 0) :- source(s).
        dist(y, d + w) :- dist(x, d), edge(x, y, w).
        dist(x, d1) <= dist(x, d2) :- d2 <= d1.""",
    "level(x, n)": """
        .decl level(x: number, n: number) btree_delete
        level(s, 0) :- source(s).
        level(y, n + 1) :- level(x, n), edge(x, y, _).
        level(x, n1) <= level(x, n2) :- n2 <= n1.""",
}
EDGES = st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(1, 4))
COMMITS = st.lists(
    st.lists(st.tuples(st.booleans(), EDGES), min_size=1, max_size=6), min_size=1, max_size=5
)


@contextmanager
def least_step(on: bool) -> Iterator[list[int]]:
    """Offer the growing step (counting its uses) or withhold it."""
    used = [0]
    original = reduce_extreme.extreme_step

    def counted(*args: Any) -> Any:
        used[0] += 1
        return original(*args)

    if on:
        with mock.patch("differential.operators.reduce_extreme.extreme_step", counted):
            yield used
        return
    plain = subsume.dominance_reducer

    def without(*args: Any) -> Any:
        reducer = plain(*args)
        return lambda groups: reducer(groups)

    with mock.patch.object(subsume, "dominance_reducer", without):
        yield used


def run(query: str, first: list, commits: list, on: bool) -> tuple[list[Any], int]:
    seen: list[tuple[int, frozenset[tuple[Any, int]]]] = []

    def record(change: Change) -> None:
        rows: Counter[tuple[Any, ...]] = Counter()
        for row, diff in zip(change.rows, change.diffs, strict=True):
            rows[tuple(row)] += diff
        seen.append((change.epoch, frozenset((r, n) for r, n in rows.items() if n)))

    out: list[Any] = []
    with least_step(on) as used:
        db = Database()
        db.define(BASE + PROGRAMS[query])
        db.insert("source", [(0,)])
        db.insert("edge", first)
        db.subscribe(query, record)
        edges = set(first)
        for commit in commits:
            with db.transaction() as tx:
                for inserting, edge in commit:
                    (tx.insert if inserting else tx.retract)("edge", [edge])
                    (edges.add if inserting else edges.discard)(edge)
            out.append(sorted(db.query(query)))
            checked = check_program(parse_program(BASE + PROGRAMS[query]))
            facts = {"edge": sorted(edges), "source": [(0,)]}
            expected = reference.answer(
                check_query(parse_query(query), checked.schema),
                reference.evaluate(checked, facts),
            )
            assert set(out[-1]) == expected
        held = [inner_state(dataflow, db.epoch) for dataflow in db.engine.dataflows]
    return [*out, seen, held], used[0]


@contextmanager
def counting_runs() -> Iterator[list[int]]:
    """Count the steps that read their arranged changes by runs (ADR 0068)."""
    taken = [0]
    original = reduce_extreme._sorted_runs

    def counted(*args: Any) -> Any:
        found = original(*args)
        taken[0] += found is not None
        return found

    with mock.patch.object(reduce_extreme, "_sorted_runs", counted):
        yield taken


@pytest.mark.parametrize("held", [True, False])  # the output read from a table, or the trace
@pytest.mark.parametrize("sorted_from", [2, 1 << 40])  # arranged changes grouped by runs, or not
@pytest.mark.parametrize("runs", [True, False])  # a batch read by its runs, or the reference
@settings(max_examples=examples(40), deadline=None)
@given(
    st.sampled_from(sorted(PROGRAMS)),
    st.lists(EDGES, min_size=1, max_size=12, unique=True),
    COMMITS,
)
def test_the_least_growing_step_gives_the_general_reduce_answers(
    held: bool, sorted_from: int, runs: bool, query: str, first: list, commits: list
) -> None:
    note(PROGRAMS[query])
    tuning = TUNING.but(sorted_from=sorted_from, least_held=held, least_runs=runs)
    with tuned(tuning), counting_runs() as taken:
        fast, used = run(query, first, commits, True)
    general, _ = run(query, first, commits, False)
    assert fast == general
    assert used, "the growing step ran"
    assert bool(taken[0]) == runs, "the step read its changes by runs exactly when asked"
