"""Live queries and their subscribers: what a subscriber receives, and when.

Layer: datalog (API). Imports the planner's types and `differential`.

A `LiveQuery` is a started dataflow, the answer its subscribers hold (`state`)
and the subscribers themselves. `deliver` hands them an epoch's changes; a
change held back by a definition (`held`) joins the next delivery of the same
epoch, so each subscriber gets one `Change` per epoch, in increasing epochs.
"""

from __future__ import annotations

import html
import logging
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from datalog.ast import ColumnType
from datalog.change import Callback, Change
from datalog.errors import UnsupportedError
from datalog.plan.build import QueryPlan
from datalog.plan.wcoj import JoinPlan
from datalog.rows import to_rows
from datalog.symbols import SymbolTable
from differential.batch import Updates, concat, consolidate
from differential.time import column
from differential.trace.spine import Spine

_log = logging.getLogger("deltalog")
KEPT_ERRORS = 10  # a subscription keeps its last few errors (and counts them all)
MAX_HTML_ROWS = 50  # rows a notebook shows of an answer


@dataclass(eq=False)
class Subscription:
    query: str
    columns: tuple[str, ...]
    callback: Callback
    live: LiveQuery | None = None
    active: bool = True
    errors: deque[Exception] = field(default_factory=lambda: deque(maxlen=KEPT_ERRORS))
    error_count: int = 0  # every error the callback raised, kept or not
    unsubscribe: Callable[[Subscription], None] | None = field(default=None, repr=False)
    symbols: SymbolTable | None = field(default=None, repr=False)
    pacing: Pacing | None = None  # None: every epoch's change at once

    def __repr__(self) -> str:
        state = "active" if self.active else "closed"
        return f"<Subscription {self.query!r} ({state}, {self.error_count} errors)>"

    def _repr_html_(self) -> str:
        """The current answer as an HTML table (Jupyter shows it live on re-display)."""
        rows = self.rows()
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
            for row in rows[:MAX_HTML_ROWS]
        )
        more = (
            f"<p>… {len(rows) - MAX_HTML_ROWS:,} more rows</p>" if len(rows) > MAX_HTML_ROWS else ""
        )
        caption = f"<caption>{html.escape(self.query)}: {len(rows):,} rows</caption>"
        return f"<table>{caption}<tr>{head}</tr>{body}</table>{more}"

    def rows(self) -> list[tuple[object, ...]]:
        """The answer this subscription holds now, sorted."""
        if self.live is None or not self.active or self.symbols is None:
            return []
        state = self.live.state.accumulate(None)
        return sorted(to_rows(state.columns, self.live.types, self.symbols, len(state)))

    def close(self) -> None:
        """Unsubscribe (the dataflow goes with its last subscriber)."""
        if self.active and self.unsubscribe is not None:
            self.unsubscribe(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(eq=False)
class LiveQuery:
    """A started dataflow kept up to date, its accumulated answer and its subscribers."""

    key: str
    plan: QueryPlan
    types: tuple[ColumnType, ...]
    state: Spine
    subscribers: list[Subscription] = field(default_factory=list)
    join_plan: JoinPlan = "auto"
    held: Updates | None = None  # a definition's change, delivered with its epoch
    tenant: Any = field(
        default=None, repr=False
    )  # the shared dataflow of a parameter member (`datalog.tenants`)
    param: tuple[Any, ...] = ()  # and its parameter tuple
    arriving: int = 0  # subscribers being added, counted by `deltalog.dataflow` already

    @property
    def query_text(self) -> str:
        return self.key.split(" [plan=")[0]


def deliver(live: LiveQuery, updates: Updates, epoch: int, symbols: SymbolTable) -> None:
    """Apply an epoch's changes to the answer and hand them to every subscriber."""
    if live.held is not None:
        updates = consolidate(concat([_at(live.held, epoch), _at(updates, epoch)]))
        live.held = None
    if len(updates) == 0:
        return
    since = live.state.default_since
    live.state.insert(updates.with_times(updates.times * 0), since, since)
    rows = to_rows(updates.columns, live.types, symbols, len(updates))
    change = Change(rows, updates.diffs.tolist(), epoch)
    failure: BaseException | None = None  # a callback's KeyboardInterrupt, say: raised
    for sub in list(live.subscribers):  # once every subscriber has had the epoch
        try:
            if sub.active and sub.pacing is None:
                notify(sub, change)
            elif sub.active and sub.pacing is not None:
                sub.pacing.hold(change)
        except BaseException as error:
            failure = failure or error
    if failure is not None:
        raise failure


@dataclass
class Pacing:
    """A subscriber's granularity: changes are held and delivered consolidated at most
    every `epochs` epochs (at the first commit that reaches it) or every `seconds`
    seconds, as the server does; rows whose changes cancel out are not delivered.

    A held change waits at most `seconds` after the last delivery: `wake` (set by
    the database) calls `woken` back after the time left, commit or no commit. With
    both bounds, the later of the two decides and a commit delivers."""

    epochs: int = 1
    seconds: float = 0.0
    delivered: int = 0  # the epoch of the last delivery
    at: float = field(default_factory=time.monotonic)  # when it happened
    held: Counter[tuple[Any, ...]] = field(default_factory=Counter)
    wake: Callable[[float], None] | None = field(default=None, repr=False)
    waiting: bool = False  # a wake is pending

    def hold(self, change: Change) -> None:
        for row, diff in zip(change.rows, change.diffs, strict=True):
            self.held[row] += diff
        self._ask_wake()

    def due(self, epoch: int) -> Change | None:
        """The held changes, consolidated, if it is time to deliver them at `epoch`."""
        if epoch < self.delivered + self.epochs or self._time_left() > 0:
            return None
        rows = sorted(row for row, n in self.held.items() if n)
        change = Change(rows, [self.held[row] for row in rows], epoch)
        self.held.clear()
        if not rows:
            return None
        self.delivered, self.at = epoch, time.monotonic()
        return change

    def woken(self, epoch: int) -> Change | None:
        """The wake came: what is due at `epoch` (a wake that came early asks again)."""
        self.waiting = False
        if self._time_left() > 0:
            self._ask_wake()
            return None
        return self.due(epoch)

    def _time_left(self) -> float:
        return self.at + self.seconds - time.monotonic()

    def _ask_wake(self) -> None:
        if self.seconds > 0 and self.held and not self.waiting and self.wake is not None:
            self.waiting = True
            self.wake(max(0.0, self._time_left()))


def tick(subscriptions: Sequence[Subscription], epoch: int, woken: bool = False) -> None:
    """After a commit (or a paced subscription's wake): deliver what is due."""
    failure: BaseException | None = None  # raised once every subscriber had its due
    for sub in subscriptions:
        pacing = sub.pacing
        if sub.active and pacing is not None:
            change = pacing.woken(epoch) if woken else pacing.due(epoch)
            try:
                if change is not None:
                    notify(sub, change)
            except BaseException as error:
                failure = failure or error
    if failure is not None:
        raise failure


def call_later(delay: float, callback: Callable[[], None]) -> None:
    """Run `callback` on a daemon timer thread after `delay` seconds."""
    timer = threading.Timer(delay, callback)
    timer.daemon = True
    timer.start()


def _at(updates: Updates, epoch: int) -> Updates:
    return updates.with_times(column((epoch,), len(updates)))


def notify(sub: Subscription, change: Change) -> None:
    """Call a subscriber; its exception is logged and kept, never raised into a commit.

    The commit has already happened: other subscribers must still hear of it.
    """
    try:
        sub.callback(change if change.columns else replace(change, columns=sub.columns))
    except Exception as exc:  # a subscriber's bug must not undo or hide an epoch
        sub.errors.append(exc)
        sub.error_count += 1
        _log.exception("subscriber of %s failed at epoch %d", sub.query, change.epoch)


def pacing_of(granularity: dict[str, float] | None, epoch: int) -> Pacing | None:
    """The pacing `subscribe(..., granularity=...)` asks for (None: every epoch)."""
    if not granularity:
        return None
    unknown = set(granularity) - {"epochs", "seconds"}
    epochs, seconds = granularity.get("epochs", 1), granularity.get("seconds", 0.0)
    whole = isinstance(epochs, int) and not isinstance(epochs, bool)
    real = isinstance(seconds, int | float) and not isinstance(seconds, bool)
    if unknown or not whole or epochs < 1 or not real or not 0 <= seconds < math.inf:
        raise UnsupportedError(
            f"granularity takes {{'epochs': N}} (N >= 1) and/or {{'seconds': S}}, not {granularity}"
        )
    return Pacing(int(epochs), float(seconds), delivered=epoch)
