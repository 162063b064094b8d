"""Pacing: when a subscriber with a granularity receives what it is owed.

Layer: datalog (API). Imports `datalog.lang.errors` only, so that the server's feeds
(`server.feeds.Watch`) pace their clients by the very same policy as embedded
subscriptions (`Database.subscribe(..., granularity=...)`): a granularity means one
thing wherever it is given.

A `Pacing` holds changes (rows with diffs, consolidated as they arrive) and releases
them at most every `epochs` epochs and at most every `seconds` seconds since the last
release: with both, the later of the two bounds decides. It is asked at every commit
(`due`) and, when a time bound is set, at a wake-up (`woken`) it requests through
`wake(delay)` for the moment the time bound passes, so a held change never waits for
a commit that may not come. Rows whose changes cancel out are not released. The
clock is injectable, so tests drive time instead of sleeping.
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from datalog.lang.errors import UnsupportedError

Release = tuple[list[Any], list[int]]  # rows, diffs


class Clock(Protocol):
    """Time as a database sees it: what pacing reads, and how it asks to be woken."""

    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> None: ...


class SystemClock:
    """The monotonic clock; wake-ups run on daemon timer threads."""

    def now(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        timer = threading.Timer(delay, callback)
        timer.daemon = True
        timer.start()


class ManualClock:
    """A clock that moves only when told (`advance`), running the wake-ups that
    fall due, in order, on the caller's thread: tests drive time, never sleep."""

    def __init__(self, start: float = 0.0) -> None:
        self.time = start
        self.waiting: list[tuple[float, int, Callable[[], None]]] = []
        self._order = 0

    def now(self) -> float:
        return self.time

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self._order += 1
        heapq.heappush(self.waiting, (self.time + max(delay, 0.0), self._order, callback))

    def advance(self, seconds: float) -> None:
        until = self.time + seconds
        while self.waiting and self.waiting[0][0] <= until:
            at, _, callback = heapq.heappop(self.waiting)
            self.time = max(self.time, at)
            callback()
        self.time = until


@dataclass
class Pacing:
    """A subscriber's granularity and the changes it holds back (module docstring)."""

    epochs: int = 1
    seconds: float = 0.0
    delivered: int = 0  # the epoch of the last release (or of the subscription)
    now: Callable[[], float] = field(default=time.monotonic, repr=False)
    wake: Callable[[float], None] | None = field(default=None, repr=False)
    held: Counter[Hashable] = field(default_factory=Counter, repr=False)
    at: float = field(default=-math.inf, repr=False)  # when the last release happened
    waiting: bool = False  # a wake-up is pending

    def __post_init__(self) -> None:
        if self.at == -math.inf:
            self.at = self.now()

    @classmethod
    def of(
        cls,
        granularity: Mapping[str, object] | None,
        epoch: int,
        now: Callable[[], float] = time.monotonic,
    ) -> Pacing | None:
        """The pacing a granularity asks for, from `epoch` on (None: every epoch at once)."""
        if not granularity:
            return None
        epochs, seconds = checked_granularity(granularity)
        if epochs <= 1 and seconds <= 0:
            return None
        return cls(epochs, seconds, delivered=epoch, now=now)

    def hold(self, rows: Iterable[Hashable], diffs: Iterable[int]) -> None:
        for row, diff in zip(rows, diffs, strict=True):
            self.held[row] += diff
        self._ask_wake()

    def due(self, epoch: int) -> Release | None:
        """What to release at a commit of `epoch`, if both bounds have passed."""
        if epoch < self.delivered + self.epochs or self.time_left() > 0:
            return None
        return self._release(epoch)

    def woken(self, epoch: int) -> Release | None:
        """The wake-up came (`epoch` is current): what is due now. One that came early
        (a clock that lags the timer) asks again for the time still left."""
        self.waiting = False
        if self.time_left() > 0:
            self._ask_wake()
            return None
        return self.due(epoch)

    def time_left(self) -> float:
        return self.at + self.seconds - self.now()

    def _release(self, epoch: int) -> Release | None:
        pairs = [(row, n) for row, n in self.held.items() if n]
        self.held.clear()
        if not pairs:
            return None
        pairs.sort(key=lambda pair: sort_key(pair[0]))
        self.delivered, self.at = epoch, self.now()
        return [row for row, _ in pairs], [n for _, n in pairs]

    def _ask_wake(self) -> None:
        if self.seconds > 0 and self.held and not self.waiting and self.wake is not None:
            self.waiting = True
            self.wake(max(0.0, self.time_left()))


def checked_granularity(granularity: Mapping[str, object]) -> tuple[int, float]:
    """`(epochs, seconds)` of a granularity, or an `UnsupportedError` naming what is wrong."""
    unknown = set(granularity) - {"epochs", "seconds"}
    epochs, seconds = granularity.get("epochs", 1), granularity.get("seconds", 0.0)
    whole = isinstance(epochs, int) and not isinstance(epochs, bool)
    real = isinstance(seconds, int | float) and not isinstance(seconds, bool)
    if unknown or not whole or not real:
        raise UnsupportedError(
            f"granularity takes {{'epochs': N}} (N >= 1) and/or {{'seconds': S}}, "
            f"not {dict(granularity)}"
        )
    assert isinstance(epochs, int) and isinstance(seconds, int | float)
    if epochs < 1 or not 0 <= seconds < math.inf:
        raise UnsupportedError(
            f"granularity takes {{'epochs': N}} (N >= 1) and/or {{'seconds': S}} "
            f"(0 <= S, finite), not {dict(granularity)}"
        )
    return epochs, float(seconds)


def sort_key(row: Any) -> tuple[tuple[int, Any], ...]:
    """Order rows of mixed numbers and strings without comparing a str with an int."""
    return tuple((1, v) if isinstance(v, str) else (0, v) for v in row)
