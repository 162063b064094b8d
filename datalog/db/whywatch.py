"""Explanations kept current: `Database.subscribe_why` (docs/adr/0045).

Layer: datalog (API). Imports `datalog.db.pacing`, `datalog.lang.checks` and the explanation
types; the database hands a `WhyWatch` how to explain its fact, and the live queries
(`datalog.db.queries.LiveQueries.watches`) tell it of every epoch.

A subscriber gets the fact's explanation (a `Derivation` while it holds, a `WhyNot`
while it does not) as a snapshot, then again at every epoch where it changes, with
that epoch. The explanation is a function of the program and of the stored tuples
of the relations the fact depends on (`checks.dependencies`), so an epoch that
writes none of them and gives none of them new rules cannot change it: the watch
then does nothing but intersect two small sets. A why-not is a function of less:
of the answers of the lookups it made (`datalog.db.states.Stored.lookup`), so an
epoch that only writes rows (no rules) none of those lookups would find again
finds them unchanged (`datalog.db.states.unchanged`: the rows asked of a base
relation against its lookups, a derived relation read again and its lookups made
again) and explains nothing either (`spared` counts those epochs; docs/adr/0060).
Otherwise it explains the fact again and compares the printed form with what its
subscriber holds, delivering only a difference. Subscribing takes no epoch and
writes nothing.

Failures: an explanation that fails (its `budget`, an error) is kept in the
subscription's `errors`, and the watch, marked `stale`, explains again at the next
epoch whatever it touches. A subscriber's exception is kept the same way and never
reaches the commit; a `BaseException` (an interrupt) is raised once the epoch is
over. With a granularity the watch paces deliveries by the database's one pacing
policy (`datalog.db.pacing`): the latest explanation, at most every N epochs and S
seconds, and only if it differs from the last one delivered.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from datalog.db.pacing import Clock, Pacing
from differential.inputs import Requests

if TYPE_CHECKING:
    from datalog.db.provenance import Derivation
    from datalog.db.states import Looked
    from datalog.db.whynot import WhyNot

__all__ = ["WhyChange", "WhySubscription", "WhyWatch"]

_log = logging.getLogger("deltalog")
KEPT_ERRORS = 10  # as a query's subscription: the last few errors, and a count of all


@dataclass(frozen=True)
class WhyChange:
    """What a `subscribe_why` subscriber receives: the fact's explanation at `epoch`
    (a `Derivation` if it holds, else a `WhyNot`); `snapshot` for the first."""

    fact: str
    epoch: int
    explanation: Derivation | WhyNot
    snapshot: bool = False

    @property
    def holds(self) -> bool:
        return type(self.explanation).__name__ == "Derivation"

    def __repr__(self) -> str:
        kind = "snapshot" if self.snapshot else "change"
        state = "holds" if self.holds else "does not hold"
        return f"<WhyChange {kind} epoch {self.epoch}: {self.fact} {state}>"

    def to_dict(self) -> dict[str, Any]:
        """`{fact, epoch, holds, snapshot, explanation, text}` (JSON-able)."""
        return {"fact": self.fact, "epoch": self.epoch, "holds": self.holds,
                "snapshot": self.snapshot, "explanation": self.explanation.to_dict(),
                "text": str(self.explanation)}  # fmt: skip


WhyCallback = Callable[[WhyChange], None]


@dataclass(eq=False)
class WhySubscription:
    """A subscription to a fact's explanation; `close()` ends it."""

    fact: str
    callback: WhyCallback
    active: bool = True
    errors: deque[Exception] = field(default_factory=lambda: deque(maxlen=KEPT_ERRORS))
    error_count: int = 0
    latest: WhyChange | None = None  # the last one delivered
    explained: int = 0  # explanations computed after the snapshot (the cost of keeping it)
    spared: int = 0  # epochs that wrote its relations, where its lookups found the same
    unsubscribe: Callable[[WhySubscription], None] | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        state = "active" if self.active else "closed"
        return f"<WhySubscription {self.fact!r} ({state}, {self.error_count} errors)>"

    def close(self) -> None:
        if self.active and self.unsubscribe is not None:
            self.unsubscribe(self)

    def __enter__(self) -> WhySubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def keep(self, error: Exception) -> None:
        self.errors.append(error)
        self.error_count += 1


@dataclass(eq=False)
class WhyWatch:
    """Keeps one subscription's explanation current (module docstring).

    `explain()` gives the explanation now, the relations it depends on and, for a
    why-not, the lookups it made; `calling` is the context subscribers are called in
    (commits refused from inside); `limit` bounds one explanation (`Database.budget`'s
    context, None: no bound); `unchanged(looked, requests)` says whether those lookups
    find what they found after an epoch that wrote `requests` and no rules (None:
    it cannot tell, and the fact is explained again)."""

    sub: WhySubscription
    explain: Callable[[], tuple[Derivation | WhyNot, frozenset[str], Looked | None]]
    calling: Callable[[], AbstractContextManager[object]]
    limit: Callable[[], AbstractContextManager[object]]
    pacing: Pacing | None = None
    unchanged: Callable[[Looked, Mapping[str, Requests]], bool | None] | None = None
    reads: frozenset[str] = frozenset()
    looked: Looked | None = None  # the last why-not's lookups (None: a proof, or unknown)
    shown: str = ""  # the printed form of what the subscriber holds (or will, paced)
    pending: WhyChange | None = None  # paced: the newest explanation not yet delivered
    stale: bool = False

    def start(self, epoch: int) -> WhyChange:
        """The snapshot (its explanation raises out: nothing is subscribed then)."""
        explanation, self.reads, self.looked = self.explain()
        self.shown = str(explanation)
        return WhyChange(self.sub.fact, epoch, explanation, snapshot=True)

    def stop(self) -> None:
        """The subscription closed: the dataflows its why-not kept go."""
        self._keep(None)

    def before(self, requests: Mapping[str, Requests]) -> list[Any]:
        """Before an epoch that asks `requests`: the dataflows that may rest through it
        (`datalog.db.follows.Follows.before`)."""
        follows = None if self.looked is None else self.looked.follows
        return [] if follows is None else follows.before(requests, self.reads)

    def _keep(self, looked: Looked | None) -> None:
        """Keep `looked` (a new why-not's lookups), dropping the last one's dataflows."""
        old, self.looked = self.looked, looked
        if old is not None and old.follows is not None and old is not looked:
            old.follows.close()

    def at_epoch(
        self, epoch: int, touched: frozenset[str], requests: Mapping[str, Requests] | None = None
    ) -> None:
        """After the live queries of `epoch` (`touched`: the relations it wrote or gave
        new rules; `requests`: the rows it asked to write, by relation, None if not
        known): explain again if it may have changed, and deliver (or hold, paced) a
        change."""
        if not self.sub.active:
            return
        stale = self.stale
        maybe = stale or touched & self.reads or any(_measured(r) for r in self.reads)
        if maybe:  # stale until found unchanged or explained: an interrupt in between
            self.stale = True  # leaves it to be explained at the next epoch
            if not stale and self._spared(touched, requests):
                self.stale = False
            else:
                self._refresh(epoch)
        elif self.looked is not None and self.looked.follows is not None:
            self.looked.follows.drain()  # checked: what changed is known
        if self.pacing is not None:
            self._release(self.pacing.due(epoch), epoch)

    def _spared(self, touched: frozenset[str], requests: Mapping[str, Requests] | None) -> bool:
        """Whether an epoch that touched its relations left every lookup of the last
        why-not as it was (module docstring): only rows written, and none found."""
        looked, check = self.looked, self.unchanged
        if looked is None or check is None or requests is None:
            return False
        if not (touched & self.reads) <= requests.keys() or any(map(_measured, self.reads)):
            return False  # new rules, or a relation that changes unwritten
        try:
            with self.limit():
                same = bool(check(looked, requests))  # (None: it cannot tell)
        except Exception:  # explained again, which keeps what fails
            return False
        self.sub.spared += same
        return same

    def woken(self, epoch: int) -> None:
        """A paced subscription's wake-up came (under the database's lock)."""
        if self.sub.active and self.pacing is not None:
            self._release(self.pacing.woken(epoch), epoch)

    def _refresh(self, epoch: int) -> None:
        try:
            with self.limit():
                explanation, reads, looked = self.explain()
        except Exception as error:  # kept; explained again at the next epoch
            self._keep(None)  # (its dataflows would collect changes nobody checks)
            self.sub.keep(error)
            _log.warning("explaining %s again at epoch %d failed: %s", self.sub.fact, epoch, error)
            return
        self.stale, self.reads = False, reads
        self._keep(looked)
        self.sub.explained += 1
        shown = str(explanation)
        if shown == self.shown:
            return
        change = WhyChange(self.sub.fact, epoch, explanation)
        if self.pacing is None:
            self.shown = shown
            self._tell(change)
            return
        self.pacing.hold([self.shown, shown], [-1, 1])
        self.shown, self.pending = shown, change

    def _release(self, released: tuple[list[Any], list[int]] | None, epoch: int) -> None:
        """Deliver the newest explanation if the pacing released a new one."""
        if released is None or self.pending is None or 1 not in released[1]:
            return
        change = WhyChange(self.sub.fact, epoch, self.pending.explanation)
        self.pending = None
        self._tell(change)

    def _tell(self, change: WhyChange) -> None:
        self.sub.latest = change
        with self.calling():
            try:
                self.sub.callback(change)
            except Exception as error:  # a subscriber's bug never undoes or hides an epoch
                self.sub.keep(error)
                _log.exception("why-subscriber of %s failed at epoch %d", self.sub.fact,
                               change.epoch)  # fmt: skip


def _measured(relation: str) -> bool:
    """The `deltalog.*` relations change at every epoch without being written."""
    return relation.startswith("deltalog.")


def wake_later(clock: Clock, lock: AbstractContextManager[object], epoch: Callable[[], int],
               watch: WhyWatch) -> Callable[[float], None]:  # fmt: skip
    """What a paced watch asks to be woken by: `clock` runs `watch.woken` under `lock`."""

    def woken() -> None:
        with lock:
            watch.woken(epoch())

    return lambda delay: clock.call_later(delay, woken)
