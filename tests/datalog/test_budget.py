"""Budgets and interrupts belong to one database and one thread of execution
(`Database.budget`, `Database.interrupt`, docs/adr/0039): they never stop another
database's work or another thread's, and every way a computation is stopped
reaches the user as `BudgetExceeded`, a `DatalogError`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datalog import Database, DatalogError
from datalog.lang import functions as functions_module
from datalog.lang.errors import BudgetExceeded, RowLimitExceeded, UnsupportedError
from differential.budget import Interrupted
from differential.tuning import TUNING, tuned
from tests.budget import examples

PROGRAM = """
.decl e(x: number, y: number)
.decl r(x: number, y: number)
r(x, y) :- e(x, y).
r(x, z) :- r(x, y), e(y, z).
"""
CHAIN = [(i, i + 1) for i in range(20)]
WAIT = 60  # seconds a test waits for another thread before it fails (never reached)


def _database(**options: Any) -> Database:
    db = Database(**options)
    db.define(PROGRAM)
    db.insert("e", CHAIN)
    return db


def test_a_spent_budget_of_one_database_does_not_stop_another_in_the_same_thread() -> None:
    first, second = _database(), _database()
    with first.budget(0.0):
        assert len(second.query("r(x, y)")) == 210
        with pytest.raises(BudgetExceeded):
            first.query("r(x, y)")
        with second.budget(60):  # nested budgets of other databases do not mix either
            assert len(second.query("r(0, y)")) == 20
    assert len(first.query("r(x, y)")) == 210


def test_a_database_run_inside_another_ones_subscriber_is_bound_by_its_own_budget() -> None:
    first, second = _database(), _database()
    seen: list[int] = []

    def callback(change: Any) -> None:
        seen.append(len(second.query("r(x, y)")))  # no budget of second's: it runs

    first.subscribe("r(0, y)", callback)
    with first.budget(60), second.budget(0.0):
        first.insert("e", [(20, 21)])
    assert seen[-1] == 210
    assert len(first.query("r(0, y)")) == 21


def test_an_interrupt_of_one_database_leaves_every_other_working() -> None:
    first, second = _database(), _database()
    first.interrupt()
    assert len(second.query("r(x, y)")) == 210
    second.insert("e", [(20, 21)])
    with pytest.raises(BudgetExceeded, match="interrupted"):
        first.query("r(x, y)")


def _operations(db: Database) -> dict[str, Callable[[], object]]:
    """Every entry point that computes, each on its own."""
    epoch = db.epoch
    return {
        "query": lambda: db.query("r(x, y)"),
        "as_of": lambda: db.query("r(x, y)", as_of=epoch),
        "subscribe": lambda: db.subscribe("r(x, 3)", lambda change: None),
        "redefine": lambda: db.redefine("r", "r(x, y) :- e(y, x)."),
        "transaction": lambda: db.insert("e", [(100, 101)]),
        "define": lambda: db.define("r(x, y) :- e(y, x)."),  # the live query changes
        "why": lambda: db.why("r(0, 5)"),
    }


@pytest.mark.parametrize("operation", list(_operations(Database())))
def test_every_interrupted_operation_raises_budget_exceeded_and_changes_nothing(
    operation: str,
) -> None:
    db = _database(history=None)
    db.subscribe("r(0, y)", lambda change: None)  # a live query every change must run
    epoch, answer = db.epoch, sorted(db.query("r(x, y)"))
    db.interrupt()
    with pytest.raises(BudgetExceeded) as stopped:
        _operations(db)[operation]()
    assert isinstance(stopped.value, DatalogError)
    assert "interrupted" in stopped.value.message
    assert db.epoch == epoch
    with mock.patch.object(db.lock.budget, "interrupted", None):  # look inside, unstopped
        assert sorted(db.query("r(x, y)")) == answer


def test_a_stray_interrupted_inside_a_databases_work_reaches_the_user_as_budget_exceeded() -> None:
    db = _database()

    def functor(x: int) -> int:
        raise Interrupted("stopped by something else")

    db = Database(functors={"stop": functor})
    db.define(".decl a(x: number)\n.functor stop(x: number): number\n")
    db.insert("a", [(1,)])
    with pytest.raises(BudgetExceeded, match="stopped by something else"):
        db.query("a(x), y = @stop(x)")


def test_a_functor_that_meets_a_spent_budget_raises_budget_exceeded_not_a_functor_error() -> None:
    other = _database()
    other.interrupt()
    db = Database(functors={"ask": lambda x: len(other.query("r(x, y)"))})
    db.define(".decl a(x: number)\n.functor ask(x: number): number\n")
    db.insert("a", [(1,)])
    with pytest.raises(BudgetExceeded, match="interrupted"):
        db.query("a(x), y = @ask(x)")


@pytest.fixture
def held() -> Iterator[Callable[[Callable[[], object]], None]]:
    """Run a block in another thread and keep it open until the test ends."""
    release = threading.Event()
    threads: list[threading.Thread] = []

    def hold(enter: Callable[[], object]) -> None:
        entered = threading.Event()

        def body() -> None:
            with enter():  # type: ignore[attr-defined]
                entered.set()
                release.wait(WAIT)

        thread = threading.Thread(target=body, daemon=True)
        threads.append(thread)
        thread.start()
        assert entered.wait(WAIT)

    yield hold
    release.set()
    for thread in threads:
        thread.join(WAIT)


def test_a_budget_set_in_one_thread_binds_neither_another_database_nor_another_thread(
    held: Callable[[Callable[[], object]], None],
) -> None:
    first, second = _database(), _database()
    held(lambda: first.budget(0.0))  # spent, and held open in another thread
    held(lambda: second.budget(0.0))
    assert len(first.query("r(x, y)")) == 210  # this thread has no budget
    assert len(second.query("r(x, y)")) == 210


def test_an_interrupt_from_another_thread_stops_a_running_computation() -> None:
    started = threading.Event()

    def tick(x: int) -> int:
        started.set()
        return x + 1

    db = Database(functors={"tick": tick})
    db.define(".decl n(x: number)\n.functor tick(x: number): number\nn(0).\nn(@tick(x)) :- n(x).")
    outcome: list[BaseException] = []

    def runaway() -> None:
        try:
            db.query("n(x)")  # counts for ever
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=runaway, daemon=True)
    thread.start()
    assert started.wait(WAIT)
    db.interrupt()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], BudgetExceeded)


def test_an_interrupt_from_another_thread_stops_a_regular_expression_that_runs_for_ever() -> None:
    started = threading.Event()
    compiled = functions_module._compiled

    class Signalling:
        def __init__(self, pattern: str) -> None:
            self.pattern = compiled(pattern)

        def fullmatch(self, text: str, timeout: float | None = None) -> object:
            started.set()
            return self.pattern.fullmatch(text, timeout=timeout)

    db = Database()  # a pattern from the data: no check refuses it before it runs
    db.define(".decl s(x: symbol)\n.decl p(x: symbol)\n")
    db.insert("p", [("((a|b)|a)+b",)])  # backtracks for ever, and no check sees it
    db.insert("s", [("a" * 40 + "b!",)])
    outcome: list[BaseException] = []

    def runaway() -> None:
        try:
            db.query("s(x), p(q), match(q, x)")  # no budget: only an interrupt stops it
        except BaseException as error:
            outcome.append(error)

    with mock.patch.object(functions_module, "_compiled", Signalling):
        thread = threading.Thread(target=runaway, daemon=True)
        thread.start()
        assert started.wait(WAIT)
        db.interrupt()
        thread.join(WAIT)
    assert not thread.is_alive()
    assert [type(e) for e in outcome] == [BudgetExceeded]


def test_a_constant_pattern_that_backtracks_exponentially_is_refused_at_its_position() -> None:
    db = Database()
    db.define(".decl s(x: symbol)\n.decl hit(x: symbol)")
    with pytest.raises(UnsupportedError, match="nested quantifier") as refused:
        db.define('hit(x) :- s(x), match("(a+)+b", x).')
    assert (refused.value.line, refused.value.column) == (1, 23)
    with pytest.raises(UnsupportedError, match="same text") as refused:
        db.query('s(x), !match("(a|a)+b", x)')
    assert (refused.value.line, refused.value.column) == (1, 14)
    db.define('hit(x) :- s(x), match("(a++)+b", x).')  # possessive: safe
    db.insert("s", [("aab",), ("a" * 40,)])
    assert db.query("hit(x)") == [("aab",)]


def test_a_row_limit_refuses_a_cross_product_before_it_is_built() -> None:
    db = Database()
    db.define(".decl a(x: number)\n.decl b(y: number)\n.decl q(x: number, y: number)")
    db.define("q(x, y) :- a(x), b(y).")
    db.insert("a", [(i,) for i in range(300)])
    db.insert("b", [(i,) for i in range(300)])
    with pytest.raises(RowLimitExceeded, match="90,000 rows") as refused, db.budget(rows=50_000):
        db.query("q(x, y)")
    assert isinstance(refused.value, BudgetExceeded)
    with db.budget(rows=90_000):
        assert len(db.query("q(x, y)")) == 90_000


@settings(
    max_examples=examples(30),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_steps_run_in_parts_and_counted_under_a_row_limit_give_the_reference_answers(
    data: st.DataObject,
) -> None:
    """Sorts, reduces, joins and extensions split in parts as tiny as can be, and the
    pairs of every join counted first (as under a row limit), meet the reference."""
    from differential.operators import join
    from joins import extend
    from tests.datalog.test_engine_vs_reference import check_against_reference

    unlimited = 10**12
    with (
        # the numpy kernels whatever the size, and every part as small as can be
        tuned(TUNING.but(few=0, sort_part=3, history=2, pairs=2, proposals=2)),
        mock.patch.object(join, "row_limit", lambda: unlimited),
        mock.patch.object(extend, "row_limit", lambda: unlimited),
    ):
        check_against_reference(data)


def test_a_budget_spent_after_the_commit_point_does_not_fail_the_committed_epoch() -> None:
    """Past the commit point nothing may raise `BudgetExceeded` (it says nothing
    changed): finishing the epoch, its deliveries included, is exempt."""
    db = _database()
    now = [0.0]
    answers: list[int] = []

    def callback(change: Any) -> None:
        now[0] += 100  # the budget runs out while the epoch is delivered
        answers.append(len(db.query("r(x, y)")))

    db.subscribe("r(0, y)", callback)
    epoch = db.epoch
    with mock.patch.object(db.lock.budget, "clock", lambda: now[0]), db.budget(10):
        db.insert("e", [(20, 21)])
    assert db.epoch == epoch + 1
    assert answers[-1] == 231
    with mock.patch.object(db.lock.budget, "clock", lambda: now[0]), db.budget(10):
        now[0] += 100
        with pytest.raises(BudgetExceeded):  # before the commit point it binds
            db.insert("e", [(21, 22)])
    assert db.epoch == epoch + 1


def test_a_pattern_from_the_data_that_backtracks_exponentially_is_refused_when_matched() -> None:
    db = Database()
    db.define(".decl s(x: symbol)\n.decl p(x: symbol)\n.decl hit(x: symbol)")
    db.define("hit(x) :- s(x), p(q), match(q, x).")
    db.insert("s", [("aab",), ("a" * 40,)])
    db.insert("p", [("a*b",)])
    assert db.query("hit(x)") == [("aab",)]
    db.subscribe("hit(x)", lambda change: None)
    epoch = db.epoch
    with pytest.raises(UnsupportedError, match="nested quantifier"):
        db.insert("p", [("(a+)+b",)])
    assert db.epoch == epoch
    assert db.query("p(q)") == [("a*b",)]
