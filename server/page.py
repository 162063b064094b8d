"""The live page: plain HTTP GET `/` on the WebSocket port answers `static/index.html`.

Layer: server — the standard library and `websockets` only.

The page is one self-contained file (HTML, CSS and JavaScript; no build step, no
CDN) that speaks the documented protocol (docs/protocol.md) to the server it came
from. Requests that ask for a WebSocket (an `Upgrade` header) go on to the
handshake, whatever their path; any other plain GET gets 404.
"""

from __future__ import annotations

import http
import importlib.resources
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


def answer_http(connection: ServerConnection, request: Request) -> Response | None:
    """`process_request` for `websockets.serve`: the page for a plain GET of `/`,
    404 for other plain GETs, and None (go on with the handshake) for WebSockets."""
    if "Upgrade" in request.headers:
        return None
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
