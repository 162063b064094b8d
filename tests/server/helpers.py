"""Shared helpers for the server tests: a real server on a free loopback port."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from server.client import Change
from server.session import Session
from server.transport import DeltalogServer

GRAPH = """
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""

Scenario = Callable[[DeltalogServer], Awaitable[None]]


def run(scenario: Scenario, timeout: float = 30.0, **options: Any) -> None:
    """Start a server on 127.0.0.1 (any free port), run `scenario(server)`, stop it."""

    async def main() -> None:
        server = DeltalogServer(host="127.0.0.1", port=0, **options)
        await server.start()
        try:
            await asyncio.wait_for(scenario(server), timeout)
        finally:
            await server.stop()

    asyncio.run(main())


def closure(edges: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """The transitive closure, computed naively: the reference for `reach(x, y)`."""
    reach = set(edges)
    while True:
        step = {(x, w) for (x, y) in reach for (z, w) in reach if y == z} - reach
        if not step:
            return reach
        reach |= step


class View:
    """A subscriber's accumulated answer: apply snapshots and changes in order."""

    def __init__(self) -> None:
        self.rows: Counter[tuple[Any, ...]] = Counter()
        self.epoch = -1
        self.seen: list[tuple[int, set[tuple[Any, ...]]]] = []  # (epoch, answer) per change

    def apply(self, change: Change) -> None:
        if change.snapshot:
            self.rows.clear()
        for row, diff in zip(change.rows, change.diffs, strict=True):
            self.rows[row] += diff
            if self.rows[row] == 0:
                del self.rows[row]
        assert all(count == 1 for count in self.rows.values()), self.rows
        assert change.epoch >= self.epoch
        self.epoch = change.epoch

    @property
    def answer(self) -> set[tuple[Any, ...]]:
        return set(self.rows)


class History:
    """Edge sets by epoch, rebuilt from transactions and the epochs the server gave them."""

    def __init__(self) -> None:
        self.transactions: dict[int, tuple[set[tuple[int, int]], set[tuple[int, int]]]] = {}

    def record(self, epoch: int, inserts: Iterable[Any], retracts: Iterable[Any]) -> None:
        assert epoch not in self.transactions, f"two transactions at epoch {epoch}"
        self.transactions[epoch] = ({(a, b) for a, b in inserts}, {(a, b) for a, b in retracts})

    def edges_at(self, epoch: int) -> set[tuple[int, int]]:
        edges: set[tuple[int, int]] = set()
        for at in sorted(self.transactions):
            if at > epoch:
                break
            inserts, retracts = self.transactions[at]
            edges = (edges | inserts) - retracts
        return edges


class FakeHost:
    """Collects what the hub sends; timers run when the test says so."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, dict[str, Any]]] = []
        self.closed: list[tuple[int, int]] = []
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.time = 0.0  # the host's clock: moves only when timers fire
        self.due: list[float] = []

    def send(self, session: Session, text: str) -> None:
        self.sent.append((session.number, json.loads(text)))

    def broadcast(self, sessions: list[Session], text: str) -> None:
        for session in sessions:
            self.send(session, text)

    def close(self, session: Session, code: int, reason: str) -> None:
        self.closed.append((session.number, code))

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append((delay, callback))
        self.due.append(self.time + delay)

    def now(self) -> float:
        return self.time

    def fire(self) -> None:
        """Run the timers asked for so far, the clock moved to when the last is due."""
        timers, self.timers, due, self.due = self.timers, [], self.due, []
        self.time = max([self.time, *due])
        for _, callback in timers:
            callback()

    def take(self) -> list[dict[str, Any]]:
        sent, self.sent = self.sent, []
        return [message for _, message in sent]
