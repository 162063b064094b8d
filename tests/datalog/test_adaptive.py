"""Adaptive commits (docs/adr/0053): a commit large next to a live dataflow's base
recomputes the dataflow and delivers the exact difference. Property: on random
programs and streams, a database that recomputes every dataflow a commit reaches and
one that never does deliver the same changes at the same epochs, and both equal the
reference evaluator; the choice is recorded in `stats` and `explain`, and a budget
keeps the change running through the dataflow."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog import Database
from datalog.db.adaptive import difference
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from differential.batch import Updates, concat, consolidate
from differential.time import column
from differential.tuning import TUNING, Tuning, tuned
from tests.datalog.programs import Row, apply, format_stream, programs, streams
from tests.datalog.test_engine_vs_reference import Accumulated, queries_of, writable

ALWAYS = TUNING.but(recompute_ratio=0.0, recompute_min_rows=1)
NEVER = TUNING.but(recompute_ratio=float("inf"))


def told(acc: Accumulated) -> list[tuple[int, bool, list[tuple[Any, int]]]]:
    return [(c.epoch, c.snapshot, sorted(zip(c.rows, c.diffs, strict=True))) for c in acc.changes]


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_recomputed_and_incremental_commits_deliver_the_same_changes_as_the_reference(
    data: st.DataObject,
) -> None:
    generated = data.draw(programs(), label="program")
    stream = data.draw(streams(writable(generated, data)), label="stream")
    queries = queries_of(generated, data)
    note(f"program:\n{generated.text}\nstream:\n{format_stream(stream)}\nqueries: {queries}")
    checked = check_program(parse_program(generated.text))
    twins: list[tuple[Tuning, Database, dict[str, Accumulated]]] = []
    for tuning in (ALWAYS, NEVER):
        with tuned(tuning):
            db = Database()
            db.define(generated.text)
            subs = {q: Accumulated(q) for q in queries}
            for q, acc in subs.items():
                db.subscribe(q, acc)
        twins.append((tuning, db, subs))
    facts: dict[str, set[Row]] = {}
    for n, tx in enumerate(stream):
        for tuning, db, _ in twins:
            with tuned(tuning), db.transaction() as t:
                for op, relation, row in tx:
                    (t.insert if op == "insert" else t.retract)(relation, [row])
        apply(facts, tx)
        relations = reference.evaluate(checked, facts)
        (_, _, recomputed), (_, _, incremental) = twins
        for q in queries:
            assert told(recomputed[q]) == told(incremental[q]), f"after {n}: {q}"
            expected = reference.answer(check_query(parse_query(q), checked.schema), relations)
            assert recomputed[q].rows() == expected, f"after {n}: {q}"


PROGRAM = """
.decl e(a: number, b: number)
.decl reach(a: number)
reach(0).
reach(b) :- reach(a), e(a, b).
"""


def chain(start: int, count: int) -> list[tuple[int, int]]:
    return [(i, i + 1) for i in range(start, start + count)]


def test_the_choice_is_measured_and_recorded_in_stats_and_explain() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("e", chain(0, 100))
    got: list[Any] = []
    db.subscribe("reach(a)", got.append)
    first = db.epoch + 1
    with tuned(TUNING.but(recompute_min_rows=50, recompute_ratio=1.0)):
        db.insert("e", chain(100, 10))  # 10 rows: not weighed
        assert db.stats()["queries"]["reach(a)"]["last_commit"] is None  # type: ignore[index]
        db.insert("e", chain(110, 60))  # 60 rows into 111 (`e` and `reach`): runs through
        small = db.stats()["queries"]["reach(a)"]["last_commit"]  # type: ignore[index]
        db.insert("e", chain(170, 200))  # 200 rows into 171: recomputed
        big = db.stats()["queries"]["reach(a)"]["last_commit"]  # type: ignore[index]
        explained = db.explain("reach(a)")
    assert small == {"epoch": first + 1, "change_rows": 60, "base_rows": 111, "recomputed": False}
    assert big == {"epoch": first + 2, "change_rows": 200, "base_rows": 171, "recomputed": True}
    assert f"epoch {first + 2}: recomputed from the new base (change 200 rows" in explained
    assert [(c.epoch, len(c.rows), set(c.diffs)) for c in got[1:]] == [
        (first, 10, {1}),
        (first + 1, 60, {1}),
        (first + 2, 200, {1}),
    ]
    assert sorted(db.query("reach(a)")) == [(a,) for a in range(371)]
    db.insert("e", [(370, 400)])  # the rebuilt dataflow goes on incrementally
    db.insert("e", [(400, 401)])
    assert [c.rows for c in got[-2:]] == [[(400,)], [(401,)]]


def test_under_a_budget_the_change_runs_through() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("e", chain(0, 10))
    db.subscribe("reach(a)", lambda change: None)
    with tuned(ALWAYS), db.budget(seconds=60):
        db.insert("e", chain(10, 100))
    assert db.stats()["queries"]["reach(a)"]["last_commit"]["recomputed"] is False  # type: ignore[index]
    with tuned(ALWAYS):
        db.insert("e", chain(110, 100))
    assert db.stats()["queries"]["reach(a)"]["last_commit"]["recomputed"] is True  # type: ignore[index]
    assert len(db.query("reach(a)")) == 211


ANSWER = st.dictionaries(
    st.tuples(st.integers(0, 5), st.integers(0, 3)), st.integers(1, 3), max_size=40
)


@given(ANSWER, ANSWER)
def test_the_difference_by_sorted_hashes_equals_consolidating_both(
    old: dict[tuple[int, int], int], new: dict[tuple[int, int], int]
) -> None:
    """`difference` searches the new answer's rows in the old one when both are in
    order with ordered hashes: it equals consolidating both."""

    def answer(rows: dict[tuple[int, int], int]) -> Updates:
        ordered = sorted(rows)
        columns = tuple(np.array([r[i] for r in ordered], dtype=np.int64) for i in (0, 1))
        counts = np.array([rows[r] for r in ordered], dtype=np.int64)
        return Updates(columns, column((0,), len(ordered)), counts)

    was, now = answer(old), answer(new)
    parts = [was.negate(), now]
    want = consolidate(concat([p.with_times(column((4,), len(p))) for p in parts]))
    with tuned(TUNING.but(few=0)):  # numpy all the way (`consolidate` of a few is Python)
        got = difference(was, now, 4)
    assert got.rows() == want.rows()
