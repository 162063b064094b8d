"""Faults an operation may be run under, and how the model test judges what happened.

A `Fault` is drawn per operation: none (most often), a spent budget (`with
db.budget(0.0)`), or a KeyboardInterrupt / MemoryError at the n-th point of one
kind (`faults.KINDS`). What the API promises decides the outcome the database
must show (DESIGN §3, §7; ADR 0032):

- a failure (a budget, a functor, an engine step before the epoch) leaves the
  database exactly as it was: same epoch, same answers, nothing appended to the log;
- a failure after the epoch (a subscriber's KeyboardInterrupt; an engine step
  while the epoch is sealed, compacted or delivered) means the commit happened,
  whole: the model advances and every subscriber got the epoch;
- an engine fault may fall on either side: the database's epoch tells which, and
  everything else must agree with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from datalog import BudgetExceeded, FunctorError
from tests.datalog.model.faults import ENGINE_POINTS, ERRORS, Faults


@dataclass(frozen=True)
class Fault:
    """`budget`, or an `error` at the `nth` point of `kind`."""

    kind: str
    error: str = "KeyboardInterrupt"
    nth: int = 1

    def __str__(self) -> str:
        return "budget 0 s" if self.kind == "budget" else f"{self.error} at {self.kind} #{self.nth}"


# Where to raise, by kind: how many points of each kind an operation on the model's
# small data meets, about (a plain functor is called once per distinct argument
# tuple; a small commit through a few live dataflows steps operators 10 to 30 times,
# advances and seals each of them and each input once, inserts into a few traces,
# builds a batch twenty-odd times, and drops what a failure or a one-shot query
# leaves).
NTH = {
    "callback": st.integers(1, 4),
    "functor": st.integers(1, 4),
    "engine:step": st.integers(1, 30),
    "engine:advance": st.integers(1, 12),
    "engine:round": st.integers(1, 3),
    "engine:seal": st.integers(1, 10),
    "engine:insert": st.integers(1, 12),
    "engine:build": st.integers(1, 25),
    "engine:drop": st.integers(1, 2),
}


def fault_strategy(*kinds: str) -> st.SearchStrategy[Fault | None]:
    """None three times in five; else a spent budget or an error at a sampled point
    (`engine` stands for every engine point)."""
    if not kinds:
        return st.none()
    errors = st.sampled_from(sorted(ERRORS))
    expanded = [f"engine:{p}" for p in ENGINE_POINTS] if "engine" in kinds else []
    expanded += [k for k in kinds if k not in ("engine", "budget")]
    points = [st.builds(Fault, st.just(k), errors, NTH[k]) for k in expanded]
    some = st.one_of(*points, *([st.just(Fault("budget"))] if "budget" in kinds else []))
    return st.one_of(st.none(), st.none(), st.none(), some, some)


def fired(fault: Fault | None, faults: Faults) -> bool:
    return fault is not None and (fault.kind == "budget" or faults.fired)


def is_injected(error: BaseException, fault: Fault | None, faults: Faults) -> bool:
    """Whether `error` is the injected fault (or what the API makes of it: a spent
    budget is `BudgetExceeded`; an exception of a functor a `FunctorError`)."""
    if fault is None:
        return False
    if fault.kind == "budget":
        return isinstance(error, BudgetExceeded)
    if not faults.fired:
        return False
    raised = ERRORS[fault.error]
    return isinstance(error, raised) or (
        isinstance(error, FunctorError) and isinstance(error.__cause__, raised)
    )


def must_commit(fault: Fault, explained: bool = False) -> bool | None:
    """What a write that raised `fault` must have done: True (committed), False
    (nothing), None (either: the epoch decides). `explained`: why-not watches are
    live, which call functors once the epoch has committed too (explaining again)."""
    if fault.kind == "budget":
        return False
    if fault.kind == "callback":
        return True  # subscribers are called once the epoch has committed
    if fault.kind == "functor":  # functors run while the epoch is computed
        return None if explained else False
    return None  # an engine point: before or after the epoch
