"""A small asyncio client for the Deltalog server (docs/protocol.md).

Layer: server — needs only `websockets`; it does not load the engine.

    client = await Client.connect("ws://127.0.0.1:6262", token=None)
    await client.define(".decl edge(x: number, y: number)\n.decl back(x: number, y: number)")
    epoch = await client.transact(inserts={"edge": [(1, 2)]})
    epoch = await client.redefine("back", "back(x, y) :- edge(y, x).")  # its rules, replaced
    rows = await client.query("edge(x, y)")
    sub = await client.subscribe("edge(1, y)")
    async for change in sub:       # the snapshot first, then one Change per delivery
        ...
    await client.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping
from typing import Any

try:
    from websockets.asyncio.client import ClientConnection, connect
except ModuleNotFoundError as missing:  # websockets < 13 has no asyncio package
    message = "server.client needs websockets 13 or later: pip install 'deltalog[server]'"
    raise ImportError(message) from missing
from websockets.frames import BINARY, TEXT, CloseCode, Frame
from websockets.protocol import Event

from datalog.db.change import Change  # what a Database subscriber receives; loads no engine

Rows = Mapping[str, Iterable[Iterable[Any]]]


class ServerError(Exception):
    """An error reply: `category` is incorrect, not_found, conflict, unsupported or fault."""

    def __init__(self, detail: Mapping[str, Any]) -> None:
        self.detail = dict(detail)
        self.category: str = str(detail.get("category", "fault"))
        self.message: str = str(detail.get("message", ""))
        self.line: int | None = detail.get("line")
        self.column: int | None = detail.get("column")
        where = f" (line {self.line}, column {self.column})" if self.line else ""
        super().__init__(f"{self.category}: {self.message}{where}")


_END = object()


class Inbox:
    """The changes a subscription received and has not handed out yet: what it needs of
    an unbounded `asyncio.Queue` (`put_nowait`, `get`, `empty`, `qsize`), at the cost
    of a deque append per message and a future only when a reader has to wait."""

    def __init__(self) -> None:
        self.items: deque[Any] = deque()
        self.waiters: list[asyncio.Future[None]] = []  # readers waiting for an item

    def put_nowait(self, item: Any) -> None:
        self.items.append(item)
        if self.waiters:
            for waiter in self.waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self.waiters = []

    async def get(self) -> Any:
        while not self.items:  # every waiter wakes; one of them may get the item
            waiter = asyncio.get_running_loop().create_future()
            self.waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:  # e.g. a timeout: this reader stops waiting
                if waiter in self.waiters:
                    self.waiters.remove(waiter)
                raise
        return self.items.popleft()

    def empty(self) -> bool:
        return not self.items

    def qsize(self) -> int:
        return len(self.items)


class Subscription:
    """An async iterator of one subscription's `Change`s: the snapshot, then changes."""

    def __init__(self, client: Client, first: Mapping[str, Any]) -> None:
        self.client = client
        self.number: int = first["subscription"]
        self.columns: list[str] = first["columns"]
        self.instance: str = first["instance"]
        self.epoch: int = first["epoch"]  # of the last change handed out
        self.resumed: bool | None = first.get("resumed")
        self.reason: str | None = first.get("reason")
        self.queue = Inbox()
        self.parts: list[Mapping[str, Any]] = []  # of a change that comes in parts
        self.text, self.plan = "", "auto"
        self.granularity: Mapping[str, float] | None = None
        rows = [tuple(r) for r in first["rows"]]
        diffs = first.get("diffs", [1] * len(rows))
        snapshot = first["type"] == "snapshot"
        self.queue.put_nowait(Change(rows, diffs, self.epoch, snapshot, tuple(self.columns)))

    def receive(self, message: Mapping[str, Any]) -> None:
        """A `change` message; the parts of a large one (`more`) are joined first."""
        if "more" in message or self.parts:
            self.parts.append(message)
            if message.get("more"):
                return
            rows = [tuple(r) for part in self.parts for r in part["rows"]]
            diffs = [d for part in self.parts for d in part["diffs"]]
            self.parts = []
        else:  # the usual change, in one message
            rows, diffs = list(map(tuple, message["rows"])), message["diffs"]
        self.queue.put_nowait(Change(rows, diffs, message["epoch"], columns=tuple(self.columns)))

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Change:
        items = self.queue.items
        item = items.popleft() if items else await self.queue.get()
        if item is _END:
            self.queue.put_nowait(_END)
            raise StopAsyncIteration
        if isinstance(item, Exception):
            self.queue.put_nowait(item)
            raise item
        self.epoch = item.epoch
        return item

    async def next(self, timeout: float | None = None) -> Change:
        """The next change (waits at most `timeout` seconds)."""
        if self.queue.items:  # nothing to wait for
            return await self.__anext__()
        return await asyncio.wait_for(self.__anext__(), timeout)

    async def unsubscribe(self) -> None:
        await self.client.request("unsubscribe", subscription=self.number)
        self.client.subscriptions.pop(self.number, None)
        self.queue.put_nowait(_END)


class Connecting:
    """A connection being opened: awaitable, or an async context that closes it."""

    def __init__(self, opening: Coroutine[Any, Any, Client]) -> None:
        self.opening = opening
        self.client: Client | None = None

    def __await__(self) -> Generator[Any, None, Client]:
        return self.opening.__await__()

    async def __aenter__(self) -> Client:
        self.client = await self.opening
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        if self.client is not None:
            await self.client.close()


_READ_SIZE = 64 * 1024  # bytes the transport reads at most at a time


class _Connection(ClientConnection, asyncio.BufferedProtocol):
    """A client connection that hands each whole message to its listener as soon as
    the message is parsed, inside the transport's read callback.

    websockets' own connection queues every frame for `recv`: a future, a wake-up of
    the reading task and a coroutine per message, for a client that reads every
    message anyway. The handshake and the control frames (ping, pong, close) still
    go through websockets.

    It is a buffered protocol: the transport reads into one buffer it keeps, where a
    plain protocol gets a fresh 256 KiB `bytes` per read, whose allocation costs more
    than the read of a small message itself (ADR 0033)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inbound = memoryview(bytearray(_READ_SIZE))
        self.early: list[str | bytes] = []  # messages before a listener was set
        self.listener: Callable[[str | bytes], None] = self.early.append
        self.fragments: list[Frame] = []  # of a message that came in several frames
        self.failing: asyncio.Task[None] | None = None  # closing after a bad message

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.inbound

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(self.inbound[:nbytes]))

    def listen(self, listener: Callable[[str | bytes], None]) -> None:
        self.listener = listener
        for message in self.early:
            listener(message)
        self.early = []

    def process_event(self, event: Event) -> None:
        if self.response is None or not isinstance(event, Frame) or event.opcode > BINARY:
            super().process_event(event)  # the handshake's response, or a control frame
        elif not event.fin:
            self.fragments.append(event)
        else:
            data, first = event.data, event
            if self.fragments:  # the last frame of a message in several
                first, frames, self.fragments = self.fragments[0], [*self.fragments, event], []
                data = b"".join(frame.data for frame in frames)
            if first.opcode is not TEXT:
                self.listener(bytes(data))
                return
            try:
                text = str(data, "utf-8")
            except UnicodeDecodeError as error:  # as websockets' `recv` answers it
                self.fail(CloseCode.INVALID_DATA, f"{error.reason} at position {error.start}")
                return
            self.listener(text)

    def fail(self, code: CloseCode, reason: str) -> None:
        """Close the connection because of what the server sent."""

        async def failing() -> None:
            async with self.send_context():
                self.protocol.fail(code, reason)

        self.failing = self.loop.create_task(failing())  # held: the loop keeps tasks weakly


class Client:
    """One WebSocket connection; requests may be issued concurrently."""

    def __init__(self, ws: _Connection) -> None:
        self.ws = ws
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.subscriptions: dict[int, Subscription] = {}
        self.failure: Exception | None = None
        self.notices: list[ServerError] = []  # errors that answer no request
        self.reader = asyncio.get_running_loop().create_task(self._read())
        ws.listen(self._receive)

    @classmethod
    def connect(cls, url: str, token: str | None = None, **options: Any) -> Connecting:
        """Connect (and authenticate, if a token is given). `options` go to websockets.

        Await it (`client = await Client.connect(url)`) or use it as a context
        (`async with Client.connect(url) as client:`, which closes the client)."""
        return Connecting(cls._open(url, token, options))

    @classmethod
    async def _open(cls, url: str, token: str | None, options: dict[str, Any]) -> Client:
        max_size = options.pop("max_size", 16 * 1024 * 1024)
        ws = await connect(url, max_size=max_size, create_connection=_Connection, **options)
        assert isinstance(ws, _Connection)
        client = cls(ws)
        if token is not None:
            await client.request("auth", token=token)
        return client

    async def request(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its reply; an error reply raises `ServerError`."""
        if self.failure is not None:
            raise self.failure
        self.next_id += 1
        request_id = self.next_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future
        await self.ws.send(json.dumps({"type": kind, "id": request_id, **fields}))
        return await future

    async def define(self, text: str) -> int:
        return int((await self.request("define", text=text))["epoch"])

    async def transact(
        self,
        inserts: Rows | None = None,
        retracts: Rows | None = None,
        redefine: Mapping[str, str] | None = None,
    ) -> int:
        """Insert and retract rows (and replace the rules of each relation in `redefine`
        by its text) as one atomic epoch; returns that epoch."""
        fields: dict[str, Any] = {"inserts": _rows(inserts or {})}
        fields["retracts"] = _rows(retracts or {})
        if redefine:
            fields["redefine"] = dict(redefine)
        return int((await self.request("transact", **fields))["epoch"])

    async def redefine(
        self, relation: str, text: str, inserts: Rows | None = None, retracts: Rows | None = None
    ) -> int:
        """Replace every rule of `relation` by the rules in `text` (`""`: none) as one new
        epoch, with `inserts` and `retracts` if given; returns that epoch."""
        reply = await self.request(
            "redefine", relation=relation, text=text,
            inserts=_rows(inserts or {}), retracts=_rows(retracts or {}),
        )  # fmt: skip
        return int(reply["epoch"])

    async def query(
        self, text: str, plan: str = "auto", as_of: int | None = None
    ) -> list[tuple[Any, ...]]:
        """The answer now, or as of the end of epoch `as_of` (within the server's history)."""
        fields = {} if as_of is None else {"as_of": as_of}
        reply = await self.request("query", text=text, plan=plan, **fields)
        return [tuple(r) for r in reply["rows"]]

    async def subscribe(
        self,
        text: str,
        granularity: Mapping[str, float] | None = None,
        resume_from: int | None = None,
        instance: str | None = None,
        plan: str = "auto",
    ) -> Subscription:
        """Subscribe; with `resume_from` (and its `instance`) get only the newer changes."""
        fields: dict[str, Any] = {"text": text, "plan": plan}
        if granularity is not None:
            fields["granularity"] = dict(granularity)
        if resume_from is not None:
            fields.update(resume_from=resume_from, instance=instance)
        reply = await self.request("subscribe", **fields)
        sub = self.subscriptions[reply["subscription"]]
        sub.text, sub.plan, sub.granularity = text, plan, granularity
        return sub

    async def resume(self, old: Subscription) -> Subscription:
        """Subscribe again to `old`'s query from where `old` stopped (e.g. after a reconnect).

        The first change is either the consolidated changes since `old.epoch`
        (`resumed` is True) or, if the server no longer has them, a fresh snapshot.
        """
        return await self.subscribe(
            old.text, old.granularity, resume_from=old.epoch, instance=old.instance, plan=old.plan
        )

    async def explain(
        self, text: str, plan: str = "auto", format: str = "text", passes: bool = False
    ) -> str:
        """The plan as text, or (`format="dot"`) the dataflow as a Graphviz digraph;
        `passes=True`: the plan after each planning pass, as text."""
        fields = {"text": text, "plan": plan, "format": format, "passes": passes}
        return str((await self.request("explain", **fields))["text"])

    async def why(self, fact: str, as_of: int | None = None) -> dict[str, Any]:
        """Why the ground `fact` holds now (or held at the end of epoch `as_of`): the
        reply's `derivation` (nested `{kind, fact, relation, values, rule, height,
        premises}`), printed `text` and `epoch`."""
        fields = {} if as_of is None else {"as_of": as_of}
        reply = await self.request("why", fact=fact, **fields)
        return {key: reply[key] for key in ("derivation", "text", "epoch")}

    async def stats(self) -> dict[str, Any]:
        return dict((await self.request("stats"))["stats"])

    async def ping(self) -> int:
        return int((await self.request("ping"))["epoch"])

    async def close(self) -> None:
        await self.ws.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reader

    # --- reading -------------------------------------------------------------------------

    def _receive(self, text: str | bytes) -> None:
        """One whole message, as the connection parses it (`_Connection`)."""
        try:
            message = _json(text)
        except ValueError as error:  # not JSON: the server is not one we can talk to
            self.failure = self.failure or ServerError(
                {"category": "fault", "message": f"unreadable message: {error}"}
            )
            self.ws.fail(CloseCode.INVALID_DATA, "unreadable message")
            return
        self._dispatch(message)

    async def _read(self) -> None:
        """Wait for the connection to close, then fail whatever still waits on it."""
        failure: Exception = ServerError({"category": "fault", "message": "connection closed"})
        try:
            await self.ws.wait_closed()
        finally:
            if self.ws.close_code not in (1000, 1001) and self.notices:
                failure = self.notices[-1]  # why the server closed the connection
            self.failure = self.failure or failure
            for future in self.waiting.values():
                if not future.done():
                    future.set_exception(self.failure)
            self.waiting.clear()
            for sub in self.subscriptions.values():
                sub.queue.put_nowait(_END if self.failure is failure else self.failure)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "change":
            sub = self.subscriptions.get(message["subscription"])
            if sub is not None:
                sub.receive(message)
            return
        if kind in ("snapshot", "resumed"):  # register before any change can arrive
            sub = Subscription(self, message)
            self.subscriptions[sub.number] = sub
        future = self.waiting.pop(message.get("id"), None)  # type: ignore[arg-type]
        if kind == "error":
            error = ServerError(message["error"])
            if future is None:  # about no request of ours (or the server dropping us)
                self.notices.append(error)
            elif not future.done():
                future.set_exception(error)
        elif future is not None and not future.done():
            future.set_result(message)


_RAW_DECODE = json.JSONDecoder().raw_decode


def _json(text: str | bytes) -> Any:
    """`json.loads(text)`, without its two whitespace scans for the compact text the
    server sends (anything else goes through `json.loads`, errors included)."""
    if isinstance(text, str):
        try:
            value, end = _RAW_DECODE(text)
        except ValueError:
            pass
        else:
            if end == len(text):
                return value
    return json.loads(text)


def _rows(rows: Rows) -> dict[str, list[list[Any]]]:
    return {relation: [list(row) for row in items] for relation, items in rows.items()}
