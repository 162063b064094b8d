"""Budgets (`differential.budget`, docs/adr/0039): per owner and per context,
read by check points; and the steps that run in parts so that check points come
often enough (`sort_order` of many rows)."""

from __future__ import annotations

import contextvars
import threading
import weakref
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from differential import batch, memory
from differential.budget import (
    Budget,
    Interrupted,
    TooManyRows,
    WorkLock,
    check_budget,
    check_rows,
    remaining,
    row_limit,
    unbudgeted,
)
from differential.tuning import TUNING, tuned
from tests.budget import examples


class Clock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Stopped(Interrupted):
    """An owner's own error, as a database's `BudgetExceeded`."""


def test_a_budget_binds_its_owners_work_once_its_time_is_spent() -> None:
    clock = Clock()
    own = Budget(clock=clock)
    with own.running(), own.limit(seconds=5):
        check_budget()
        assert remaining() == 5
        clock.now += 5
        check_budget()  # at the deadline, not past it
        clock.now += 0.5
        with pytest.raises(Interrupted, match=r"time budget \(5 s\)"):
            check_budget()
    check_budget()  # the block is over: no limit


def test_check_points_read_the_innermost_running_owner_only() -> None:
    clock = Clock()
    first, second = Budget(clock=clock), Budget(clock=clock)
    with first.running(), first.limit(seconds=0):
        clock.now += 1
        with second.running():
            check_budget()  # second's work: first's spent budget does not bind it
            assert remaining() is None
        with pytest.raises(Interrupted):
            check_budget()


def test_nested_limits_add_up_the_tighter_of_each_binds() -> None:
    clock = Clock()
    own = Budget(clock=clock)
    with own.running(), own.limit(seconds=10, rows=100):
        with own.limit(seconds=60, rows=5):
            assert remaining() == 10
            assert row_limit() == 5
            with own.limit(None, None):
                assert (remaining(), row_limit()) == (10, 5)
        assert row_limit() == 100


def test_unbudgeted_lifts_every_limit_of_the_running_owner_and_only_within_the_block() -> None:
    clock = Clock()
    own, other = Budget(clock=clock), Budget(clock=clock)
    own.interrupt()
    with own.running(), own.limit(seconds=0, rows=1):
        clock.now += 1
        with unbudgeted():
            check_budget()
            check_rows(10**9, "a join")
            assert row_limit() is None
            with other.running(), other.limit(seconds=0):
                clock.now += 1
                with pytest.raises(Interrupted):  # another owner's limits still bind
                    check_budget()
        with pytest.raises(Interrupted):
            check_budget()


def test_a_row_limit_refuses_more_rows_with_the_owners_own_error() -> None:
    class TooBig(TooManyRows):
        pass

    own = Budget(too_big=TooBig)
    with own.running(), own.limit(rows=1000):
        check_rows(1000, "a join")
        with pytest.raises(TooBig, match="1,001 rows in one step, more than the limit of 1,000"):
            check_rows(1001, "a join")
    check_rows(10**9, "a join")  # nothing runs: no limit


def test_an_interrupt_binds_every_thread_and_stays() -> None:
    own = Budget(stopped=Stopped)
    seen: list[BaseException] = []

    def work() -> None:
        with own.running():
            try:
                check_budget()
            except Interrupted as error:
                seen.append(error)

    own.interrupt()
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    work()
    assert [type(e) for e in seen] == [Stopped, Stopped]


def test_limits_set_in_one_context_do_not_bind_another() -> None:
    clock = Clock()
    own = Budget(clock=clock)
    elsewhere: list[float | None] = []

    def other_thread() -> None:
        with own.running():
            check_budget()
            elsewhere.append(remaining())

    with own.running(), own.limit(seconds=0):
        clock.now += 1
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        context = contextvars.Context()  # a fresh context, as a new thread has
        context.run(other_thread)
        with pytest.raises(Interrupted):
            check_budget()
    assert elsewhere == [None, None]


def test_a_work_lock_marks_its_owners_work_running_and_gives_its_own_errors() -> None:
    own = Budget(stopped=Stopped)
    lock = WorkLock(own)
    own.interrupt()
    with pytest.raises(Stopped), lock:
        check_budget()
    with pytest.raises(Stopped, match="stray") as raised, lock:
        raise Interrupted("stray")  # from another budget's check point, say
    assert isinstance(raised.value.__cause__, Interrupted)
    with lock, lock, pytest.raises(Stopped):  # re-entrant
        check_budget()
    check_budget()  # released: nothing runs


class Held:
    """Stands for a half-built dataflow: in a reference cycle, as operators are."""

    def __init__(self) -> None:
        self.cycle = self


def _stopped_while_holding(kept: list[weakref.ref[Held]]) -> None:
    held = Held()
    kept.append(weakref.ref(held))
    raise Interrupted("stopped")


def test_a_stopped_computation_leaving_a_work_lock_is_freed_and_given_back_at_once() -> None:
    lock = WorkLock(Budget(stopped=Stopped))
    kept: list[weakref.ref[Held]] = []
    with mock.patch("differential.budget.give_back") as give_back:
        with pytest.raises(Stopped) as stopped, lock, lock:
            _stopped_while_holding(kept)
        assert kept[0]() is None  # though the error and its traceback are still held
        assert stopped.value.__cause__ is not None
        with pytest.raises(ValueError), lock:
            raise ValueError("a plain failure keeps its frames for a debugger")
    assert give_back.call_count == 1  # the outermost exit of a stopped computation only


def test_give_back_is_a_no_op_without_glibc() -> None:
    with mock.patch.object(memory, "_glibc", return_value=None):
        assert memory.give_back(0) is False
        assert memory.held_free() is None


@settings(max_examples=examples(60), deadline=None)
@given(
    st.integers(1, 400),
    st.lists(st.sampled_from([2, 50, 1 << 40, 1 << 62]), min_size=1, max_size=3),
    st.booleans(),
    st.booleans(),
    st.integers(0, 2**32 - 1),
    st.integers(3, 50),
)
def test_a_sort_in_parts_orders_rows_as_one_sort_does(
    n: int, ranges: list[int], floats: bool, stable: bool, seed: int, part: int
) -> None:
    rng = np.random.default_rng(seed)
    columns: list[np.ndarray] = [rng.integers(0, high, n) for high in ranges]
    if floats:
        columns.append(rng.integers(0, 4, n) / 2)
    times = rng.integers(0, 3, (2, n))
    with tuned(TUNING.but(sort_part=part)):
        order = batch.sort_order(columns, times, stable)
    keys = [*columns, *times]
    whole = batch.sort_order(columns, times, stable=True)
    assert sorted(order.tolist()) == list(range(n))
    assert all(np.array_equal(k[order], k[whole]) for k in keys)
    if stable:
        assert order.tolist() == whole.tolist()


def test_a_sort_in_parts_checks_the_budget_between_its_parts() -> None:
    clock = Clock()
    own = Budget(clock=clock)
    checks = 0
    real = own.check

    def counting(where: str = "") -> None:
        nonlocal checks
        checks += 1
        if checks == 3:
            clock.now += 10  # time runs out at the third check
        real(where)

    rows = np.arange(1000)[::-1].copy()
    with (
        mock.patch.object(own, "check", counting),
        tuned(TUNING.but(sort_part=100)),
        own.running(),
        own.limit(seconds=5),
        pytest.raises(Interrupted),
    ):
        batch.sort_order([rows])
    assert checks == 3  # stopped there, long before its last part (about 20 in all)
