"""Budgets: what bounds one owner's computations, and the check points that read it.

Layer: differential. Imports only the standard library and `differential.memory`.

A `Budget` belongs to one owner of work (a database). It holds two kinds of limit:

- an interrupt (`interrupt`), for every thread: from the moment it is set, every
  check point of the owner's work raises, in whichever thread that work runs. It
  is meant for shutting down, so it stays set;
- per thread of execution (a `contextvars` context), a deadline and a row limit
  (`limit`): they bind only the work of this owner run in the context that set
  them, never another owner's work nor another thread's.

The owner's work marks itself running (`running`, or by holding its `WorkLock`);
check points (`check_budget`, `check_rows`, `remaining`) read the budget of the
innermost running owner in the current context, so a budget set on one database
never stops another database's work, even when the two nest (a subscriber of one
querying the other). `unbudgeted` lifts the running owner's limits for repairs
that must finish.

What a check point raises is the owner's choice (`Budget(stopped=..., too_big=...)`):
a database raises its own `DatalogError` subclasses, which derive from `Interrupted`
and `TooManyRows`, so nothing leaves it as a bare `Interrupted`.
"""

from __future__ import annotations

import gc
import threading
import time as clock
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import MappingProxyType, TracebackType

from differential.memory import give_back


class Interrupted(Exception):
    """A computation was stopped at a check point: it ran past its budget, or its
    owner was interrupted (shutting down)."""


class TooManyRows(Interrupted):
    """A step would produce more rows than the running budget allows; raised before
    they are built."""


@dataclass(frozen=True)
class Limits:
    """One context's limits on one owner's work (None: no such limit)."""

    deadline: float | None = None  # on the budget's clock
    seconds: float | None = None  # the budget the deadline came from (for messages)
    rows: int | None = None
    exempt: bool = False  # `unbudgeted`: nothing binds, the interrupt included

    def tightened(self, deadline: float | None, seconds: float | None, rows: int | None) -> Limits:
        """These limits and new ones together: the tighter of each (an exemption ends)."""
        if self.exempt:
            return Limits(deadline, seconds, rows)
        if deadline is None or (self.deadline is not None and self.deadline <= deadline):
            deadline, seconds = self.deadline, self.seconds
        if rows is None or (self.rows is not None and self.rows <= rows):
            rows = self.rows
        return Limits(deadline, seconds, rows)


_NONE = Limits()
_EXEMPT = Limits(exempt=True)
# The owner whose work runs now in this context, and this context's limits per owner.
_RUNNING: ContextVar[Budget | None] = ContextVar("deltalog_running_budget", default=None)
_LIMITS: ContextVar[Mapping[Budget, Limits]] = ContextVar(
    "deltalog_limits", default=MappingProxyType({})
)


class Budget:
    """What bounds one owner's computations (see the module docstring).

    `clock` gives seconds (monotonic); tests inject one to expire a budget at a
    chosen check point rather than after some wall-clock time."""

    def __init__(
        self,
        stopped: type[Interrupted] = Interrupted,
        too_big: type[TooManyRows] = TooManyRows,
        clock: Callable[[], float] = clock.monotonic,
    ) -> None:
        self.stopped = stopped
        self.too_big = too_big
        self.clock = clock
        self.interrupted: str | None = None  # why every check point raises, once set

    def interrupt(self, reason: str = "stopped: the database was interrupted") -> None:
        """Stop the owner's work at its next check point, in every thread, and all of
        its later work (shutting down). Safe from any thread or a signal handler."""
        self.interrupted = reason

    @contextmanager
    def limit(self, seconds: float | None = None, rows: int | None = None) -> Iterator[None]:
        """Within the block, in this context, the owner's work stops at the first
        check point `seconds` after now, and refuses a step that would build more
        than `rows` rows. Nested limits add up: the tighter of each binds."""
        if seconds is not None and not seconds >= 0:
            raise ValueError(f"a time budget is a number of seconds >= 0, not {seconds!r}")
        if rows is not None and rows < 0:
            raise ValueError(f"a row limit is a number of rows >= 0, not {rows!r}")
        deadline = None if seconds is None else self.clock() + seconds
        limits = _LIMITS.get()
        mine = limits.get(self, _NONE).tightened(deadline, seconds, rows)
        token = _LIMITS.set({**limits, self: mine})
        try:
            yield
        finally:
            _LIMITS.reset(token)

    @contextmanager
    def running(self) -> Iterator[None]:
        """Within the block, check points read this budget (the owner's work runs)."""
        token = _RUNNING.set(self)
        try:
            yield
        finally:
            _RUNNING.reset(token)

    def limits(self) -> Limits:
        """This context's limits on the owner's work."""
        return _LIMITS.get().get(self, _NONE)

    def check(self, where: str = "") -> None:
        """Raise if the owner's work must stop now (`where`: said in the message)."""
        limits = self.limits()
        if limits.exempt:
            return
        if self.interrupted is not None:
            raise self.stopped(self.interrupted)
        if limits.deadline is not None and self.clock() > limits.deadline:
            raise self.stopped(
                f"stopped: the computation ran past its time budget ({limits.seconds:g} s)"
                + (f" {where}" if where else "")
            )

    def check_rows(self, rows: int, what: str, at_least: bool = False) -> None:
        limits = self.limits()
        if limits.rows is not None and rows > limits.rows and not limits.exempt:
            raise self.too_big(
                f"refused: {what} would produce {'at least ' if at_least else ''}{rows:,} "
                f"rows in one step, more than the limit of {limits.rows:,} rows"
            )

    def remaining(self, where: str = "") -> float | None:
        self.check(where)
        limits = self.limits()
        if limits.deadline is None or limits.exempt:
            return None
        return max(limits.deadline - self.clock(), 0.001)


class WorkLock:
    """A re-entrant lock whose holder's work runs under `budget`: an owner's entry
    points take it, so that its work is marked running wherever it starts.

    Leaving it (outermost) with an exception gives the memory the failed work
    freed back to the system (`differential.memory.give_back`), and turns a bare
    `Interrupted` (from a check point of another budget, or a stray one) into the
    budget's own error, so the owner's callers only ever see its errors."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self._lock = threading.RLock()
        self._tokens: list[Token[Budget | None]] = []  # only the holder touches them

    def __enter__(self) -> WorkLock:
        self._lock.acquire()
        self._tokens.append(_RUNNING.set(self.budget))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        _RUNNING.reset(self._tokens.pop())
        outermost = not self._tokens
        self._lock.release()
        if error is None:
            return
        if outermost and isinstance(error, Interrupted | MemoryError):
            _release(error)
        if isinstance(error, Interrupted) and not isinstance(error, self.budget.stopped):
            raise self.budget.stopped(str(error)) from error


def _release(error: BaseException) -> None:
    """Free what a computation stopped half-way built, and give it back to the system.

    Its dataflow is held by the finished frames of the error's traceback (and of the
    errors it was raised from) and by reference cycles (operators and streams point
    at each other): the frames' locals are cleared (a post-mortem debugger sees them
    empty) and the cycles collected while the error propagates, not at some later
    collection."""
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        traceback.clear_frames(found.__traceback__)
        found = found.__cause__ or found.__context__
    gc.collect()
    give_back()


def check_budget() -> None:
    """Raise if the running owner's work must stop now: its budget's time is spent or
    it was interrupted. Cheap: called between steps and between chunks of a step."""
    budget = _RUNNING.get()
    if budget is not None:
        budget.check()


def check_rows(rows: int, what: str, at_least: bool = False) -> None:
    """Refuse, before building them, a step's `rows` rows beyond the running budget's
    row limit (`what` says what would produce them; `at_least`: it would produce
    more, only these are counted yet)."""
    budget = _RUNNING.get()
    if budget is not None:
        budget.check_rows(rows, what, at_least)


def row_limit() -> int | None:
    """The running budget's row limit (None: none binds): a step that can count its
    output before building it counts it only when a limit asks for it."""
    budget = _RUNNING.get()
    if budget is None:
        return None
    limits = budget.limits()
    return None if limits.exempt else limits.rows


def remaining(where: str = "") -> float | None:
    """Seconds left of the running budget (None: no deadline); raises once spent or
    interrupted (`where` says where, in the message).

    For work that runs inside one step and can bound itself (a regular expression)."""
    budget = _RUNNING.get()
    return None if budget is None else budget.remaining(where)


def stop(reason: str) -> Interrupted:
    """The error the running owner's check points raise, for work that found out by
    itself that its time is up (a regular expression's timeout)."""
    budget = _RUNNING.get()
    return Interrupted(reason) if budget is None else budget.stopped(reason)


@contextmanager
def unbudgeted() -> Iterator[None]:
    """No limit binds the running owner's work within the block, not even an
    interrupt: for repairs that must finish (a rollback)."""
    budget = _RUNNING.get()
    if budget is None:
        yield
        return
    token = _LIMITS.set({**_LIMITS.get(), budget: _EXEMPT})
    try:
        yield
    finally:
        _LIMITS.reset(token)


@contextmanager
def budget(seconds: float | None, rows: int | None = None) -> Iterator[Budget]:
    """A fresh budget, running and limited within the block: for work that has no
    owner of its own (tests and benchmarks of dataflows)."""
    own = Budget()
    with own.running(), own.limit(seconds, rows):
        yield own
