"""Subscribers as the model test sees them: what each received, what it should have.

A `Received` callback records every `Change`; some also read the database from
inside the callback (`probe`: a one-shot query, whose answer must be the epoch's
being delivered) or unsubscribe themselves after their n-th change (`closes_after`),
as callbacks may; then it asks the fault injector whether to raise (a subscriber's
KeyboardInterrupt or MemoryError). A `Watch` pairs it with the model's expectation:
one change per epoch whose answer changed (or, for a paced subscription, per due
epoch), in increasing epochs, never empty, each exactly the difference between the
answer the subscriber holds and the new one. A `WhyWatched` is a `subscribe_why`
watch on one ground fact: its latest explanation says whether the fact holds now.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from datalog import Change, Subscription
from datalog.db.whywatch import WhySubscription

Row = tuple[Any, ...]
Delivery = tuple[int, frozenset[tuple[Row, int]], bool]  # (epoch, row diffs, snapshot?)


class Received:
    """A subscriber callback that keeps everything it is given (see the docstring)."""

    def __init__(
        self,
        fault: Callable[[], None],
        probe: Callable[[], list[Row]] | None = None,
        closes_after: int | None = None,
    ) -> None:
        self.changes: list[Change] = []
        self.fault = fault
        self.probe = probe
        self.probed: dict[int, list[Row]] = {}  # epoch -> the probe's answer then
        self.closes_after = closes_after
        self.handle: Subscription | None = None

    def __call__(self, change: Change) -> None:
        self.changes.append(change)
        if self.closes_after == len(self.changes) and self.handle is not None:
            self.handle.close()
        if self.probe is not None and not change.snapshot:
            self.probed[change.epoch] = self.probe()
        self.fault()  # it got the change, then fails (an injected fault point)

    def deliveries(self) -> list[Delivery]:
        return [(c.epoch, _diffs(c.rows, c.diffs), c.snapshot) for c in self.changes]

    def holds(self) -> Counter[Row]:
        counts: Counter[Row] = Counter()
        for change in self.changes:
            for row, diff in zip(change.rows, change.diffs, strict=True):
                counts[row] += diff
        return counts


def _diffs(rows: list[Row], diffs: list[int]) -> frozenset[tuple[Row, int]]:
    counts: Counter[Row] = Counter()
    for row, diff in zip(rows, diffs, strict=True):
        counts[row] += diff
    assert len(counts) == len(rows), f"a change lists a row twice: {rows}"
    return frozenset(counts.items())


@dataclass(eq=False)
class Watch:
    """One live subscription and what the model expects it to have received."""

    query: str
    plan: str
    pace: int | None  # granularity={"epochs": pace}
    received: Received = field(repr=False)
    handle: Subscription | None = field(default=None, repr=False)
    held: frozenset[Row] = frozenset()  # the answer as of its last delivery
    delivered: int = 0  # the epoch of its last delivery (pacing counts from it)
    expected: list[Delivery] = field(default_factory=list, repr=False)
    probe: str | None = None  # the query its callback reads (`Received.probe`)
    probes: dict[int, list[Row]] = field(default_factory=dict, repr=False)  # expected

    @property
    def closed(self) -> bool:
        """It unsubscribed itself (`Received.closes_after`)."""
        after = self.received.closes_after
        return after is not None and len(self.expected) >= after

    @property
    def key(self) -> tuple[str, str]:
        return (self.query, self.plan)

    def started(self, epoch: int, answer: frozenset[Row]) -> None:
        self.held, self.delivered = answer, epoch
        self.expected.append((epoch, frozenset((row, 1) for row in answer), True))

    def epoch(self, epoch: int, answer: frozenset[Row], probe: list[Row] | None = None) -> None:
        """The model committed `epoch`, after which the query's answer is `answer` (and
        the probe's, read from the callback if it is called, `probe`)."""
        if self.closed or (self.pace is not None and epoch < self.delivered + self.pace):
            return
        if answer == self.held:
            return
        change = {(row, 1) for row in answer - self.held} | {
            (row, -1) for row in self.held - answer
        }
        self.expected.append((epoch, frozenset(change), False))
        self.held, self.delivered = answer, epoch
        if probe is not None:
            self.probes[epoch] = probe

    def check(self) -> None:
        got = self.received.deliveries()
        assert got == self.expected, (
            f"subscription `{self.query}` (plan {self.plan}, pace {self.pace}) received\n"
            f"  {_show(got)}\nexpected\n  {_show(self.expected)}"
        )
        assert all(n in (0, 1) for n in self.received.holds().values())
        for epoch, rows in self.received.probed.items():  # (a probe interrupted: none)
            assert rows == self.probes.get(epoch), (
                f"`{self.probe}` read from the callback of `{self.query}` at epoch {epoch}: "
                f"{rows}, the reference: {self.probes.get(epoch)}"
            )


def _show(deliveries: list[Delivery]) -> str:
    return "\n  ".join(
        f"epoch {e}{' snapshot' if s else ''}: {sorted(d, key=repr)}" for e, d, s in deliveries
    )


@dataclass(eq=False)
class WhyWatched:
    """A `subscribe_why` watch and what the model expects of it: after every step its
    latest explanation is a derivation exactly when the fact holds, unless its last
    explanation failed (an injected fault; kept in `errors`, or raised by the write
    after its epoch) and none ran since."""

    relation: str
    row: Row
    handle: WhySubscription = field(repr=False)
    errors: int = 0  # the watch's error count when last checked
    failed_at: int | None = None  # its `explained` count when an explanation failed

    def interrupted(self) -> None:
        """A write raised after its epoch committed (an interrupt, say), which may have
        cut short explaining the fact again: not known until it explains again."""
        self.failed_at = self.handle.explained

    def check(self, holds: bool | None) -> None:
        """`holds`: whether the fact holds now (None: its relation is not defined)."""
        sub = self.handle
        if sub.error_count > self.errors:
            self.errors, self.failed_at = sub.error_count, sub.explained
            return
        if self.failed_at is not None and sub.explained == self.failed_at:
            return  # (tried again at the next epoch that can change it)
        self.failed_at = None
        if holds is not None:
            assert sub.latest is not None, f"{sub.fact}: no explanation delivered"
            assert sub.latest.holds == holds, (
                f"the watch on {sub.fact} says it {'holds' if sub.latest.holds else 'is absent'}"
                f" (epoch {sub.latest.epoch}); the reference: {'holds' if holds else 'absent'}"
            )
