"""Live queries under failure and re-entrance: nothing half-done, epochs in order."""

from __future__ import annotations

import json
from unittest import mock

import pytest

from datalog import Change, Database, ManualClock
from datalog.lang.errors import DatalogError, TransactionError, UnsupportedError
from differential.engine import Engine
from differential.tuning import TUNING, tuned

PROGRAM = """
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
edge(1, 2).
"""


def _readers(db: Database) -> int:
    inputs = db.stats()["inputs"]
    assert isinstance(inputs, dict)
    return sum(a["readers"] for i in inputs.values() for a in i["arrangements"].values())


class Boom(Exception):
    pass


def _failing_start(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Engine.start
    calls = {"n": 0}

    def start(self: Engine, dataflow: object) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise Boom
        original(self, dataflow)  # type: ignore[arg-type]

    monkeypatch.setattr(Engine, "start", start)


def test_a_subscription_whose_dataflow_fails_to_start_poisons_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = Database()
    db.define(PROGRAM)
    _failing_start(monkeypatch)
    with pytest.raises(Boom):
        db.subscribe("reach(1, y)", lambda change: None)
    assert db.live == {} and _readers(db) == 0
    seen: list[Change] = []
    db.subscribe("reach(1, y)", seen.append)
    assert seen[0].rows == [(2,)]
    db.insert("edge", [(2, 3)])
    assert seen[1].rows == [(3,)] and seen[1].epoch == db.epoch


def test_a_failed_one_shot_query_leaves_no_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    db = Database()
    db.define(PROGRAM)
    _failing_start(monkeypatch)
    with pytest.raises(Boom):
        db.query("reach(x, y)")
    assert _readers(db) == 0
    assert db.query("reach(x, y)") == [(1, 2)]


def test_a_commit_from_inside_a_callback_is_refused_and_changes_nothing() -> None:
    db = Database()
    db.define(PROGRAM)

    def meddle(change: Change) -> None:
        if not change.snapshot:
            db.insert("edge", [(9, 9)])

    sub = db.subscribe("reach(1, y)", meddle)
    db.insert("edge", [(2, 3)])
    assert isinstance(sub.errors[0], TransactionError)
    assert "inside a subscriber callback" in str(sub.errors[0])
    assert (9, 9) not in db.query("edge(x, y)")
    with pytest.raises(TransactionError):
        db.subscribe("reach(x, y)", lambda change: db.define(".decl z(x: number)"))
    assert set(db.live) == {"reach(1, y)"}  # the refused one left nothing behind


def test_unsubscribing_inside_a_callback_does_not_hide_another_querys_change() -> None:
    db = Database()
    db.define(PROGRAM)
    other: list[Change] = []
    subs = []

    def leave(change: Change) -> None:
        if not change.snapshot:
            db.unsubscribe(subs[0])

    subs.append(db.subscribe("reach(1, y)", leave))
    db.subscribe("edge(x, y)", other.append)
    db.insert("edge", [(2, 3)])
    assert other[-1].epoch == db.epoch and other[-1].rows == [(2, 3)]
    db.insert("edge", [(3, 4)])
    assert other[-1].epoch == db.epoch and other[-1].rows == [(3, 4)]


def test_errors_are_bounded_and_counted() -> None:
    db = Database()
    db.define(PROGRAM)

    def fail(change: Change) -> None:
        if not change.snapshot:
            raise ValueError(change.epoch)

    sub = db.subscribe("edge(x, y)", fail)
    for i in range(25):
        db.insert("edge", [(100 + i, i)])
    assert sub.error_count == 25 and len(sub.errors) == 10
    assert str(sub.errors[-1]) == str(db.epoch)


def test_new_rules_reach_subscribers_at_a_new_epoch_so_epochs_strictly_increase() -> None:
    db = Database()
    db.define(PROGRAM)
    seen: list[Change] = []
    db.subscribe("reach(x, 9)", seen.append)
    before = db.epoch
    db.define("reach(x, 9) :- edge(x, _).\nedge(5, 6).")
    assert db.epoch == before + 1
    assert [c.epoch for c in seen] == [before, before + 1]
    assert sorted(seen[1].rows) == [(1,), (5,)]
    db.define("reach(x, y) :- edge(y, x).")  # changes nothing this query sees: no delivery
    assert len(seen) == 2 and db.epoch == before + 2


def test_a_definition_failing_on_a_fact_value_keeps_nothing() -> None:
    db = Database()
    db.define(PROGRAM)
    seen: list[Change] = []
    db.subscribe("reach(x, y)", seen.append)
    epoch = db.epoch
    with pytest.raises(DatalogError):
        db.define(".decl u(x: unsigned)\nreach(x, x) :- edge(x, _).\nu(-1).")
    assert db.epoch == epoch and len(seen) == 1
    assert "u" not in db.checked.schema.relations
    assert db.query("reach(x, y)") == [(1, 2)]
    db.insert("edge", [(2, 3)])
    assert sorted(seen[-1].rows) == [(1, 3), (2, 3)]


def test_facts_are_not_checked_again_by_later_definitions() -> None:
    """Defining n facts one by one stays linear: the program keeps only rules."""
    db = Database()
    db.define(PROGRAM)
    db.define(".decl m(x: number) multiset")
    for i in range(50):
        db.define(f"edge({i}, {i + 1}).\nm(1).")
    assert len(db.program.rules) == 2  # the two reach rules, no facts
    assert len(db.query("edge(x, y)")) == 50  # edge(1, 2) was defined twice
    assert db.query("m(x)") == [(1,)]  # a fact defined again is not inserted again


def test_one_shot_queries_leave_no_symbols_behind() -> None:
    db = Database()
    db.define('.decl s(x: symbol, y: symbol)\ns("a", "b").')
    size = len(db.symbols)
    for i in range(200):
        assert db.query(f's("c{i}", y)') == []
        assert db.query_columns(f's(x, y), z = cat(x, "{i}")')["z"].tolist() == [f"a{i}"]
        db.explain(f's("e{i}", y)')
    assert len(db.symbols) == size
    db.insert("s", [("c7", "d")])  # a symbol a query had seen gets a fresh, valid id
    assert db.query('s("c7", y)') == [("d",)]
    assert sorted(db.query("s(x, y)")) == [("a", "b"), ("c7", "d")]


def test_a_budget_stops_a_runaway_regular_expression() -> None:
    """It stops (how soon is measured by bench/bench_budget.py, not asserted here)."""
    from datalog.lang.errors import BudgetExceeded

    db = Database()  # a pattern from the data: no check refuses it before it runs
    db.define(
        ".decl s(x: symbol)\n.decl p(x: symbol)\n.decl hit(x: symbol)\n"
        "hit(x) :- s(x), p(q), match(q, x)."
    )
    db.insert("p", [("((a|c)|a)+$",)])  # backtracks, and no check sees it
    db.insert("s", [("a" * 40 + "b",), ("aaa",)])
    with pytest.raises(BudgetExceeded, match="regular expression"), db.budget(0.3):
        db.query("hit(x)")
    db.retract("s", [("a" * 40 + "b",)])
    assert db.query("hit(x)") == [("aaa",)]  # and without a budget, matching still works


def test_paced_subscriptions_deliver_consolidated_changes_every_n_epochs_or_s_seconds() -> None:
    clock = ManualClock()
    db = Database(clock=clock)
    db.define(".decl e(x: number)")
    by_epochs: list[Change] = []
    by_time: list[tuple[float, Change]] = []
    start = db.epoch
    db.subscribe("e(x)", by_epochs.append, granularity={"epochs": 4})
    db.subscribe("e(x)", lambda c: by_time.append((clock.now(), c)), granularity={"seconds": 1})
    for i in range(12):  # each commit inserts i and retracts i - 1: one row in, one out
        with db.transaction() as tx:
            tx.insert("e", [(i,)])
            tx.retract("e", [(i - 1,)])
        clock.advance(0.25)
    epochs = [c.epoch for c in by_epochs[1:]]
    assert epochs == [start + 4, start + 8, start + 12]
    # consolidated: of four commits, only the last row in and the first row out remain
    assert [sorted(zip(c.rows, c.diffs, strict=True)) for c in by_epochs[1:]] == [
        [((3,), 1)],
        [((3,), -1), ((7,), 1)],
        [((7,), -1), ((11,), 1)],
    ]
    clock.advance(5)  # what is held comes by the timer, commit or no commit
    times = [t for t, _ in by_time[1:]]
    assert times == [1.0, 2.0, 3.0]  # a timer's delivery every S seconds
    assert [c.epoch for _, c in by_time[1:]] == [start + 4, start + 8, start + 12]
    answer: dict[tuple[object, ...], int] = {}
    for _, change in by_time:
        for row, diff in zip(change.rows, change.diffs, strict=True):
            answer[row] = answer.get(row, 0) + diff
    assert {row: n for row, n in answer.items() if n} == {(11,): 1}
    with pytest.raises(UnsupportedError, match="granularity"):
        db.subscribe("e(x)", print, granularity={"epoch": 2})


def test_a_change_paced_by_seconds_is_held_at_most_s_seconds_without_another_commit() -> None:
    """The bound from above: after a burst of commits and then none, the consolidated
    change still arrives (by a wake-up), S seconds after the last delivery; waiting
    for a later commit, as the pacing once did, would deliver nothing at all."""
    clock = ManualClock()
    db = Database(clock=clock)
    db.define(".decl e(x: number)")
    arrived: list[tuple[float, Change]] = []
    sub = db.subscribe(
        "e(x)", lambda c: arrived.append((clock.now(), c)), granularity={"seconds": 0.5}
    )
    for i in range(4):
        db.insert("e", [(i,)])
    db.retract("e", [(1,)])  # cancels out: not delivered
    clock.advance(0.25)
    assert arrived[1:] == []
    clock.advance(0.25)
    (at, change) = arrived[1]
    assert at == 0.5
    assert (change.epoch, change.rows, change.diffs) == (db.epoch, [(0,), (2,), (3,)], [1] * 3)
    db.insert("e", [(9,)])  # just delivered: this one waits its turn, then comes alone
    clock.advance(0.25)
    assert len(arrived) == 2
    clock.advance(0.25)
    again, change = arrived[2]
    assert again == 1.0 and (change.epoch, change.rows, change.diffs) == (db.epoch, [(9,)], [1])
    sub.close()
    db.insert("e", [(10,)])
    clock.advance(5)
    assert len(arrived) == 3  # a closed subscription's timer delivers nothing


def test_with_both_bounds_the_later_one_decides_embedded_and_served() -> None:
    """`{"epochs": 3, "seconds": 100}`: nothing before both have passed, then the
    whole consolidated change, from the database and from the server alike (one
    pacing policy, `datalog.db.pacing`)."""
    from server.session import Hub
    from tests.server.helpers import FakeHost

    clock = ManualClock()
    db = Database(clock=clock)
    db.define(".decl e(x: number)")
    seen: list[Change] = []
    db.subscribe("e(x)", seen.append, granularity={"epochs": 3, "seconds": 100})
    host = FakeHost()
    hub = Hub(db, host)
    session = hub.open()
    hub.handle(session, json.dumps({"type": "subscribe", "id": 1, "text": "e(x)",
                                    "granularity": {"epochs": 3, "seconds": 100}}))  # fmt: skip
    host.take()
    for i in range(4):
        hub.handle(session, json.dumps({"type": "transact", "id": 2 + i, "inserts": {"e": [[i]]}}))
    assert seen[1:] == [] and [m["type"] for m in host.take()] == ["transacted"] * 4
    clock.advance(100)  # the embedded subscription's wake-up
    host.fire()  # the server's (its host's clock moves to when it is due)
    assert [(c.epoch, c.rows) for c in seen[1:]] == [(db.epoch, [(0,), (1,), (2,), (3,)])]
    (change,) = host.take()
    assert (change["epoch"], change["rows"]) == (db.epoch, [[0], [1], [2], [3]])


@pytest.mark.parametrize(
    ("program", "query", "n"),
    [
        (".decl p(x: number, y: number)\np(x, y) :- a(x), b(y).", "p(x, y)", 300),
        ("", "a(x), b(y), c(z)", 60),
    ],
    ids=["join", "delta-query"],
)
def test_a_budget_stops_a_huge_product_between_two_chunks_and_changes_nothing(
    program: str, query: str, n: int
) -> None:
    """A cartesian product is computed in chunks, and the budget is checked between
    them: the step stops after a few chunks, not after the whole product."""
    from datalog.lang.errors import BudgetExceeded
    from differential.dataflow import Interrupted
    from differential.operators import join
    from joins import extend

    db = Database()
    db.define(".decl a(x: number)\n.decl b(y: number)\n.decl c(z: number)\n" + program)
    for relation in "abc":
        db.insert(relation, [(i,) for i in range(n)])
    checks = 0

    def check() -> None:  # the budget runs out at the third check inside the step
        nonlocal checks
        checks += 1
        if checks == 3:
            raise Interrupted("stopped: the computation ran past its time budget")

    with (
        tuned(TUNING.but(pairs=1_000, proposals=1_000)),
        mock.patch.object(join, "check_budget", check),
        mock.patch.object(extend, "check_budget", check),
        pytest.raises(BudgetExceeded),
        db.budget(60),
    ):
        db.query(query)
    assert checks == 3  # stopped inside the step, at its third chunk
    assert len(db.query("a(x)")) == n
    assert len(db.query(query)) == n ** (3 if "c(z)" in query else 2)
