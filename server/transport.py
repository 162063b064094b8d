"""The WebSocket transport: connections, the engine thread and the workers.

Layer: server — may import only the public API of datalog.

Threads. The asyncio event loop only moves bytes; every `Hub` call (so every
`Database` call, and the subscription callbacks that run inside commits) runs on
one worker thread, the engine thread, and the hub never needs a lock of its own.
Messages the engine thread produces are collected per job and handed to the loop,
in the order they were produced and together with the job's result, in one
`call_soon_threadsafe` (one wake-up of the loop per request).

Fairness (docs/adr/0038). A connection's requests are handled one at a time (the
next frame is read once the previous one is done), so the engine's queue holds at
most one request per connection and serves them round robin: a client sending
requests back to back waits for everyone else's between two of its own. A request
holds the engine for one slice at most (`HistoryLimits.slice`) unless a child
process has shown that it finishes within its budget: one that runs past its slice
is computed in a child forked from the engine thread (server/workers.py), read by
the loop and killed at its deadline, while the engine serves everyone else. Pings
are answered on the loop, at once.

Back-pressure: see server/connection.py; a flooding client waits on its own TCP
window (and, with `Limits.rate`, on its request rate).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from websockets.asyncio.server import Server as WsServer
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from datalog import Database
from server.connection import Close, Connection, Limits, server_text_frame
from server.feeds import HistoryLimits
from server.heavy import Heavy, reply_of
from server.page import Gate, own_origins
from server.protocol import ProtocolError, encode, error_reply, parse_request, reply
from server.session import Hub, Session
from server.workers import Child, Outcome, Workers, collect, spawn

__all__ = ["DeltalogServer", "EngineThread", "Limits", "server_text_frame"]

_log = logging.getLogger("deltalog.server")

Batch = list[tuple[Callable[..., None], tuple[Any, ...]]]


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

    def shutdown(self, timeout: float | None = None) -> bool:
        """Run the jobs submitted so far, then stop the thread; whether it stopped
        within `timeout` seconds (a daemon still busy is left to the interpreter)."""
        if not self.stopped:
            self.stopped = True
            self.jobs.put(None)
        self.thread.join(timeout)
        return not self.thread.is_alive()

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
        self.workers = Workers(self.limits.workers, self.limits.workers_per_address)
        self.hub = Hub(self.db, self, token, history, slices=self.workers.enabled)
        self.gate = Gate(self.limits.allow_origins)
        self.connections: dict[int, Connection] = {}
        self.dropping: set[Connection] = set()
        self.pending: Batch = []  # engine thread
        self.delivered = self.db.epoch  # loop: every message up to this epoch is handed on
        self.stopping = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ws_server: WsServer | None = None

    @property
    def port(self) -> int:
        assert self.ws_server is not None, "the server is not started"
        return int(self.ws_server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = self.address[0]
        return f"ws://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def page_url(self) -> str:
        """Where a browser finds the live page (server/static/index.html)."""
        return "http" + self.url.removeprefix("ws") + "/"

    async def start(self, sock: socket.socket | None = None) -> None:
        """Listen on the address given, or on `sock` (bound and listening already)."""
        self.loop = asyncio.get_running_loop()
        host, port = self.address if sock is None else (None, None)
        self.ws_server = await serve(
            self._serve,
            host,
            port,
            sock=sock,
            max_size=self.limits.max_frame,
            max_queue=self.limits.max_queue,
            compression=None,
            close_timeout=self.limits.close_timeout,
            process_request=self.gate,  # the live page, and the Origin check
        )
        self.gate.allow(own_origins(self.address[0], self.port))

    async def stop(self) -> None:
        """Kill the workers, close every connection (1001, going away), then stop the
        engine thread: within `Limits.stop_timeout` seconds, whatever runs (clients
        that do not answer the close are cut off, a busy engine thread is left)."""
        if self.stopping:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.stop_timeout
        self.stopping = self.hub.stopping = True
        self.workers.kill_all()
        if self.ws_server is not None:
            self.ws_server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ws_server.wait_closed(), deadline - loop.time())
        for connection in [*self.connections.values(), *self.dropping]:
            connection.abort()  # no socket outlives the server
        try:
            await asyncio.wait_for(self.run(self.hub.shutdown), max(deadline - loop.time(), 0))
        except TimeoutError:
            _log.warning("the engine thread is still busy; stopping without it")
        self.engine.shutdown(max(deadline - loop.time(), 0))

    async def stop_on_signal(self, ready: Callable[[], None] | None = None) -> None:
        """Serve (once started) until SIGINT or SIGTERM, then shut down gracefully;
        `ready()` is called once the signals are caught (to say the server is ready)."""
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping.set)
        try:
            if ready is not None:
                ready()
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
                self.loop.call_soon_threadsafe(
                    self._deliver, batch, done, result, error, self.db.epoch
                )

    def _spawn(self, work: Callable[[], bytes], alarm: float | None, memory: int | None
               ) -> Child | None:  # fmt: skip
        """Fork a worker, unless the server is stopping (its workers are killed)."""
        return None if self.stopping else spawn(work, alarm, memory)

    # Host, for the hub: called on the engine thread.
    def send(self, session: Session, text: str) -> None:
        self.pending.append((self._push, (session.number, text)))

    def broadcast(self, sessions: list[Session], text: str) -> None:
        """Send `text` to every session in `sessions`, framed once for all of them."""
        self.pending.append((self._broadcast, ([s.number for s in sessions], text)))

    def close(self, session: Session, code: int, reason: str) -> None:
        self.pending.append((self._push, (session.number, Close(code, reason))))

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.pending.append((self._later, (delay, callback)))

    def now(self) -> float:
        return time.monotonic()

    # --- event loop ----------------------------------------------------------------------

    def _deliver(
        self,
        batch: Batch,
        done: asyncio.Future[Any] | None,
        result: Any,
        error: BaseException | None,
        epoch: int,
    ) -> None:
        """Send a job's messages, then wake whoever awaits the job."""
        _run_all(batch)
        self.delivered = max(self.delivered, epoch)
        if done is None:
            if error is not None:
                _log.error("a timer's job failed", exc_info=error)
        elif not done.cancelled():
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(result)

    def _push(self, number: int, item: str | Close) -> None:
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
        session = self.hub.open()  # here, not on the engine: a busy engine delays no one
        connection = Connection(ws, session, self.limits, self.dropping)
        self.connections[session.number] = connection
        assert self.loop is not None
        if not session.authenticated:
            self.loop.call_later(self.limits.auth_timeout, self._check_auth, connection)
        try:
            async for frame in ws:
                if connection.closing or self.stopping:
                    break
                if self.limits.rate > 0:
                    await connection.throttle()
                if self._ping(connection, frame):
                    continue
                heavy = await self.run(self.hub.handle, session, frame)
                if heavy is not None:
                    await self._heavy(connection, heavy)
        except ConnectionClosed:
            pass
        finally:
            if self.stopping:  # the engine may be stuck: tell it, do not wait for it
                self._submit(partial(self.hub.close, session))
            else:
                await self.run(self.hub.close, session)
            self.connections.pop(session.number, None)
            if not connection.closing:
                connection.writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError, ConnectionClosed):
                await connection.writer

    def _ping(self, connection: Connection, frame: str | bytes) -> bool:
        """Answer a ping here, at once, whatever the engine is doing; its epoch is the
        last one whose messages have all been handed to the connections."""
        if not isinstance(frame, str) or len(frame) > 256 or '"ping"' not in frame:
            return False
        if not connection.session.authenticated:
            return False
        try:
            request = parse_request(frame)
        except ProtocolError:
            return False  # the engine answers it, as any other bad frame
        if request.type != "ping":
            return False
        connection.push(encode(reply(request, "pong", epoch=self.delivered)))
        return True

    async def _heavy(self, connection: Connection, heavy: Heavy) -> None:
        """A request that ran past its slice, computed in a child (the hub slices
        requests only when the server has workers)."""
        try:
            async with self.workers.slot(connection.client):
                outcome = await self._in_child(heavy)
        except OSError as error:  # no fork to be had (out of processes or memory)
            _log.warning("cannot fork a worker (%s); computing on the engine thread", error)
            await self.run(self.hub.finish, heavy, False)
            return
        if self.stopping:
            message = "stopped: the server is shutting down"
            connection.push(encode(error_reply(ProtocolError(message), heavy.request.id)))
            return
        text = reply_of(heavy, outcome, self.hub.limits)
        if text is None:  # it finishes in time: do it for real
            await self.run(self.hub.finish, heavy, True)
        else:
            connection.push(text)

    async def _in_child(self, heavy: Heavy) -> Outcome:
        limits = self.hub.limits
        seconds = heavy.remaining(limits.seconds)
        grace = None if limits.seconds is None else limits.seconds / 4
        alarm = None if seconds is None or grace is None else seconds + 2 * grace + 1
        work = partial(self.hub.compute, heavy)
        child = await self.run(self._spawn, work, alarm, limits.worker_memory)
        if child is None:  # the server is stopping
            return Outcome(b"")
        if self.stopping:  # forked as the workers were being killed
            child.kill()
        self.workers.children.add(child)
        try:
            timeout = None if seconds is None or grace is None else seconds + grace
            return await collect(child, timeout, limits.reply_bytes + 1)
        finally:
            self.workers.children.discard(child)

    def _check_auth(self, connection: Connection) -> None:
        if not connection.session.authenticated and not connection.closing:
            connection.push(Close(1008, "authentication timed out"))


def _run_all(batch: Batch) -> None:
    for fn, args in batch:
        try:
            fn(*args)
        except Exception:  # one broken connection must not starve the others
            _log.exception("delivering a message failed")
