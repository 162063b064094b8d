"""The WebSocket transport: connections, bounded outboxes and the engine thread.

Layer: server — may import only the public API of datalog.

Threads. The asyncio event loop only moves bytes; every `Hub` call (so every
`Database` call, and the subscription callbacks that run inside commits) runs on
one worker thread, the engine thread. A long query therefore never stalls other
clients' sockets, and the hub never needs a lock of its own. Messages the engine
thread produces are collected per job and handed to the loop, in the order they
were produced and together with the job's result, in one `call_soon_threadsafe`
(one wake-up of the loop per request).

Back-pressure. A connection's requests are handled one at a time (the next frame
is read once the previous one is done), so a flooding client waits on its own
TCP window. An outgoing message is written to the transport at once while the
socket keeps up (nothing queued, the transport's buffer at most its high-water
mark); otherwise it waits in a bounded per-connection outbox, which a writer task
drains at the socket's pace. A change that goes to several connections is framed
once and the same bytes are written to each. A client that lets the outbox
overflow is sent a final error and dropped, and the engine never waits for any
socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.server import Server as WsServer
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode
from websockets.protocol import State

from datalog import Database
from server.feeds import HistoryLimits
from server.page import answer_http
from server.protocol import encode
from server.session import Hub, Session

_log = logging.getLogger("deltalog.server")


@dataclass(frozen=True)
class Limits:
    """Transport limits (see docs/protocol.md)."""

    outbox: int = 1000  # queued outgoing messages per connection before it is dropped
    outbox_bytes: int = 64 * 1024 * 1024  # queued outgoing bytes per connection, likewise
    max_frame: int = 16 * 1024 * 1024  # bytes of one incoming frame
    auth_timeout: float = 10.0  # seconds to authenticate before the connection is closed
    abort_after: float = 2.0  # seconds a dropped client gets to take its final error
    close_timeout: float = 2.0  # seconds a client gets to answer a close before it is cut off


@dataclass(frozen=True)
class _Close:
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
        self.queue: deque[str | _Close] = deque()
        self.queued_bytes = 0  # of the strings waiting in `queue`
        self.ready = asyncio.Event()
        self.closing = False
        # Bytes the transport may hold before a message waits in `queue` instead: its
        # high-water mark, past which websockets itself would wait for a drain.
        self.high_water = ws.transport.get_write_buffer_limits()[1]
        self.writer = asyncio.get_running_loop().create_task(self._write())

    def push(self, item: str | _Close, frame: bytes | None = None) -> None:
        """Send `item` (with `frame`, its text frame if framed already) or queue it."""
        if self.closing:
            return
        if isinstance(item, _Close):
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
        self._finish(_Close(1008, "too slow"))

    def _finish(self, close: _Close) -> None:
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
                    if not isinstance(item, _Close):
                        self.queued_bytes -= len(item)
                    if isinstance(item, _Close):
                        await asyncio.wait_for(
                            self.ws.close(item.code, item.reason), self.limits.abort_after
                        )
                        return
                    await self.ws.send(item)
                self.ready.clear()


class EngineThread:
    """The one worker thread that runs every job, in submission order.

    What `ThreadPoolExecutor(max_workers=1)` does, without a `concurrent.futures.Future`
    per job (the loop awaits its own future) and with a lock-free queue: the handoff
    costs about half as much. A daemon, so a server never stopped cannot hold the
    interpreter at exit."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]] | None]
        self.jobs = queue.SimpleQueue()
        self.stopped = False
        self.thread = threading.Thread(target=self._work, name="deltalog-engine", daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        if self.stopped:
            raise RuntimeError("the engine thread is shut down")
        self.jobs.put((fn, args))

    def shutdown(self) -> None:
        """Run the jobs submitted so far, then stop the thread."""
        if not self.stopped:
            self.stopped = True
            self.jobs.put(None)
        self.thread.join()

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            fn, args = job
            try:
                fn(*args)
            except Exception:  # `_job` catches everything; this thread must outlive bugs
                _log.exception("an engine job failed")


class DeltalogServer:
    """A `Database` served over WebSocket; `await start()`, then `await stop()`."""

    def __init__(
        self,
        db: Database | None = None,
        host: str = "127.0.0.1",
        port: int = 6262,
        token: str | None = None,
        history: HistoryLimits | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.db = db if db is not None else Database()
        self.address = (host, port)
        self.limits = limits or Limits()
        self.engine = EngineThread()
        self.hub = Hub(self.db, self, token, history)
        self.connections: dict[int, Connection] = {}
        self.dropping: set[Connection] = set()
        self.pending: list[tuple[Callable[..., None], tuple[Any, ...]]] = []  # engine thread
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ws_server: WsServer | None = None

    @property
    def port(self) -> int:
        assert self.ws_server is not None, "the server is not started"
        return int(self.ws_server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"ws://{self.address[0]}:{self.port}"

    @property
    def page_url(self) -> str:
        """Where a browser finds the live page (server/static/index.html)."""
        host = self.address[0]
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/"

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        host, port = self.address
        self.ws_server = await serve(
            self._serve,
            host,
            port,
            max_size=self.limits.max_frame,
            compression=None,
            close_timeout=self.limits.close_timeout,
            process_request=answer_http,  # a plain GET of / gets the live page
        )

    async def stop(self) -> None:
        """Close every connection (1001, going away), then stop the engine thread."""
        if self.ws_server is not None:
            self.ws_server.close()
            await self.ws_server.wait_closed()
        for connection in list(self.dropping):  # a dropped client's abort may still be
            connection.abort()  # pending: no socket outlives the server
        await self.run(self.hub.shutdown)
        self.engine.shutdown()

    async def stop_on_signal(self) -> None:
        """Serve (once started) until SIGINT or SIGTERM, then shut down gracefully."""
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping.set)
        try:
            await stopping.wait()
            self.db.interrupt()  # a runaway computation stops at its next step
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await self.stop()

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` on the engine thread; deliver what it sent, then return."""
        assert self.loop is not None
        done: asyncio.Future[Any] = self.loop.create_future()
        self.engine.submit(self._job, fn, args, done)
        return await done

    # --- engine thread -------------------------------------------------------------------

    def _job(
        self, fn: Callable[..., Any], args: tuple[Any, ...], done: asyncio.Future[Any] | None
    ) -> None:
        """Run `fn`, then hand the loop what it sent and how it ended, in one wake-up."""
        result, error = None, None
        try:
            result = fn(*args)
        except BaseException as exc:  # raised again where it is awaited
            error = exc
        batch, self.pending = self.pending, []
        if self.loop is not None and (batch or done is not None or error is not None):
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
                self.loop.call_soon_threadsafe(_deliver, batch, done, result, error)

    # Host, for the hub: called on the engine thread.
    def send(self, session: Session, text: str) -> None:
        self.pending.append((self._push, (session.number, text)))

    def broadcast(self, sessions: list[Session], text: str) -> None:
        """Send `text` to every session in `sessions`, framed once for all of them."""
        self.pending.append((self._broadcast, ([s.number for s in sessions], text)))

    def close(self, session: Session, code: int, reason: str) -> None:
        self.pending.append((self._push, (session.number, _Close(code, reason))))

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.pending.append((self._later, (delay, callback)))

    def now(self) -> float:
        return time.monotonic()

    # --- event loop ----------------------------------------------------------------------

    def _push(self, number: int, item: str | _Close) -> None:
        connection = self.connections.get(number)
        if connection is not None:
            connection.push(item)

    def _broadcast(self, numbers: list[int], text: str) -> None:
        frame = server_text_frame(text)
        connections = self.connections
        for number in numbers:
            connection = connections.get(number)
            if connection is not None:
                connection.push(text, frame)

    def _later(self, delay: float, callback: Callable[[], None]) -> None:
        assert self.loop is not None
        self.loop.call_later(delay, self._submit, callback)

    def _submit(self, callback: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # shutting down: timers no longer matter
            self.engine.submit(self._job, callback, (), None)

    async def _serve(self, ws: ServerConnection) -> None:
        session: Session = await self.run(self.hub.open)
        connection = Connection(ws, session, self.limits, self.dropping)
        self.connections[session.number] = connection
        assert self.loop is not None
        if not session.authenticated:
            self.loop.call_later(self.limits.auth_timeout, self._check_auth, connection)
        try:
            async for frame in ws:
                if connection.closing:
                    break
                await self.run(self.hub.handle, session, frame)
        except ConnectionClosed:
            pass
        finally:
            await self.run(self.hub.close, session)
            self.connections.pop(session.number, None)
            if not connection.closing:
                connection.writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError, ConnectionClosed):
                await connection.writer

    def _check_auth(self, connection: Connection) -> None:
        if not connection.session.authenticated and not connection.closing:
            connection.push(_Close(1008, "authentication timed out"))


def server_text_frame(text: str) -> bytes:
    """`text` as the bytes of one unmasked, unfragmented text frame, without extensions:
    what websockets writes for `ws.send(text)` on a server connection without
    compression, so one change's frame serves every subscriber alike."""
    return Frame(Opcode.TEXT, text.encode()).serialize(mask=False)


def _deliver(
    batch: list[tuple[Callable[..., None], tuple[Any, ...]]],
    done: asyncio.Future[Any] | None,
    result: Any,
    error: BaseException | None,
) -> None:
    """On the loop: send a job's messages, then wake whoever awaits the job."""
    _run_all(batch)
    if done is None:
        if error is not None:
            _log.error("a timer's job failed", exc_info=error)
    elif not done.cancelled():
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)


def _run_all(batch: list[tuple[Callable[..., None], tuple[Any, ...]]]) -> None:
    for fn, args in batch:
        try:
            fn(*args)
        except Exception:  # one broken connection must not starve the others
            _log.exception("delivering a message failed")
