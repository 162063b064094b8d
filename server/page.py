"""The HTTP side of the port: the live page, and which browsers may open a WebSocket.

Layer: server — the standard library and `websockets` only.

A plain HTTP GET `/` answers `static/index.html`: one self-contained file (HTML, CSS
and JavaScript; no build step, no CDN) that speaks the documented protocol
(docs/protocol.md) to the server it came from; any other plain GET gets 404.
Requests that ask for a WebSocket (an `Upgrade` header) go on to the handshake,
whatever their path, if their `Origin` is allowed: none (a client that is not a
browser), the server's own page, or one the operator lists (`--allow-origin`).
Browsers always send `Origin` with a WebSocket handshake, so a page from elsewhere
cannot drive the server (a WebSocket is not bound by the same-origin policy).
"""

from __future__ import annotations

import http
import importlib.resources
import socket
from collections.abc import Iterable
from functools import cache
from urllib.parse import urlsplit

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

PAGE_PATHS = ("/", "/index.html")

# The page runs only its own inline script and talks only to the server it came from.
_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)


@cache
def page() -> bytes:
    """The page's bytes, read once from the installed package."""
    return importlib.resources.files("server").joinpath("static/index.html").read_bytes()


LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
WILDCARD = frozenset({"", "0.0.0.0", "::"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def own_origins(host: str, port: int) -> frozenset[str]:
    """The origins the live page has when a browser loads it from this server: the
    address it listens on, and the loopback names for a loopback or wildcard address
    (with the machine's host name for a wildcard one)."""
    names = {host} - WILDCARD
    if host in LOOPBACK or host in WILDCARD:
        names |= LOOPBACK
    if host in WILDCARD:
        names.add(socket.gethostname())
    return frozenset(origin("http", name, port) for name in names)


def origin(scheme: str, host: str, port: int | None) -> str:
    """An origin as browsers send it, lower case, without a scheme's default port."""
    host = f"[{host}]" if ":" in host else host
    shown = "" if port is None or port == _DEFAULT_PORTS.get(scheme) else f":{port}"
    return f"{scheme}://{host}{shown}".lower()


def normalized(text: str) -> str:
    """`text` (an `Origin` header, or an `--allow-origin`) as `origin` writes it; text
    that is no URL (`null`, from a file or a sandbox) stays as it is."""
    try:
        parts = urlsplit(text.strip())
        if parts.scheme and parts.hostname:
            return origin(parts.scheme.lower(), parts.hostname, parts.port)
    except ValueError:  # a port that is no number
        pass
    return text.strip().lower()


class Gate:
    """`process_request` for `websockets.serve`: the page for a plain GET of `/`, 404
    for other plain GETs; for a WebSocket handshake, 403 if its `Origin` is not
    allowed, else None (go on with the handshake)."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        listed = {normalized(o) for o in allowed}
        self.any = "*" in listed
        self.allowed = frozenset(listed - {"*"})

    def allow(self, origins: Iterable[str]) -> None:
        """Allow these origins too (the server's own, once its port is known)."""
        self.allowed |= {normalized(o) for o in origins}

    def __call__(self, connection: ServerConnection, request: Request) -> Response | None:
        if "Upgrade" in request.headers:
            sent = request.headers.get("Origin")
            if sent is None or self.any or normalized(sent) in self.allowed:
                return None
            message = (
                f"Forbidden: a WebSocket from origin {sent[:200]} is not allowed here "
                "(the server's own page is; `deltalog serve --allow-origin ORIGIN` allows "
                "another)\n"
            )
            return connection.respond(http.HTTPStatus.FORBIDDEN, message)
        return answer_http(connection, request)


def answer_http(connection: ServerConnection, request: Request) -> Response | None:
    """A plain GET: the page for `/`, 404 for any other path."""
    if urlsplit(request.path).path not in PAGE_PATHS:
        return connection.respond(http.HTTPStatus.NOT_FOUND, "Not found: the page is at /\n")
    return _html(page())


def _html(body: bytes) -> Response:
    headers = Headers(
        [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Content-Security-Policy", _POLICY),
            ("X-Content-Type-Options", "nosniff"),
            ("Cache-Control", "no-store"),
            ("Connection", "close"),
        ]
    )
    return Response(http.HTTPStatus.OK.value, http.HTTPStatus.OK.phrase, headers, body)
