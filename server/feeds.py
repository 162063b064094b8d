"""Feeds: one shared live query per distinct query, its answer and recent history.

Layer: server — may import only the public API of datalog.

A `Feed` holds one `Database` subscription however many clients watch the query
(the database shares the dataflow too). It keeps the current answer as a multiset
and a bounded history of the changes of recent epochs, so a client that reconnects
with the epoch it last saw can be sent exactly what changed since. Each client's
`Watch` on a feed applies its granularity: it forwards changes at once, or
consolidates them and delivers at most every N epochs or S seconds.

Everything here runs on the engine thread (see server/transport.py): feeds are
fed from inside `Database.commit` and only build messages for the host to send.
"""

from __future__ import annotations

import sys
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

from datalog import Pacing
from server.protocol import Granularity, encode

if TYPE_CHECKING:
    from datalog import Change, Subscription

Row = tuple[Any, ...]


class Outbox(Protocol):
    """Where a watch sends its messages, and how it asks for a later flush."""

    def send_text(self, text: str) -> None: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> None: ...

    def epoch(self) -> int: ...

    def now(self) -> float: ...


Fanout = Callable[[list[Outbox], str], None]  # send one message to several outboxes


def send_each(outboxes: list[Outbox], text: str) -> None:
    """A `Fanout` that hands the message to each outbox in turn."""
    for outbox in outboxes:
        outbox.send_text(text)


CHUNK_ROWS = 50_000  # rows of one change message; a larger change is sent in parts


@dataclass(frozen=True)
class HistoryLimits:
    """The hub's limits: how much recent history a feed keeps for resuming clients,
    how many unwatched feeds linger, and what one request may take
    (docs/protocol.md, docs/adr/0038)."""

    epochs: int = 1000  # changed epochs kept
    rows: int = 1_000_000  # changed rows kept, over all those epochs
    linger: float = 60.0  # seconds a feed outlives its last watcher
    lingering: int = 100  # unwatched feeds kept at most (the oldest go first)
    lingering_bytes: int = 64 * 1024 * 1024  # and at most this much memory (`feed_bytes`)
    seconds: float | None = 30.0  # a request's time budget (None: unbounded)
    slice: float | None = 0.1  # seconds it may hold the engine before it leaves (None: all)
    probe_text: int = 256 * 1024  # program text (bytes) tried away from the engine first
    worker_memory: int | None = 2048 * 1024 * 1024  # bytes a child may add (None: any)
    answer_rows: int = 1_000_000  # rows of one query answer or snapshot at most
    reply_bytes: int = 16 * 1024 * 1024  # one reply's JSON at most (the client's frame size)


@dataclass
class Entry:
    epoch: int
    rows: list[Row]
    diffs: list[int]


@dataclass(eq=False)
class Feed:
    """A live query's answer at the latest epoch and the changes of recent epochs.

    Invariant: `history` holds every change of the answer in epochs
    (`horizon`, current epoch], in epoch order; older changes are forgotten.
    """

    key: str
    limits: HistoryLimits
    columns: tuple[str, ...] = ()
    answer: Counter[Row] = field(default_factory=Counter)
    history: deque[Entry] = field(default_factory=deque)
    history_rows: int = 0
    horizon: int = 0
    watches: list[Watch] = field(default_factory=list)
    subscription: Subscription | None = None
    idle: int = 0  # bumped whenever the feed gains or loses its last watcher
    held: int = 0  # its memory when it last went unwatched (`feed_bytes`)
    aliases: set[tuple[str, str]] = field(default_factory=set)  # (text, plan) naming it
    fanout: Fanout = send_each
    _plan: Plan | None = field(default=None, repr=False)  # of `watches`; None: stale

    def add(self, watch: Watch) -> None:
        self.watches.append(watch)
        self._plan = None

    def remove(self, watch: Watch) -> None:
        if watch in self.watches:
            self.watches.remove(watch)
            self._plan = None

    @property
    def plan(self) -> Plan:
        """How the watches take a change, worked out once per change of `watches`."""
        if self._plan is None:
            self._plan = Plan.of(self.watches)
        return self._plan

    def on_change(self, change: Change) -> None:
        """The database's callback: the snapshot first, then one call per changed epoch."""
        rows = [tuple(r) for r in change.rows]
        _accumulate(self.answer, rows, change.diffs)
        if change.snapshot:
            self.horizon = change.epoch
            return
        self.history.append(Entry(change.epoch, rows, list(change.diffs)))
        self.history_rows += len(rows)
        self._compact()
        text = ChangeText(change.epoch, rows, change.diffs)
        plan = self.plan
        for watch in plan.buffering:
            watch.offer(text)
        for number, outboxes in plan.forward:
            for message in text.messages(number):
                self.fanout(outboxes, message)

    def _compact(self) -> None:
        limits = self.limits
        while self.history and (
            len(self.history) > limits.epochs or self.history_rows > limits.rows
        ):
            dropped = self.history.popleft()
            self.history_rows -= len(dropped.rows)
            self.horizon = dropped.epoch

    def release(self) -> None:
        """Drop the answer and the history (the feed is stopped)."""
        self.answer = Counter()
        self.history = deque()
        self.history_rows = 0

    def snapshot(self) -> list[Row]:
        return sorted(_rows_of(self.answer), key=_sort_key)

    def since(self, epoch: int) -> tuple[list[Row], list[int]] | None:
        """The consolidated changes after `epoch`, or None if history no longer reaches it."""
        if epoch < self.horizon:
            return None
        total: Counter[Row] = Counter()
        for entry in self.history:
            if entry.epoch > epoch:
                _accumulate(total, entry.rows, entry.diffs)
        return _consolidated(total)


@dataclass(frozen=True)
class Plan:
    """A feed's watches as a change reaches them: those that forward changes at once
    grouped by subscription number (one message, and one fanout, serves every client
    that numbered its watch alike), and those that buffer (paced: also ticked after
    each commit)."""

    forward: list[tuple[int, list[Outbox]]]
    buffering: list[Watch]
    ticking: list[Watch]

    @classmethod
    def of(cls, watches: list[Watch]) -> Plan:
        forward: dict[int, list[Outbox]] = {}
        buffering = []
        for watch in watches:
            if watch.granularity.immediate:
                forward.setdefault(watch.number, []).append(watch.outbox)
            else:
                buffering.append(watch)
        return cls(list(forward.items()), buffering, buffering)


@dataclass(eq=False)
class Watch:
    """One client's subscription to a feed, paced by its granularity with the
    database's one pacing policy (`datalog.Pacing`: at most every N epochs and at
    most every S seconds; both: the later bound decides)."""

    number: int
    feed: Feed
    outbox: Outbox
    granularity: Granularity
    delivered: int  # the epoch the client's view is at
    pacing: Pacing | None = None  # None: every change at once
    active: bool = True

    def __post_init__(self) -> None:
        if not self.granularity.immediate:
            epochs, seconds = max(self.granularity.epochs, 1), self.granularity.seconds
            self.pacing = Pacing(
                epochs, seconds, delivered=self.delivered, now=self.outbox.now, wake=self._wake
            )

    def offer(self, change: ChangeText) -> None:
        if self.pacing is None:
            self._send(change)
        else:
            self.pacing.hold(change.rows, change.diffs)

    def tick(self, epoch: int) -> None:
        """After a commit: deliver what the pacing says is due at `epoch`."""
        if self.pacing is not None:
            self._release(self.pacing.due(epoch), epoch)

    def _wake(self, delay: float) -> None:
        self.outbox.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        if self.active and self.pacing is not None:
            epoch = self.outbox.epoch()
            self._release(self.pacing.woken(epoch), epoch)

    def _release(self, due: tuple[list[Row], list[int]] | None, epoch: int) -> None:
        if due is not None:
            self._send(ChangeText(epoch, due[0], due[1]))

    def _send(self, change: ChangeText) -> None:
        self.delivered = change.epoch
        for text in change.messages(self.number):
            self.outbox.send_text(text)


@dataclass(frozen=True, eq=False)
class ChangeText:
    """A change to deliver, and its `change` messages as JSON, encoded once for all
    the watches that forward it: only the subscription number differs between them."""

    epoch: int
    rows: list[Row]
    diffs: list[int]

    def messages(self, subscription: int) -> Iterator[str]:
        head = f'{{"type":"change","subscription":{subscription},'
        return (head + tail for tail in self._tails)

    @cached_property
    def _tails(self) -> list[str]:
        """Each message after its subscription number: one of `CHUNK_ROWS` rows at most
        (all but the last with `"more": true`), so no frame outgrows what a client takes."""
        rows, diffs, tails = self.rows, self.diffs, []
        for start in range(0, len(rows), CHUNK_ROWS):
            end = start + CHUNK_ROWS
            more = {"more": True} if end < len(rows) else {}
            part = {"epoch": self.epoch, "rows": rows[start:end], "diffs": diffs[start:end]}
            tails.append(encode({**part, **more})[1:])  # without its opening brace
        return tails


def feed_bytes(feed: Feed) -> int:
    """About how much memory a feed's answer and history hold: their rows times the
    size of a sample of them (the tuple, its values, and the dict or list entry)."""
    rows = len(feed.answer) + feed.history_rows
    sample = list(islice(feed.answer, 16))
    for entry in islice(feed.history, 4):
        sample.extend(entry.rows[:4])
    if not sample:
        return _FEED_BYTES
    per_row = sum(map(_row_bytes, sample)) / len(sample)
    return _FEED_BYTES + int(rows * per_row)


_FEED_BYTES = 2048  # a feed with no rows: its objects and its dataflow's bookkeeping
_ENTRY_BYTES = 48  # a Counter entry (or a history row's list slots and diff)


def _row_bytes(row: Row) -> int:
    return _ENTRY_BYTES + sys.getsizeof(row) + sum(map(sys.getsizeof, row))


def _accumulate(total: Counter[Row], rows: list[Row], diffs: list[int]) -> None:
    for row, diff in zip(rows, diffs, strict=True):
        total[row] += diff


def _consolidated(total: Counter[Row]) -> tuple[list[Row], list[int]]:
    pairs = sorted(((r, d) for r, d in total.items() if d != 0), key=lambda p: _sort_key(p[0]))
    return [r for r, _ in pairs], [d for _, d in pairs]


def _rows_of(answer: Counter[Row]) -> list[Row]:
    return [row for row, count in answer.items() for _ in range(max(count, 0))]


def _sort_key(row: Row) -> tuple[tuple[int, Any], ...]:
    """Order rows of mixed numbers and strings without comparing a str with an int."""
    return tuple((1, v) if isinstance(v, str) else (0, v) for v in row)
