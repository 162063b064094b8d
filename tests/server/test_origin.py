"""Browsers from other origins cannot drive the server (docs/protocol.md, *Origins*).

A WebSocket is not bound by the same-origin policy: any page a user opens could
connect to a server on their loopback. Browsers always send `Origin` with the
handshake, so the server accepts none (a client that is not a browser), its own
page's origins, and those the operator lists; everything else gets 403.
"""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from server.client import Client
from server.page import Gate, normalized, own_origins
from server.transport import DeltalogServer, Limits
from tests.server.helpers import run

pytestmark = pytest.mark.server


async def _pong(url: str, origin: str | None) -> int:
    """The status of a handshake from `origin` (101 once a ping is answered)."""
    try:
        async with connect(url, origin=origin) as ws:  # type: ignore[arg-type]
            await ws.send('{"type": "ping", "id": 1}')
            assert '"pong"' in str(await ws.recv())
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


def test_a_page_from_another_origin_is_refused_and_changes_nothing() -> None:
    async def scenario(server: DeltalogServer) -> None:
        evil = "http://evil.example"
        assert await _pong(server.url, evil) == 403
        try:
            async with connect(server.url, origin=evil) as ws:  # type: ignore[arg-type]
                await ws.send('{"type": "define", "id": 1, "text": ".decl pwned(x: number)"}')
        except InvalidStatus as refused:
            assert b"--allow-origin" in refused.response.body
        async with Client.connect(server.url) as client:
            relations = await client.query("deltalog.relation(n, t)")
            assert "pwned" not in {name for name, _ in relations}

    run(scenario)


def test_the_servers_own_page_and_clients_without_origin_are_served() -> None:
    async def scenario(server: DeltalogServer) -> None:
        port = server.port
        for origin in (None, f"http://127.0.0.1:{port}", f"http://localhost:{port}",
                       f"HTTP://LOCALHOST:{port}", f"http://[::1]:{port}"):  # fmt: skip
            assert await _pong(server.url, origin) == 101, origin
        for origin in (f"http://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port}", "null",
                       "http://127.0.0.1.evil.example", f"http://evil.example:{port}"):  # fmt: skip
            assert await _pong(server.url, origin) == 403, origin

    run(scenario)


def test_an_origin_the_operator_allows_is_served() -> None:
    async def scenario(server: DeltalogServer) -> None:
        assert await _pong(server.url, "https://app.example") == 101
        assert await _pong(server.url, "https://app.example:443") == 101
        assert await _pong(server.url, "http://app.example") == 403

    run(scenario, limits=Limits(allow_origins=("https://app.example/",)))


def test_a_star_allows_every_origin() -> None:
    gate = Gate(["*"])
    assert gate.any and not gate.allowed


def test_origins_are_compared_as_browsers_write_them() -> None:
    assert normalized("HTTP://Example.COM:80/") == "http://example.com"
    assert normalized("https://example.com:8443") == "https://example.com:8443"
    assert normalized("http://[::1]:6262") == "http://[::1]:6262"
    assert normalized("null") == "null"
    assert own_origins("127.0.0.1", 6262) == {
        "http://127.0.0.1:6262", "http://localhost:6262", "http://[::1]:6262",
    }  # fmt: skip
    assert own_origins("10.1.2.3", 80) == {"http://10.1.2.3"}
