"""Heavy requests: those that ran past their slice of the engine thread.

Layer: server — may import only the public API of datalog.

The engine thread first gives a request a short slice of time (`HistoryLimits.slice`).
One that runs past it is stopped there, which changes nothing, and becomes a `Heavy`
request: a one-shot read (`query`, `explain`, `why`, `why_not`, `what_if`) is answered by a forked
child from its copy of the database, and anything that changes the database or
starts a live query (`define`, `transact`, `redefine`, `subscribe`) is first tried
in a child, and done on the engine thread, with its whole budget, only if the child
finished it within that budget. So a request that can never finish holds the engine
for one slice, whatever it is (docs/adr/0038).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from server.protocol import ProtocolError, Request, encode, error_reply

if TYPE_CHECKING:
    from server.feeds import HistoryLimits
    from server.workers import Outcome

READS = frozenset({"query", "explain", "why", "why_not", "what_if"})  # answered by the child
SLICED = READS | {"define", "transact", "redefine", "subscribe"}  # may leave the engine

ANSWER = b"R"  # a child's output: the reply's JSON follows
PASSED = b"P"  # a child's output: the request finished within its budget

# The session a heavy request came from (`server.session.Session`); generic, so that
# the session module imports this one and not the reverse.
S = TypeVar("S")


@dataclass(frozen=True, eq=False)
class Heavy(Generic[S]):
    """A request stopped at the end of its slice, to be computed away from the engine."""

    session: S
    request: Request
    started: float  # time.monotonic() when the engine took it up

    @property
    def read(self) -> bool:
        """A one-shot read: the child's answer is the reply. Otherwise the child only
        shows that the request finishes within its budget."""
        return self.request.type in READS

    def remaining(self, budget: float | None) -> float | None:
        """Seconds left of `budget` (None: no budget), counted from the start."""
        if budget is None:
            return None
        return max(budget - (time.monotonic() - self.started), 0.0)


def text_bytes(request: Request) -> int:
    """Bytes of Datalog program text a request asks to parse (its rules and facts)."""
    fields = request.fields
    if request.type == "define":
        return len(fields["text"])
    if request.type in ("transact", "redefine"):
        return sum(len(text) for text in fields["redefine"].values())
    return 0


def reply_of(heavy: Heavy[Any], outcome: Outcome, limits: HistoryLimits) -> str | None:
    """On the event loop: the reply a child's outcome makes (its JSON text), or None
    when the child showed that the request finishes in time (do it on the engine)."""
    data = outcome.data
    if data[:1] == PASSED:
        return None
    if data[:1] == ANSWER:
        return data[1:].decode()
    if outcome.timed_out:
        message, category = "stopped: the computation ran past its time budget", "incorrect"
    elif outcome.too_large:
        message = (
            f"the answer is larger than one message may carry ({limits.reply_bytes:,} "
            "bytes of JSON): ask for fewer or smaller rows"
        )
        category = "incorrect"
    else:
        message = (
            "the worker process computing the request ended without an answer "
            "(out of memory, or killed)"
        )
        category = "fault"
    return encode(error_reply(ProtocolError(message, category), heavy.request.id))
