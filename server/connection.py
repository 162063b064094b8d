"""Connections: a client socket's bounded outbox, its writer task and its request rate.

Layer: server — the standard library and `websockets` only.

An outgoing message is written to the transport at once while the socket keeps up
(nothing queued, the transport's buffer at most its high-water mark); otherwise it
waits in a bounded per-connection outbox, which a writer task drains at the
socket's pace. A change that goes to several connections is framed once and the
same bytes are written to each. A client that lets the outbox overflow is sent a
final error and dropped, and the engine never waits for any socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode
from websockets.protocol import State

from server.protocol import encode
from server.session import Session


@dataclass(frozen=True)
class Limits:
    """Transport limits (see docs/protocol.md)."""

    outbox: int = 1000  # queued outgoing messages per connection before it is dropped
    outbox_bytes: int = 64 * 1024 * 1024  # queued outgoing bytes per connection, likewise
    max_frame: int = 16 * 1024 * 1024  # bytes of one incoming frame
    auth_timeout: float = 10.0  # seconds to authenticate before the connection is closed
    max_queue: int = 2  # incoming frames buffered per connection before reading pauses
    abort_after: float = 2.0  # seconds a dropped client gets to take its final error
    close_timeout: float = 2.0  # seconds a client gets to answer a close before it is cut off
    stop_timeout: float = 1.5  # seconds a stop waits for clients and the engine, at most
    rate: float = 0.0  # requests per second per connection (0: no limit), in bursts of `rate`
    workers: int = 2  # children computing heavy requests at once (0: none, on the engine)
    workers_per_address: int = 0  # of them, for the connections of one address (0: any)
    allow_origins: tuple[str, ...] = ()  # browser origins allowed besides the server's own


@dataclass(frozen=True)
class Close:
    code: int
    reason: str


class Connection:
    """One socket's bounded outbox and the task that writes it."""

    def __init__(
        self,
        ws: ServerConnection,
        session: Session,
        limits: Limits,
        dropping: set[Connection] | None = None,
    ) -> None:
        self.ws, self.session, self.limits = ws, session, limits
        # The server's connections whose abort is pending (`_finish`): it aborts them
        # when it stops, so no socket outlives it.
        self.dropping = set() if dropping is None else dropping
        self.queue: deque[str | Close] = deque()
        self.queued_bytes = 0  # of the strings waiting in `queue`
        self.ready = asyncio.Event()
        self.closing = False
        # Bytes the transport may hold before a message waits in `queue` instead: its
        # high-water mark, past which websockets itself would wait for a drain.
        self.high_water = ws.transport.get_write_buffer_limits()[1]
        self.writer = asyncio.get_running_loop().create_task(self._write())
        address = ws.remote_address
        self.client = str(address[0]) if address else ""  # whose workers it counts against
        self.tokens = limits.rate  # of the request rate's bucket
        self.refilled = time.monotonic()

    async def throttle(self) -> None:
        """Wait, if need be, until the connection may send its next request: at most
        `limits.rate` per second, in bursts of as many (a token bucket)."""
        rate = self.limits.rate
        if rate <= 0:
            return
        now = time.monotonic()
        self.tokens = min(rate, self.tokens + (now - self.refilled) * rate)
        self.refilled = now
        if self.tokens < 1:
            await asyncio.sleep((1 - self.tokens) / rate)
            self.tokens, self.refilled = 1.0, time.monotonic()
        self.tokens -= 1

    def push(self, item: str | Close, frame: bytes | None = None) -> None:
        """Send `item` (with `frame`, its text frame if framed already) or queue it."""
        if self.closing:
            return
        if isinstance(item, Close):
            self._finish(item)
        elif self._write_now(item, frame):
            return
        elif (
            len(self.queue) >= self.limits.outbox
            or self.queued_bytes + len(item) > self.limits.outbox_bytes
        ):
            self._overflow()
        else:
            self.queue.append(item)
            self.queued_bytes += len(item)
            self.ready.set()

    def _write_now(self, text: str, frame: bytes | None) -> bool:
        """Write `text` to the socket without a trip through the writer task, if nothing
        is waiting before it (an idle writer) and the connection is open and keeps up
        (its transport holds no more than its high-water mark): what `ws.send` does,
        minus waiting for a drain.

        `frame`, if given, is `text` framed already (shared by every connection a
        change goes to): it is written as is unless this connection frames its own
        way (an extension) or is between the fragments of another message."""
        ws = self.ws
        if self.ready.is_set() or ws.state is not State.OPEN:
            return False
        transport = ws.transport
        if transport.get_write_buffer_size() > self.high_water:  # the client is behind
            return False
        protocol = ws.protocol
        if frame is None or protocol.extensions or protocol.expect_continuation_frame:
            protocol.send_text(text.encode())
            transport.write(b"".join(protocol.data_to_send()))
        else:
            earlier = protocol.data_to_send()  # anything websockets has not written yet
            transport.write(b"".join((*earlier, frame)) if earlier else frame)
        return True

    def _overflow(self) -> None:
        """Too slow: replace the backlog by one error, close, and abort if even that stalls."""
        self.queue.clear()
        self.queued_bytes = 0
        limit = f"{self.limits.outbox} messages or {self.limits.outbox_bytes:,} bytes"
        message = f"too slow, disconnecting: more than {limit} queued"
        error = {"type": "error", "id": None, "error": {"category": "fault", "message": message}}
        self.queue.append(encode(error))
        self._finish(Close(1008, "too slow"))

    def _finish(self, close: Close) -> None:
        self.queue.append(close)
        self.closing = True
        self.ready.set()
        loop = asyncio.get_running_loop()
        loop.call_later(self.limits.abort_after + 1.0, self.abort)
        self.dropping.add(self)

    def abort(self) -> None:
        self.dropping.discard(self)
        transport = getattr(self.ws, "transport", None)
        if transport is not None and not transport.is_closing():
            transport.abort()

    async def _write(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            while True:
                await self.ready.wait()
                while self.queue:
                    item = self.queue.popleft()
                    if not isinstance(item, Close):
                        self.queued_bytes -= len(item)
                    if isinstance(item, Close):
                        await asyncio.wait_for(
                            self.ws.close(item.code, item.reason), self.limits.abort_after
                        )
                        return
                    await self.ws.send(item)
                self.ready.clear()


def server_text_frame(text: str) -> bytes:
    """`text` as the bytes of one unmasked, unfragmented text frame, without extensions:
    what websockets writes for `ws.send(text)` on a server connection without
    compression, so one change's frame serves every subscriber alike."""
    return Frame(Opcode.TEXT, text.encode()).serialize(mask=False)
