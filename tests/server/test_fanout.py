"""Fan-out: a change framed once for every subscriber, and the engine thread's queue."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from websockets.protocol import State
from websockets.server import ServerProtocol

from datalog import Database
from server.client import Client
from server.session import Hub, Session
from server.transport import DeltalogServer, EngineThread, server_text_frame
from tests.server.helpers import GRAPH, FakeHost, View, closure, run

pytestmark = pytest.mark.server


@pytest.mark.parametrize("text", ["", '{"type":"change"}', "é" * 200, "x" * 70_000])
def test_a_prepared_frame_is_the_frame_websockets_sends(text: str) -> None:
    protocol = ServerProtocol()
    protocol.state = State.OPEN
    protocol.send_text(text.encode())
    assert server_text_frame(text) == b"".join(protocol.data_to_send())


class BroadcastHost(FakeHost):
    """A `FakeHost` that also records each broadcast as it came."""

    def __init__(self) -> None:
        super().__init__()
        self.broadcasts: list[tuple[list[int], dict[str, Any]]] = []

    def broadcast(self, sessions: list[Session], text: str) -> None:
        self.broadcasts.append(([s.number for s in sessions], json.loads(text)))
        super().broadcast(sessions, text)


def _subscribe(hub: Hub, session: Session, text: str, **fields: Any) -> None:
    hub.handle(session, json.dumps({"type": "subscribe", "id": 1, "text": text, **fields}))


def test_one_broadcast_per_subscription_number_and_none_to_closed_or_buffering_watches() -> None:
    host = BroadcastHost()
    hub = Hub(Database(), host)
    a, b, c, d, writer = (hub.open() for _ in range(5))
    hub.handle(writer, json.dumps({"type": "define", "id": 0, "text": GRAPH}))
    for session in (a, b, c):
        _subscribe(hub, session, "edge(x, y)")  # subscription 1 on each
    _subscribe(hub, a, "edge(x, y)")  # a's subscription 2
    _subscribe(hub, d, "edge(x, y)", granularity={"epochs": 2})  # buffers
    hub.close(c)
    host.take()
    transact = {"type": "transact", "id": 2, "inserts": {"edge": [[1, 2]]}}
    hub.handle(writer, json.dumps(transact))
    sent = [(numbers, m["subscription"], m["rows"]) for numbers, m in host.broadcasts]
    assert sorted(sent) == [([a.number], 2, [[1, 2]]), ([a.number, b.number], 1, [[1, 2]])]
    assert [m["type"] for n, m in host.sent if n == d.number] == []  # not due yet
    assert [m["type"] for n, m in host.sent if n == writer.number] == ["transacted"]


def test_subscribers_numbered_alike_or_not_all_see_exactly_the_answer() -> None:
    edges = [(i, i + 1) for i in range(30)]

    async def scenario(server: DeltalogServer) -> None:
        writer = await Client.connect(server.url)
        await writer.define(GRAPH)
        clients = [await Client.connect(server.url) for _ in range(4)]
        subs = [await c.subscribe("reach(x, y)") for c in clients]  # all number 1
        subs.append(await clients[0].subscribe("reach(x, y)"))  # number 2
        subs.append(await clients[1].subscribe("reach(0, y)"))  # another feed
        assert [s.number for s in subs] == [1, 1, 1, 1, 2, 2]
        views = [View() for _ in subs]
        for edge in edges:
            await writer.transact({"edge": [edge]})
        for client in clients:
            await client.ping()
        for sub, view in zip(subs, views, strict=True):
            while not sub.queue.empty():
                view.apply(await sub.next(1))
        everything = closure(edges)
        for view in views[:5]:
            assert set(view.rows) == everything
        assert set(views[5].rows) == {(y,) for x, y in everything if x == 0}
        for client in (writer, *clients):
            await client.close()

    run(scenario)


def test_the_engine_thread_runs_jobs_in_order_outlives_a_failing_one_and_then_stops() -> None:
    engine = EngineThread()
    seen: list[int] = []
    names: set[str] = set()

    def job(i: int) -> None:
        names.add(threading.current_thread().name)
        if i == 3:
            raise ValueError("a bug in a job")
        seen.append(i)

    for i in range(10):
        engine.submit(job, i)
    engine.shutdown()
    assert seen == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert names == {"deltalog-engine"}
    assert not engine.thread.is_alive()
    with pytest.raises(RuntimeError):
        engine.submit(job, 11)


def test_a_stopped_server_stops_its_engine_thread() -> None:
    async def main() -> None:
        server = DeltalogServer(port=0)
        await server.start()
        await server.stop()
        assert not server.engine.thread.is_alive()

    asyncio.run(main())
