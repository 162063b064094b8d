"""Adaptive commits (docs/adr/0053): a commit large next to a live dataflow's base
recomputes the dataflow and delivers the exact difference. Property: on random
programs and streams, a database that recomputes every dataflow a commit reaches and
one that never does deliver the same changes at the same epochs, and both equal the
reference evaluator; the choice is recorded in `stats` and `explain`, and a budget
keeps the change running through the dataflow."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog import Database
from datalog.db.adaptive import Costs, difference
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from differential.batch import Updates, concat, consolidate
from differential.time import column
from differential.tuning import TUNING, Tuning, tuned
from tests.budget import examples
from tests.datalog.programs import Row, apply, format_stream, programs, streams
from tests.datalog.test_engine_vs_reference import Accumulated, queries_of, writable

ALWAYS = TUNING.but(recompute="always", recompute_min_rows=1)
NEVER = TUNING.but(recompute="never")
MEASURED = TUNING.but(recompute_min_rows=1)


class Steps:
    """A fake `Engine.clock`: each reading is `step` seconds after the last, so every
    timed part (a dataflow's start, its settling, its run, its advance) measures
    exactly `step()` (1 s unless told), whatever the machine does."""

    def __init__(self, step: Callable[[], float] = lambda: 1.0) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step()
        return self.now


def told(acc: Accumulated) -> list[tuple[int, bool, list[tuple[Any, int]]]]:
    return [(c.epoch, c.snapshot, sorted(zip(c.rows, c.diffs, strict=True))) for c in acc.changes]


@pytest.mark.slow  # 60 programs on three databases each: the suite's costliest property
@settings(
    max_examples=examples(60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_recomputed_and_incremental_commits_deliver_the_same_changes_as_the_reference(
    data: st.DataObject,
) -> None:
    generated = data.draw(programs(), label="program")
    stream = data.draw(streams(writable(generated, data)), label="stream")
    queries = queries_of(generated, data)
    note(f"program:\n{generated.text}\nstream:\n{format_stream(stream)}\nqueries: {queries}")
    checked = check_program(parse_program(generated.text))
    # the measured model decides on a clock whose readings jump at random (seeded)
    jumps = np.random.default_rng(data.draw(st.integers(0, 2**16), label="clock"))
    twins: list[tuple[Tuning, Database, dict[str, Accumulated]]] = []
    for tuning in (ALWAYS, NEVER, MEASURED):
        with tuned(tuning):
            db = Database()
            if tuning is MEASURED:
                db.engine.clock = Steps(lambda: float(jumps.exponential()))
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
        (_, _, recomputed), (_, _, incremental), (_, _, measured) = twins
        for q in queries:
            assert told(recomputed[q]) == told(incremental[q]), f"after {n}: {q}"
            assert told(measured[q]) == told(incremental[q]), f"after {n}: {q}"
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


def last(db: Database, key: str = "reach(a)") -> Any:
    return db.stats()["queries"][key]["last_commit"]  # type: ignore[index]


def test_the_choice_is_measured_and_recorded_in_stats_and_explain() -> None:
    """With a fake clock every run costs the same: the first big commit, measured
    against one small run only, is predicted at that run's cost per row and
    recomputed; once runs of several sizes cost the same, the line's cost per row is
    zero and a big commit runs through."""
    db = Database()
    db.engine.clock = Steps()
    db.define(PROGRAM)
    db.insert("e", chain(0, 999))  # with `reach(0)`: a base of 1,000 rows
    got: list[Any] = []
    db.subscribe("reach(a)", got.append)
    first = db.epoch + 1
    with tuned(TUNING.but(recompute_min_rows=50)):
        db.insert("e", chain(999, 10))  # 10 rows: not weighed, but timed
        assert last(db) is None
        db.insert("e", chain(1009, 200))  # 200 rows: 40x the run measured, per row
        big = last(db)
        explained = db.explain("reach(a)")
        for start, count in ((1209, 10), (1219, 20), (1239, 40)):
            db.insert("e", chain(start, count))  # each costs what the 10 rows did
        db.insert("e", chain(1279, 150))
        small = last(db)
    assert {k: big[k] for k in ("epoch", "change_rows", "base_rows", "recomputed")} == {
        "epoch": first + 1,
        "change_rows": 200,
        "base_rows": 1010,
        "recomputed": True,
    }
    run, rebuild = big["predicted_incremental_s"], big["predicted_recompute_s"]
    assert run > rebuild and big["reason"].startswith("measured: run through")
    assert big["model"]["runs"] == 1 and big["model"]["builds"] == 2  # the rebuild, too
    assert small["recomputed"] is False and small["epoch"] == first + 5
    assert small["predicted_incremental_s"] < small["predicted_recompute_s"]
    assert small["model"]["run_s_per_row"] == pytest.approx(0.0, abs=1e-9)
    assert small["model"]["runs"] == 5 and small["model"]["largest_run_rows"] == 150
    assert f"epoch {first + 1}: recomputed from the new base (change 200 rows" in explained
    assert "measured: run through" in explained
    assert [(c.epoch, len(c.rows), set(c.diffs)) for c in got[1:]] == [
        (first, 10, {1}),
        (first + 1, 200, {1}),
        (first + 2, 10, {1}),
        (first + 3, 20, {1}),
        (first + 4, 40, {1}),
        (first + 5, 150, {1}),
    ]
    assert sorted(db.query("reach(a)")) == [(a,) for a in range(1430)]
    db.insert("e", [(1429, 2000)])  # the dataflow goes on incrementally
    assert [c.rows for c in got[-1:]] == [[(2000,)]]


def test_before_any_measurement_the_ratio_decides_and_an_empty_base_runs_through() -> None:
    db = Database()
    db.engine.clock = Steps()
    db.define(PROGRAM.replace("reach(0).", ""))
    db.subscribe("reach(a)", lambda change: None)
    with tuned(TUNING.but(recompute_min_rows=50, recompute_ratio=0.5)):
        db.insert("e", chain(0, 60))  # into an empty base: that is computing it
        empty = last(db)
        fresh = Database()
        fresh.engine.clock = Steps()
        fresh.define(PROGRAM)
        fresh.insert("e", chain(0, 60))
        fresh.subscribe("reach(a)", lambda change: None)  # its build is measured
        fresh.insert("e", chain(60, 60))  # no run yet: 60 rows into 61, the prior recomputes
        prior = last(fresh)
    assert empty["recomputed"] is False and empty["reason"].startswith("the base is (nearly) empty")
    assert prior["recomputed"] is True and prior["predicted_incremental_s"] is None
    assert prior["reason"] == "not measured yet: change >= 0.5x the base"
    assert db.stats()["queries"]["reach(a)"]["last_commit"]["model"]["builds"] == 1  # type: ignore[index]


def test_a_model_holds_five_sums_whatever_the_number_of_runs() -> None:
    """Bounded memory: the runs are folded into decayed sums, the newest weighing most."""
    costs = Costs()
    for n in range(1, 2001):
        costs.ran(100 + n % 7, 0.5 + 0.01 * (100 + n % 7))
    assert len(costs.sums) == 5 and costs.runs == 2000
    fixed, per_row = costs.line() or (0.0, 0.0)
    assert fixed == pytest.approx(0.5) and per_row == pytest.approx(0.01)
    assert costs.incremental(400) == pytest.approx(0.5 + 0.01 * 400, rel=1e-6)
    # past recompute_reach times the largest run: at least that run's cost per row
    assert costs.incremental(10_000) >= 10_000 * (0.5 + 0.01 * 106) / 106
    for _ in range(20):  # the runs got dearer: the new ones dominate the line
        costs.ran(100, 5.0)
        costs.ran(200, 10.0)
    assert costs.incremental(150) == pytest.approx(7.5, rel=0.05)


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


def test_a_views_work_is_charged_to_its_readers_shared_among_them() -> None:
    """Two live queries read `reach` from one view (docs/adr/0026): with a fake clock
    each timed part costs 1 s, so a reader spends 3 s starting (run, settle, advance)
    and 2 s each epoch (run, advance), and the view 2 s each; each reader is charged
    half the view's (docs/adr/0071), in its build, its runs and its rebuild."""
    db = Database()
    db.engine.clock = Steps()
    db.define(PROGRAM + ".decl big(a: number)\nbig(a) :- reach(a), a > 5.\n")
    db.insert("e", chain(0, 99))  # with `reach(0)`: 100 rows, and 100 in the view
    for query in ("reach(a)", "big(a)"):
        db.subscribe(query, lambda change: None)
    assert [len(db.engine.views), len(db.engine.dataflows)] == [1, 2]
    with tuned(TUNING.but(recompute_min_rows=5, recompute="never")):
        db.insert("e", chain(99, 10))
    for query in ("reach(a)", "big(a)"):
        model = last(db, query)["model"]
        assert model["build_s_per_row"] == pytest.approx((3 + 2 / 2) / 200)
        assert model["run_s_per_row"] == pytest.approx((2 + 2 / 2) / 10)
    with tuned(TUNING.but(recompute_min_rows=5, recompute="always")):
        db.insert("e", chain(109, 10))  # both rebuilt, and the view with them
    decay = TUNING.recompute_decay
    for query in ("reach(a)", "big(a)"):
        model = last(db, query)["model"]
        rebuilt = (3 + 2 / 2) / 240  # over 120 edges and 120 rows of the view
        assert model["builds"] == 2
        assert model["build_s_per_row"] == pytest.approx(decay * 0.02 + (1 - decay) * rebuilt)


def test_a_views_readers_are_counted_at_each_commit() -> None:
    """A view's share follows its readers as they come and go (docs/adr/0071): the
    readers are counted once per commit (`charges.Sharing`), at that commit, for
    every dataflow the commit weighs. With a fake clock a reader spends 2 s a run
    and the view 2 s: two readers are charged 2 + 2/2 s a run, three 2 + 2/3, and
    two again (one left) 2 + 2/2; the model folds each commit's run with the last
    ones (decayed sums, one run size)."""
    db = Database()
    db.engine.clock = Steps()
    db.define(PROGRAM + ".decl big(a: number)\nbig(a) :- reach(a), a > 5.\n")
    db.insert("e", chain(0, 99))
    subs = {q: db.subscribe(q, lambda change: None) for q in ("reach(a)", "big(a)")}
    decay = TUNING.recompute_decay

    def per_row(*runs: float) -> float:  # the model's seconds per row after 10-row runs
        weights = [decay ** (len(runs) - 1 - i) for i in range(len(runs))]
        return sum(w * r for w, r in zip(weights, runs, strict=True)) / (10 * sum(weights))

    with tuned(TUNING.but(recompute_min_rows=5, recompute="never")):
        db.insert("e", chain(99, 10))
        subs["reach(a), a > 3"] = db.subscribe("reach(a), a > 3", lambda change: None)
        assert [len(db.engine.views), len(db.engine.dataflows)] == [1, 3]
        db.insert("e", chain(109, 10))
        for query in ("reach(a)", "big(a)"):
            assert last(db, query)["model"]["run_s_per_row"] == pytest.approx(per_row(3, 2 + 2 / 3))
        model = last(db, "reach(a), a > 3")["model"]
        assert model["run_s_per_row"] == pytest.approx(per_row(2 + 2 / 3))
        db.unsubscribe(subs.pop("big(a)"))
        db.insert("e", chain(119, 10))
    assert last(db, "reach(a)")["model"]["run_s_per_row"] == pytest.approx(per_row(3, 2 + 2 / 3, 3))
    model = last(db, "reach(a), a > 3")["model"]
    assert model["run_s_per_row"] == pytest.approx(per_row(2 + 2 / 3, 3))


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


@pytest.mark.server
def test_the_server_stats_carry_the_choice_its_reason_and_the_model() -> None:
    from server.client import Client
    from server.transport import DeltalogServer
    from tests.server.helpers import GRAPH, run

    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(GRAPH)
        await client.subscribe("reach(1, y)")
        await client.transact(inserts={"edge": [(i, i + 1) for i in range(1, 151)]})
        await client.transact(inserts={"edge": [(i, i + 1) for i in range(151, 301)]})
        (live,) = (await client.stats())["queries"].values()
        last = live["last_commit"]
        assert last["change_rows"] == 150 and last["base_rows"] >= 150  # (and the demand)
        assert last["reason"]  # measured, or the prior: said either way
        assert last["model"]["runs"] == 1 and last["model"]["largest_run_rows"] == 150
        await client.close()

    run(scenario)
