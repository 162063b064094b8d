"""What the hub keeps of queries nobody watches: bounded in bytes, freed when they go.

Hub-level (no network): `FakeHost` holds the timers, so a test decides when the
linger time is over.
"""

from __future__ import annotations

import gc
import json
import weakref
from typing import Any

import pytest

from datalog import Database
from server.feeds import Feed, HistoryLimits, feed_bytes
from server.session import Hub, Session
from tests.server.helpers import FakeHost

pytestmark = pytest.mark.server

PROGRAM = ".decl e(k: number, v: number)\n.decl s(x: number)"


def _hub(limits: HistoryLimits, rows: int = 2000) -> tuple[Hub, FakeHost, Session]:
    host = FakeHost()
    hub = Hub(Database(), host, limits=limits)
    session = hub.open()
    _send(hub, session, type="define", id=0, text=PROGRAM)
    inserts = {"e": [[k, v] for k in range(20) for v in range(rows)], "s": [[1]]}
    _send(hub, session, type="transact", id=0, inserts=inserts)
    host.take()
    return hub, host, session


def _send(hub: Hub, session: Session, **message: Any) -> None:
    hub.handle(session, json.dumps(message))


def _watch_and_leave(hub: Hub, host: FakeHost, session: Session, text: str) -> Feed:
    _send(hub, session, type="subscribe", id=1, text=text)
    (snapshot,) = host.take()
    assert snapshot["type"] == "snapshot", snapshot
    feed = hub.feeds[hub.aliases[(text, "auto")]]
    _send(hub, session, type="unsubscribe", id=2, subscription=snapshot["subscription"])
    host.take()
    return feed


def test_lingering_feeds_are_capped_in_bytes_the_oldest_going_first() -> None:
    big = feed_bytes(_watch_and_leave(*_hub(HistoryLimits()), "e(1, v)"))
    limits = HistoryLimits(lingering_bytes=int(big * 2.5))
    hub, host, session = _hub(limits)
    for k in range(5):
        _watch_and_leave(hub, host, session, f"e({k}, v)")
    assert list(hub.idle) == ["e(3, v)", "e(4, v)"]  # two fit; the older ones stopped
    assert hub.idle_bytes == sum(f.held for f in hub.idle.values()) <= limits.lingering_bytes
    assert set(hub.db.live) == {"e(3, v)", "e(4, v)"}  # the others left the database too
    _watch_and_leave(hub, host, session, "s(x)")  # a small one lingers beside them
    assert list(hub.idle) == ["e(3, v)", "e(4, v)", "s(x)"]


def test_a_feed_larger_than_the_linger_cap_stops_at_once() -> None:
    hub, host, session = _hub(HistoryLimits(lingering_bytes=10_000))
    _watch_and_leave(hub, host, session, "e(k, v)")
    assert hub.feeds == {} and hub.idle == {} and hub.idle_bytes == 0
    assert hub.db.live == {}


def test_a_stopped_feed_is_freed_before_its_linger_timer_fires() -> None:
    hub, host, session = _hub(HistoryLimits(lingering=1))
    first = weakref.ref(_watch_and_leave(hub, host, session, "e(1, v)"))
    _watch_and_leave(hub, host, session, "e(2, v)")  # the cap stops the first one
    assert host.timers  # both linger timers are still pending
    gc.collect()
    assert first() is None  # nothing holds its answer and history until the timer fires
    host.fire()
    assert hub.feeds == {} and hub.aliases == {}


def test_a_feed_started_for_a_refused_subscription_does_not_stay() -> None:
    hub, host, session = _hub(HistoryLimits(answer_rows=10))
    _send(hub, session, type="subscribe", id=1, text="e(k, v)")  # 40,000 rows: refused
    (refused,) = host.take()
    assert refused["type"] == "error" and "rows, more than" in refused["error"]["message"]
    host.fire()  # its linger time is over
    assert hub.feeds == {} and hub.idle == {} and hub.db.live == {}


def test_aliases_of_a_query_are_bounded_and_go_with_its_feed() -> None:
    hub, host, session = _hub(HistoryLimits(lingering=0))
    for spaces in range(40):
        _send(hub, session, type="subscribe", id=1, text="s(x)" + " " * spaces)
    assert len(host.take()) == 40
    assert len(hub.feeds) == 1 and len(hub.aliases) <= 16
    hub.close(session)
    assert hub.feeds == {} and hub.aliases == {}


def test_feed_bytes_grows_with_the_rows_a_feed_holds() -> None:
    hub, host, session = _hub(HistoryLimits(), rows=100)
    small = feed_bytes(_watch_and_leave(hub, host, session, "e(1, v)"))
    hub, host, session = _hub(HistoryLimits(), rows=1000)
    large = feed_bytes(_watch_and_leave(hub, host, session, "e(1, v)"))
    assert 8 * small < large < 12 * small
