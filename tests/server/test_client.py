"""The client's reading: whole messages taken from the transport's read callback.

A scripted WebSocket peer sends what our server never does (fragments, binary
frames, bad UTF-8, text that is not JSON, a message before any request), so the
client's own framing and failure paths are covered, not only the common one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from server.client import Client, ServerError
from server.transport import DeltalogServer
from tests.server.helpers import run

pytestmark = pytest.mark.server

Reply = Callable[[ServerConnection, dict[str, Any]], Awaitable[None]]


@asynccontextmanager
async def _peer(reply: Reply, greeting: str | None = None) -> AsyncIterator[str]:
    """A WebSocket server that sends `greeting` (if any), then answers each request by
    `reply(ws, request)`; yields its URL."""

    async def handler(ws: ServerConnection) -> None:
        if greeting is not None:
            await ws.send(greeting)
        async for text in ws:
            await reply(ws, json.loads(text))

    async with serve(handler, "127.0.0.1", 0) as server:
        yield f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def _pong(request: dict[str, Any], epoch: int) -> str:
    return json.dumps({"type": "ping", "id": request["id"], "epoch": epoch})


def test_a_message_in_several_frames_or_a_binary_frame_is_read_whole() -> None:
    async def reply(ws: ServerConnection, request: dict[str, Any]) -> None:
        text = _pong(request, request["id"] * 10)
        if request["id"] == 1:
            await ws.send([text[:5], text[5:9], text[9:]])  # a text message in 3 frames
        else:
            await ws.send(text.encode())  # a binary frame

    async def main() -> None:
        async with _peer(reply) as url, Client.connect(url) as client:
            assert [await client.ping(), await client.ping()] == [10, 20]
            assert await client.ping() == 30

    asyncio.run(main())


@pytest.mark.parametrize(
    ("frame", "error"),
    [(b"\xff\xfe{}", "connection closed"), ('{"type": "ping", oops', "unreadable message")],
)
def test_a_message_that_is_not_utf8_or_not_json_fails_the_connection_1007(
    frame: bytes | str, error: str
) -> None:
    async def reply(ws: ServerConnection, request: dict[str, Any]) -> None:
        await ws.send(frame, text=True)

    async def main() -> None:
        async with _peer(reply) as url:
            client = await Client.connect(url)
            with pytest.raises(ServerError, match=error):
                await asyncio.wait_for(client.ping(), 5)
            await asyncio.wait_for(client.reader, 5)
            sent = client.ws.protocol.close_sent
            assert sent is not None and sent.code == 1007  # invalid data, as websockets' recv
            with pytest.raises(ServerError, match=error):
                await client.ping()  # and it stays failed

    asyncio.run(main())


def test_a_message_before_any_request_is_kept() -> None:
    notice = {"type": "error", "id": None, "error": {"category": "fault", "message": "hello"}}

    async def reply(ws: ServerConnection, request: dict[str, Any]) -> None:
        await ws.send(_pong(request, 1))

    async def main() -> None:
        greeting = json.dumps(notice)
        async with _peer(reply, greeting) as url, Client.connect(url) as client:
            assert await client.ping() == 1
            assert [n.message for n in client.notices] == ["hello"]

    asyncio.run(main())


def test_readers_that_wait_or_time_out_lose_no_change() -> None:
    async def scenario(server: DeltalogServer) -> None:
        async with Client.connect(server.url) as client:
            await client.define(".decl edge(x: number, y: number)")
            sub = await client.subscribe("edge(x, y)")
            assert (await sub.next(1)).snapshot
            for _ in range(3):
                with pytest.raises(TimeoutError):
                    await sub.next(0.01)
            assert not sub.queue.waiters  # a reader that timed out waits no more
            readers = [asyncio.ensure_future(sub.next(5)) for _ in range(2)]
            await asyncio.sleep(0)  # both wait
            for x in (1, 2):
                await client.transact({"edge": [(x, x + 1)]})
            changes = await asyncio.gather(*readers)
            assert sorted(change.rows for change in changes) == [[(1, 2)], [(2, 3)]]
            assert sub.queue.empty()

    run(scenario)
