"""`what_if` in process (docs/adr/0052): the hypothetical epoch runs through the live
dataflows and is undone. Property: a database that answers a random what_if before
every commit and its twin that never does deliver exactly the same changes to every
subscriber, at the same epochs, and agree on every answer, every `as_of`, every
explanation and the symbols, whatever the hypotheticals were (retractions that end
a growing distinct, inserts that grow its key set past a resize, new symbols)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datalog import Change, Database
from tests.budget import examples
from tests.datalog.test_what_if import PROGRAM, QUERIES

node = st.integers(0, 6)
edges = st.lists(st.tuples(node, node), max_size=4)
tags = st.lists(st.tuples(node, st.sampled_from(["x", "y", "only-hypothetical"])), max_size=2)
Ops = tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, str]]]
ops: st.SearchStrategy[Ops] = st.tuples(edges, edges, tags)


def twins() -> tuple[Database, Database, dict[str, list[Change]], dict[str, list[Change]]]:
    found: list[Any] = []
    for _ in range(2):
        db = Database(history=None)
        db.define(PROGRAM)
        got: dict[str, list[Change]] = {q: [] for q in QUERIES}
        for q in QUERIES:
            db.subscribe(q, got[q].append)
        found += [db, got]
    return found[0], found[2], found[1], found[3]


def commit(db: Database, step: Ops) -> None:
    added, removed, tagged = step
    with db.transaction() as tx:
        tx.insert("e", added)
        tx.retract("e", removed)
        tx.insert("tag", [(a, s) for a, s in tagged if s != "only-hypothetical"])


def ask(db: Database, step: Ops, big: bool) -> None:
    added, removed, tagged = step
    with db.hypothetical() as tx:
        tx.insert("e", added + ([(0, 100 + i) for i in range(1100)] if big else []))
        tx.retract("e", removed)
        tx.insert("tag", tagged)
    assert tx.how == "in process"


def told(got: dict[str, list[Change]]) -> dict[str, list[tuple[Any, ...]]]:
    return {
        q: [(c.epoch, c.snapshot, sorted(zip(c.rows, c.diffs, strict=True))) for c in changes]
        for q, changes in got.items()
    }


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(ops, ops, st.booleans()), min_size=1, max_size=5))
def test_a_database_that_asks_what_if_is_indistinguishable_from_one_that_does_not(
    steps: list[tuple[Ops, Ops, bool]],
) -> None:
    asking, quiet, asked, unasked = twins()
    first = asking.epoch + 1
    for real, hypothetical, big in steps:
        ask(asking, hypothetical, big)
        commit(asking, real)
        commit(quiet, real)
        assert told(asked) == told(unasked)
        assert asking.epoch == quiet.epoch
        assert asking.symbols.to_list() == quiet.symbols.to_list()
        for q in [*QUERIES, "reach(a), e(a, b)", "e(a, b)"]:
            assert sorted(asking.query(q)) == sorted(quiet.query(q)), q
            for epoch in range(first, asking.epoch + 1):
                assert sorted(asking.query(q, as_of=epoch)) == sorted(quiet.query(q, as_of=epoch))
        for fact in ["reach(3)", "tc(1, 4)"]:
            if fact in {f"reach({a})" for (a,) in asking.query("reach(a)")} | {
                f"tc(1, {b})" for (b,) in asking.query("tc(1, b)")
            }:
                assert str(asking.why(fact)) == str(quiet.why(fact))
    ask(asking, steps[0][1], True)  # and the last what_if leaves nothing for the next one
    commit(asking, steps[0][0])
    commit(quiet, steps[0][0])
    assert told(asked) == told(unasked)


def test_what_if_of_live_queries_runs_in_process_and_of_others_in_a_child() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("e", [(0, 1)])
    db.subscribe("reach(a)", lambda change: None)
    with db.hypothetical() as tx:
        tx.insert("e", [(1, 2)])
    assert tx.how == "in process"
    assert (tx.changes["reach(a)"].rows, tx.changes["reach(a)"].diffs) == ([(2,)], [1])
    with db.hypothetical(["tc(0, b)"]) as tx:
        tx.insert("e", [(1, 2)])
    assert tx.how == "fork"
    assert tx.changes["tc(0, b)"].rows == [(2,)]


def test_a_joining_tenant_member_is_answered_its_first_slice_minus_its_snapshot() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("e", [(1, 2), (2, 3)])
    got: list[Change] = []
    db.subscribe("tc(1, b)", lambda change: None)
    db.insert("e", [(5, 6)])
    db.subscribe("tc(2, b)", got.append)  # joins the shared dataflow with the next commit
    predicted = db.what_if({"e": [(3, 4)]})
    db.insert("e", [(3, 4)])
    answered = predicted["tc(2, b)"]
    assert sorted(zip(answered.rows, answered.diffs, strict=True)) == sorted(
        zip(got[-1].rows, got[-1].diffs, strict=True)
    )
    assert predicted["tc(2, b)"].rows == [(4,)]
