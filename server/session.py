"""Sessions and dispatch: what each request does to the database and who hears of it.

Layer: server — may import only the public API of datalog.

`Hub` is the protocol core, free of any network code: the transport hands it
each text frame of a connection's `Session` and gives it a `Host` to send
messages, close connections and schedule timers through. Every `Hub` method runs
on one thread, the engine thread, so the hub, its feeds and the database are
never used concurrently and every message a commit causes is sent, in order,
before the reply that reports the commit. The exceptions are `open`, which only
registers a session, and `compute`, which runs in a child process forked from the
engine thread (server/heavy.py).
"""

from __future__ import annotations

import hmac
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from datalog import BudgetExceeded, Database, DatalogError, RowLimitExceeded, WhySubscription
from server import whys
from server.feeds import Feed, HistoryLimits, Outbox, Watch, feed_bytes
from server.heavy import ANSWER, PASSED, SLICED, Heavy, text_bytes
from server.protocol import ProtocolError, Request, encode, error_reply, parse_request, reply

_log = logging.getLogger("deltalog.server")
READS = frozenset({"query", "explain", "why", "why_not", "subscribe", "subscribe_why", "what_if"})
# (requests bound by `--max-rows`)


class Host(Protocol):
    """What the transport provides to the hub (each call is safe from the engine thread)."""

    def send(self, session: Session, text: str) -> None: ...

    def broadcast(self, sessions: list[Session], text: str) -> None: ...

    def close(self, session: Session, code: int, reason: str) -> None: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> None: ...

    def now(self) -> float:
        """The clock timers run by (seconds, monotonic)."""
        ...


@dataclass(eq=False)
class Session:
    """One client connection's protocol state."""

    number: int
    authenticated: bool
    watches: dict[int, Watch] = field(default_factory=dict)
    whys: dict[int, WhySubscription] = field(default_factory=dict)  # `subscribe_why`s
    next_watch: int = 1
    closed: bool = False


class SessionOutbox:
    """A `feeds.Outbox` bound to one session."""

    def __init__(self, hub: Hub, session: Session) -> None:
        self.hub, self.session = hub, session

    def send_text(self, text: str) -> None:
        self.hub.send_text(self.session, text)

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.hub.host.call_later(delay, callback)

    def epoch(self) -> int:
        return self.hub.db.epoch

    def now(self) -> float:
        return self.hub.host.now()


class Hub:
    """Dispatches requests to one `Database` and fans its changes out to sessions."""

    def __init__(
        self,
        db: Database,
        host: Host,
        token: str | None = None,
        limits: HistoryLimits | None = None,
        slices: bool = False,
    ) -> None:
        """`slices`: a request that runs past `limits.slice` is stopped and returned by
        `handle` as `Heavy`, for the host to compute elsewhere (a server with workers);
        without, every request gets its whole budget here."""
        self.db, self.host, self.token = db, host, token
        self.limits = limits or HistoryLimits()
        self.slices = slices
        self.instance = uuid.uuid4().hex  # tells a resuming client whether we restarted
        self.feeds: dict[str, Feed] = {}
        self.idle: dict[str, Feed] = {}  # feeds nobody watches, oldest first
        self.aliases: dict[tuple[str, str], str] = {}  # (text, plan) -> feed key
        self.idle_bytes = 0  # of the feeds in `idle` (their `held`)
        self.sessions: dict[int, Session] = {}
        self.opened = 0
        self.stopping = False  # set by the transport as it shuts down: nothing goes heavy

    # --- sessions ------------------------------------------------------------------------

    def open(self) -> Session:
        """A new connection's session. Safe on another thread than the engine's (the
        transport's event loop): it only adds the session to `sessions`."""
        self.opened += 1
        session = Session(self.opened, authenticated=self.token is None)
        self.sessions[session.number] = session
        return session

    def close(self, session: Session) -> None:
        """The connection is gone: drop its watches (feeds linger for resumes)."""
        session.closed = True
        self.sessions.pop(session.number, None)
        for watch in list(session.watches.values()):
            self._unwatch(session, watch)
        for number in list(session.whys):
            self.db.unsubscribe_why(session.whys.pop(number))

    def send(self, session: Session, message: dict[str, Any]) -> None:
        self.send_text(session, encode(message))

    def send_text(self, session: Session, text: str) -> None:
        if not session.closed:
            self.host.send(session, text)

    def fanout(self, outboxes: list[Outbox], text: str) -> None:
        """A feed's message to several sessions: one `Host.broadcast` for all."""
        sessions = []
        for outbox in outboxes:
            if isinstance(outbox, SessionOutbox):
                if not outbox.session.closed:
                    sessions.append(outbox.session)
            else:
                outbox.send_text(text)
        if sessions:
            self.host.broadcast(sessions, text)

    # --- dispatch ------------------------------------------------------------------------

    def handle(self, session: Session, frame: str | bytes) -> Heavy[Session] | None:
        """Act on one frame; any failure becomes an error reply and changes nothing.

        A request that may take long first gets a slice of the engine: if it runs
        past it, it is stopped (changing nothing) and returned as `Heavy`, for the
        transport to compute in a child (`compute`) or to finish here (`finish`)."""
        request_id = None
        try:
            request = parse_request(frame)
            request_id = request.id
            started = time.monotonic()  # the budget counts from here, as it always did
            if not session.authenticated and request.type != "auth":
                self._refuse(session, request_id, "authentication required: send auth first")
                return None
            slice = self._slice(request)
            if slice is None:
                self._run(session, request, self.limits.seconds)
                return None
            if text_bytes(request) > self.limits.probe_text:  # parsing it may take long
                return Heavy(session, request, started)
            try:
                self._run(session, request, slice)
            except RowLimitExceeded:  # a refusal: no worker would do better
                raise
            except BudgetExceeded:
                if self.stopping:
                    raise
                return Heavy(session, request, started)
        except Exception as error:
            self._fail(session, request_id, error, frame)
        return None

    def _rows(self, request: Request) -> int | None:
        """The row limit of a read (`--max-rows`): a join step that would build more
        is refused before it is built. Writes are not refused for their size."""
        return self.limits.answer_rows if request.type in READS else None

    def _slice(self, request: Request) -> float | None:
        """The slice a request gets before it leaves the engine (None: its whole budget)."""
        slice, budget = self.limits.slice, self.limits.seconds
        if not self.slices or slice is None or request.type not in SLICED or self.stopping:
            return None
        return None if budget is not None and budget <= slice else slice

    def _run(self, session: Session, request: Request, seconds: float | None) -> None:
        handler = getattr(self, f"_on_{request.type}")
        with self.db.budget(seconds, rows=self._rows(request)):
            answer: dict[str, Any] | str | None = handler(session, request)
        if isinstance(answer, str):  # encoded already (to check its size)
            self.send_text(session, answer)
        elif answer is not None:
            self.send(session, answer)

    def _fail(self, session: Session, request_id: Any, error: Exception, frame: Any) -> None:
        """Reply with `error`; a user error keeps its category, a bug is logged."""
        if not isinstance(error, ProtocolError | DatalogError):  # a bug must cost one
            _log.exception("request failed: %.200r", frame)  # reply, not the server
        self.send(session, error_reply(error, request_id))
        if not session.authenticated:  # a malformed frame is no auth either
            self.host.close(session, 1008, "authentication failed")

    def finish(self, heavy: Heavy[Session], proven: bool) -> None:
        """Do a heavy request on the engine thread: with its whole budget once a child
        has shown that it finishes within it (`proven`), else with what is left of it."""
        if heavy.session.closed:
            return
        budget = self.limits.seconds
        seconds = budget if proven else heavy.remaining(budget)
        try:
            self._run(heavy.session, heavy.request, seconds)
        except Exception as error:
            self._fail(heavy.session, heavy.request.id, error, heavy.request.type)

    def compute(self, heavy: Heavy[Session]) -> bytes:
        """In a forked child, with what is left of the budget: a read's reply (`ANSWER`
        and its JSON), or for anything else `PASSED` if it finishes in time (and what
        it did stays in the child), else the error reply."""
        request = heavy.request
        error: Exception
        try:
            if not heavy.read:
                self.db.detach_log()  # a durable database's log is the parent's alone
            handler = getattr(self, f"_on_{request.type}")
            with self.db.budget(heavy.remaining(self.limits.seconds), rows=self._rows(request)):
                answer = handler(heavy.session, request)
            if not heavy.read:
                return PASSED
            return ANSWER + (answer if isinstance(answer, str) else encode(answer)).encode()
        except MemoryError:
            error = ProtocolError(
                "the request ran out of memory (a worker may use "
                f"{(self.limits.worker_memory or 0) >> 20:,} MB more than the server; "
                "`deltalog serve --worker-mb`)"
            )
        except Exception as exc:  # not logged: the child must not touch logging's locks
            error = exc
        return ANSWER + encode(error_reply(error, request.id)).encode()

    def _refuse(self, session: Session, request_id: Any, message: str) -> None:
        self.send(session, error_reply(ProtocolError(message), request_id))
        self.host.close(session, 1008, "authentication failed")

    def _on_auth(self, session: Session, request: Request) -> dict[str, Any] | None:
        token = request.fields["token"]
        if self.token is not None and not hmac.compare_digest(
            token.encode("utf-8", "surrogatepass"), self.token.encode("utf-8", "surrogatepass")
        ):
            self._refuse(session, request.id, "wrong token")
            return None
        session.authenticated = True
        return reply(request, "authenticated", instance=self.instance)

    def _on_ping(self, session: Session, request: Request) -> dict[str, Any]:
        return reply(request, "pong", epoch=self.db.epoch)

    def _on_define(self, session: Session, request: Request) -> dict[str, Any]:
        self.db.define(request.fields["text"])
        return reply(request, "defined", epoch=self._ticked())

    def _on_transact(self, session: Session, request: Request) -> dict[str, Any]:
        self._commit(request.fields)
        return reply(request, "transacted", epoch=self._ticked())

    def _on_redefine(self, session: Session, request: Request) -> dict[str, Any]:
        self._commit(request.fields)
        return reply(request, "redefined", epoch=self._ticked())

    def _commit(self, fields: dict[str, Any]) -> None:
        """Rule replacements, inserts and retracts as one epoch; an error discards all."""
        with self.db.transaction() as tx:
            for relation, text in fields["redefine"].items():
                tx.redefine(relation, text)
            for relation, rows in fields["inserts"].items():
                tx.insert(relation, rows)
            for relation, rows in fields["retracts"].items():
                tx.retract(relation, rows)

    def _ticked(self) -> int:
        """After a commit: let epoch-granular watches deliver; the current epoch."""
        epoch = self.db.epoch
        for feed in self.feeds.values():
            for watch in feed.plan.ticking:
                watch.tick(epoch)
        return epoch

    def _on_query(self, session: Session, request: Request) -> str:
        fields = request.fields
        rows = self.db.query(fields["text"], plan=fields["plan"], as_of=fields["as_of"])
        self._check_size(len(rows))
        return self._fits(reply(request, "rows", rows=rows, epoch=self._epoch_of(fields)))

    def _epoch_of(self, fields: dict[str, Any]) -> int:
        """The epoch an answer is of: the request's `as_of`, else the current one."""
        as_of = fields["as_of"]
        return self.db.epoch if as_of is None else int(as_of)

    def _fits(self, answer: dict[str, Any]) -> str:
        """`answer` as JSON (encoded once, sent as is), unless it is larger than a
        client takes in one frame."""
        text = encode(answer)
        if len(text) > self.limits.reply_bytes:
            raise ProtocolError(
                f"the answer is {len(text):,} bytes of JSON, more than one message may "
                f"carry ({self.limits.reply_bytes:,}): ask for fewer or smaller rows"
            )
        return text

    def _check_size(self, rows: int) -> None:
        if rows > self.limits.answer_rows:
            raise ProtocolError(
                f"the answer has {rows:,} rows, more than this server sends at once "
                f"({self.limits.answer_rows:,}; `deltalog serve --max-rows`)"
            )

    def _on_explain(self, session: Session, request: Request) -> dict[str, Any]:
        fields = request.fields
        text = self.db.explain(
            fields["text"], plan=fields["plan"], format=fields["format"], passes=fields["passes"]
        )
        return reply(request, "explanation", text=text)

    def _on_why(self, session: Session, request: Request) -> str:
        fields = request.fields
        derivation = self.db.why(fields["fact"], as_of=fields["as_of"])
        answer = reply(request, "derivation", derivation=derivation.to_dict(),
                       text=str(derivation), epoch=self._epoch_of(fields))  # fmt: skip
        try:
            return self._fits(answer)
        except RecursionError:  # JSON nests objects only as deep as Python recurses
            raise ProtocolError(
                f"the proof is {derivation.height} steps high, too deep to send as nested "
                "JSON; ask about a tuple closer to the base facts, or use the Python API"
            ) from None

    def _on_why_not(self, session: Session, request: Request) -> str:
        return self._fits(whys.absence(self.db, request, self._epoch_of(request.fields)))

    def _on_what_if(self, session: Session, request: Request) -> str:
        return self._fits(whys.what_if(self.db, request))

    def _on_subscribe_why(self, session: Session, request: Request) -> str:
        number = session.next_watch
        session.next_watch += 1
        send, budget = partial(self.send_text, session), self.limits.seconds
        sub, first = whys.subscribe(self.db, request, number, send, budget, self.host)
        try:
            answer = self._fits(first)
        except BaseException:
            self.db.unsubscribe_why(sub)
            raise
        session.whys[number] = sub
        return answer

    def _on_stats(self, session: Session, request: Request) -> dict[str, Any]:
        feeds = {
            key: {"watchers": len(f.watches), "history_epochs": len(f.history),
                  "horizon": f.horizon}
            for key, f in self.feeds.items()
        }  # fmt: skip
        server = {"instance": self.instance, "sessions": len(self.sessions), "feeds": feeds,
                  "lingering": len(self.idle), "lingering_bytes": self.idle_bytes}  # fmt: skip
        return reply(request, "stats", stats={**self.db.stats(), "server": server})

    # --- subscriptions -------------------------------------------------------------------

    def _on_subscribe(self, session: Session, request: Request) -> str:
        fields = request.fields
        feed = self._feed(fields["text"], fields["plan"])
        epoch = self.db.epoch
        number = session.next_watch
        session.next_watch += 1
        watch = Watch(number, feed, SessionOutbox(self, session), fields["granularity"], epoch)
        try:
            answer = self._fits(self._first_message(request, feed, number, epoch))
        except BaseException:
            if not feed.watches and feed.key not in self.idle:  # started for nobody
                self._park(feed)
            raise
        feed.add(watch)
        feed.idle += 1
        if self.idle.pop(feed.key, None) is not None:
            self.idle_bytes -= feed.held
        session.watches[number] = watch
        return answer

    def _first_message(
        self, request: Request, feed: Feed, number: int, epoch: int
    ) -> dict[str, Any]:
        """The changes since `resume_from` if history reaches back that far, else a snapshot."""
        base = {"subscription": number, "epoch": epoch, "columns": list(feed.columns),
                "instance": self.instance}  # fmt: skip
        resume_from, instance = request.fields["resume_from"], request.fields["instance"]
        if resume_from is None:
            rows = feed.snapshot()
            self._check_size(len(rows))
            return reply(request, "snapshot", **base, rows=rows)
        reason = None
        if instance is not None and instance != self.instance:
            reason = "server restarted"
        elif resume_from > epoch:
            reason = "epoch is ahead of the server"
        changes = feed.since(resume_from) if reason is None else None
        if changes is None:
            reason = reason or "history compacted"
            return reply(request, "snapshot", **base, rows=feed.snapshot(), resumed=False,
                         reason=reason)  # fmt: skip
        rows, diffs = changes
        return reply(request, "resumed", **base, since=resume_from, rows=rows, diffs=diffs,
                     resumed=True)  # fmt: skip

    def _feed(self, text: str, plan: str) -> Feed:
        """The feed of a query, started (one database subscription) on first use."""
        key = self.aliases.get((text, plan))
        if key is not None and key in self.feeds:
            return self.feeds[key]
        feed = Feed(key="", limits=self.limits, fanout=self.fanout)
        subscription = self.db.subscribe(text, feed.on_change, plan=plan)  # type: ignore[arg-type]
        key = subscription.query
        existing = self.feeds.get(key)
        if existing is not None:  # the same query written differently
            self.db.unsubscribe(subscription)
            feed = existing
        else:
            feed.key, feed.subscription = key, subscription
            feed.columns = tuple(subscription.columns)
            self.feeds[key] = feed
        if len(feed.aliases) < 16:  # a feed's spellings, forgotten with it
            feed.aliases.add((text, plan))
            self.aliases[(text, plan)] = key
        return feed

    def _on_unsubscribe(self, session: Session, request: Request) -> dict[str, Any]:
        number = request.fields["subscription"]
        watch = session.watches.get(number)
        if watch is None and number in session.whys:
            self.db.unsubscribe_why(session.whys.pop(number))
            return reply(request, "unsubscribed", subscription=number)
        if watch is None:
            raise ProtocolError(f"no subscription {number} on this connection", "not_found")
        self._unwatch(session, watch)
        return reply(request, "unsubscribed", subscription=number)

    def _unwatch(self, session: Session, watch: Watch) -> None:
        watch.active = False
        session.watches.pop(watch.number, None)
        feed = watch.feed
        feed.remove(watch)
        if not feed.watches:
            self._park(feed)

    def _park(self, feed: Feed) -> None:
        """A feed nobody watches lingers for resuming clients, `linger` seconds at most,
        while the lingering feeds are at most `lingering` and hold at most
        `lingering_bytes` (the oldest go first; one larger than that goes at once)."""
        feed.idle += 1
        feed.held = feed_bytes(feed)
        self.idle[feed.key] = feed
        self.idle_bytes += feed.held
        limits = self.limits
        while self.idle and (
            len(self.idle) > limits.lingering or self.idle_bytes > limits.lingering_bytes
        ):
            oldest = self.idle[next(iter(self.idle))]
            self._retire(oldest, oldest.idle)
        if feed.key in self.idle:  # the timer holds the key, not the feed and its rows
            self.host.call_later(limits.linger, partial(self._expire, feed.key, feed.idle))

    def _expire(self, key: str, idle: int) -> None:
        feed = self.feeds.get(key)
        if feed is not None:
            self._retire(feed, idle)

    def _retire(self, feed: Feed, idle: int) -> None:
        """Stop a feed nobody has watched since it went idle (its history goes with it)."""
        if feed.watches or feed.idle != idle or self.feeds.get(feed.key) is not feed:
            return
        del self.feeds[feed.key]
        if self.idle.pop(feed.key, None) is not None:
            self.idle_bytes -= feed.held
        for alias in feed.aliases:
            self.aliases.pop(alias, None)
        if feed.subscription is not None:
            self.db.unsubscribe(feed.subscription)
        feed.release()

    def shutdown(self) -> None:
        for session in list(self.sessions.values()):
            self.close(session)
        for feed in list(self.feeds.values()):
            self._retire(feed, feed.idle)
