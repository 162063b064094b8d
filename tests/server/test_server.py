"""A real server on loopback: many clients, resume, granularity, auth, slow clients."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from server.client import Client, ServerError, Subscription
from server.feeds import HistoryLimits
from server.transport import DeltalogServer, Limits
from tests.server.helpers import GRAPH, History, View, closure, run

pytestmark = pytest.mark.server
ROOT = Path(__file__).resolve().parents[2]


async def _drain(sub: Subscription, view: View) -> None:
    """Apply every change already delivered (the caller pinged first)."""
    while not sub.queue.empty():
        view.apply(await sub.next(1))


def test_errors_are_replied_and_the_connection_goes_on() -> None:
    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(GRAPH)
        with pytest.raises(ServerError) as caught:
            await client.define("reach(x, y) :- edge(x, y), edg(y, z).")
        assert (caught.value.category, caught.value.line, caught.value.column) == (
            "not_found", 1, 28)  # fmt: skip
        with pytest.raises(ServerError, match="unsupported"):
            await client.request("frobnicate")
        await client.ws.send("{oops")
        await client.ws.send(b"\x00binary")
        assert await client.transact(inserts={"edge": [(1, 2)]}) > 0
        assert await client.query("reach(1, y)") == [(2,)]
        assert "shared arrangements" in await client.explain("reach(1, y)")
        assert "-- after pass 5: choose join --" in await client.explain("reach(1, y)", passes=True)
        why = await client.why("reach(1, 2)")
        assert why["text"] == "reach(1, 2)  <- reach(x, y) :- edge(x, y).  [line 4]\n" \
            "  edge(1, 2)  (base fact)"  # fmt: skip
        assert why["derivation"]["premises"][0]["values"] == [1, 2]
        with pytest.raises(ServerError) as caught:
            await client.why("reach(2, 1)")
        assert caught.value.category == "not_found"
        then = await client.transact(inserts={"edge": [(2, 3)]})
        await client.transact(retracts={"edge": [(1, 2)]})
        assert await client.query("reach(1, y)", as_of=then) == [(2,), (3,)]
        assert (await client.why("reach(1, 3)", as_of=then))["epoch"] == then
        with pytest.raises(ServerError, match="oldest readable epoch is 1"):
            await client.query("reach(1, y)", as_of=0)
        assert (await client.stats())["server"]["sessions"] == 1
        await client.close()

    run(scenario)


def test_concurrent_clients_see_exactly_the_answer_at_every_epoch() -> None:
    queries = {"reach(x, y)": lambda e: closure(e), "reach(1, y)": lambda e: {
        (y,) for x, y in closure(e) if x == 1}}  # fmt: skip
    history = History()

    async def writer(server: DeltalogServer, seed: int) -> tuple[Client, Subscription, View]:
        rng = random.Random(seed)
        client = await Client.connect(server.url)
        sub = await client.subscribe(rng.choice(list(queries)))
        view = View()
        for _ in range(rng.randint(4, 10)):
            inserts = {(rng.randrange(8), rng.randrange(8)) for _ in range(rng.randint(1, 3))}
            retracts = {(rng.randrange(8), rng.randrange(8)) for _ in range(2)} - inserts
            epoch = await client.transact({"edge": inserts}, {"edge": retracts})
            history.record(epoch, inserts, retracts)
            # Other writers commit meanwhile, so the queue may already hold later
            # epochs; each change is checked against the history at its own epoch
            # once every writer has recorded its transactions (below).
            while not sub.queue.empty():
                change = await sub.next(1)
                view.apply(change)
                view.seen.append((change.epoch, set(view.answer)))
        if rng.random() < 0.3:  # leave early, without unsubscribing
            await client.close()
        return client, sub, view

    async def scenario(server: DeltalogServer) -> None:
        setup = await Client.connect(server.url)
        await setup.define(GRAPH)
        texts = [q for q in queries for _ in range(3)]
        watchers = [await setup.subscribe(q) for q in texts]
        writers = await asyncio.gather(*(writer(server, seed) for seed in range(16)))
        await setup.ping()
        final = server.db.epoch
        for sub, text in zip(watchers, texts, strict=True):
            view = View()
            while not sub.queue.empty():
                change = await sub.next(1)
                view.apply(change)
                assert view.answer == queries[text](history.edges_at(change.epoch)), change
        assert history.edges_at(final) == set(server.db.query("edge(x, y)"))
        for _, sub, view in writers:
            for epoch, answer in view.seen:
                assert answer == queries[sub.text](history.edges_at(epoch)), epoch
        for client, sub, view in writers:
            if client.failure is not None:  # it left early
                continue
            await client.ping()
            await _drain(sub, view)
            assert view.answer == queries[sub.text](history.edges_at(final))
            assert view.answer == set(server.db.query(sub.text))
            await client.close()
        assert (await setup.stats())["server"]["sessions"] == 1
        await setup.close()

    run(scenario)


def test_a_reconnecting_client_resumes_from_its_last_epoch() -> None:
    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(GRAPH)
        sub = await client.subscribe("reach(1, y)")
        view = View()
        view.apply(await sub.next(1))
        await client.transact({"edge": [(1, 2)]})
        view.apply(await sub.next(1))
        await client.close()
        other = await Client.connect(server.url)
        await other.transact({"edge": [(2, 3), (3, 4)]})
        await other.transact(retracts={"edge": [(1, 2)]}, inserts={"edge": [(1, 3)]})
        again = await Client.connect(server.url)
        resumed = await again.resume(sub)
        change = await resumed.next(1)
        assert resumed.resumed and not change.snapshot
        assert sorted(zip(change.rows, change.diffs, strict=True)) == [
            ((2,), -1),
            ((3,), 1),
            ((4,), 1),
        ]
        view.apply(change)
        assert view.answer == set(await again.query("reach(1, y)"))
        for _ in range(5):  # more epochs than the history keeps
            await other.transact({"edge": [(1, 9)]})
            await other.transact(retracts={"edge": [(1, 9)]})
        late = await again.subscribe("reach(1, y)", resume_from=view.epoch,
                                     instance=resumed.instance)  # fmt: skip
        snapshot = await late.next(1)
        assert snapshot.snapshot and late.resumed is False and late.reason == "history compacted"
        assert set(snapshot.rows) == view.answer
        for c in (other, again):
            await c.close()

    run(scenario, history=HistoryLimits(epochs=4, linger=5.0))


def test_granularity_delivers_consolidated_changes_at_most_every_n_epochs_or_s_seconds() -> None:
    """End to end over a socket: what arrives, in which epochs and how consolidated.
    When the seconds bound lets a change go is the pacing policy's own business,
    tested with a driven clock (tests/server/test_protocol.py, test_live_queries.py);
    here nothing is asserted about wall-clock gaps."""

    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(GRAPH)
        by_epochs = await client.subscribe("edge(x, y)", granularity={"epochs": 4})
        by_time = await client.subscribe("edge(x, y)", granularity={"seconds": 0.3})
        history = History()
        for i in range(12):
            epoch = await client.transact({"edge": [(i, i)]}, {"edge": [(i - 1, i - 1)]})
            history.record(epoch, [(i, i)], [(i - 1, i - 1)])
            await asyncio.sleep(0.05)
        timed = [await by_time.next(10)]  # the snapshot
        while timed[-1].epoch < epoch:  # the last commit's state comes, commit or not
            timed.append(await by_time.next(10))
        await client.ping()
        by_epochs_changes = []
        while not by_epochs.queue.empty():
            by_epochs_changes.append(await by_epochs.next(1))
        for changes, gap in ((by_epochs_changes, 4), (timed, 1)):
            view, epochs = View(), []
            for change in changes:
                view.apply(change)
                epochs.append(change.epoch)
                assert view.answer == history.edges_at(change.epoch)
                assert len(change.rows) <= 2  # consolidated: one in, one out at most
            assert all(b - a >= gap for a, b in itertools.pairwise(epochs))
        assert [c.epoch for c in by_epochs_changes[1:]] == [
            by_epochs_changes[0].epoch + 4 * k for k in (1, 2, 3)
        ]
        await client.close()

    run(scenario)


def test_a_seconds_granularity_holds_a_change_at_most_s_seconds_without_another_commit() -> None:
    """The bound from above: after a burst of commits and then none, the consolidated
    change still arrives, not at some later commit (without the timer nothing would
    arrive at all). How long it waits is tested with a driven clock."""

    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(GRAPH)
        sub = await client.subscribe("edge(x, y)", granularity={"seconds": 0.5})
        await sub.next(1)  # the snapshot
        await client.transact({"edge": [(1, 2), (2, 3)]})
        await client.transact({"edge": [(3, 4)]}, {"edge": [(1, 2)]})  # (1, 2) cancels out
        epoch = await client.ping()
        change = await sub.next(10)
        assert change.epoch == epoch
        assert sorted(zip(change.rows, change.diffs, strict=True)) == [((2, 3), 1), ((3, 4), 1)]
        await client.transact({"edge": [(5, 6)]})  # just delivered: this one waits its turn
        change = await sub.next(10)
        assert change.rows == [(5, 6)] and change.diffs == [1]
        await client.close()

    run(scenario)


def test_a_redefinition_reaches_every_client_at_one_epoch_and_resume_stays_exact() -> None:
    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(GRAPH)
        await client.transact({"edge": [(1, 2), (2, 3), (3, 4)]})
        watcher = await Client.connect(server.url)
        sub = await watcher.subscribe("reach(1, y)")
        view = View()
        view.apply(await sub.next(1))
        epoch = await client.redefine("reach", "reach(x, y) :- edge(x, y).")
        change = await sub.next(1)
        assert change.epoch == epoch == view.epoch + 1
        view.apply(change)
        assert view.answer == {(2,)} == set(await client.query("reach(1, y)"))
        await watcher.close()  # away while the rules change twice more, with data
        await client.transact({"edge": [(2, 5)]}, redefine={"reach": GRAPH.split("\n", 3)[3]})
        await client.redefine("reach", "reach(x, y) :- edge(y, x).", inserts={"edge": [(9, 1)]})
        again = await Client.connect(server.url)
        resumed = await again.resume(sub)
        change = await resumed.next(1)
        assert resumed.resumed and change.epoch == await again.ping()
        view.apply(change)
        assert view.answer == {(9,)} == set(await again.query("reach(1, y)"))
        with pytest.raises(ServerError) as caught:
            await client.redefine("reach", "edge(x, y) :- reach(x, y).")
        assert caught.value.category == "incorrect" and caught.value.line == 1
        for c in (client, again):
            await c.close()

    run(scenario)


def test_with_a_token_nothing_is_served_before_auth() -> None:
    async def scenario(server: DeltalogServer) -> None:
        async with connect(server.url) as ws:
            await ws.send(json.dumps({"type": "query", "id": 1, "text": "edge(x, y)"}))
            reply = json.loads(await ws.recv())
            assert reply["error"]["message"].startswith("authentication required")
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 1008
        for garbage in ("{not json", b"\x00\x01", json.dumps({"type": "auth", "id": 2})):
            async with connect(server.url) as ws:  # malformed before auth: closed too
                await ws.send(garbage)
                assert json.loads(await ws.recv())["type"] == "error"
                with pytest.raises(ConnectionClosed):
                    await ws.recv()
                assert ws.close_code == 1008
        with pytest.raises(ServerError, match="wrong token"):
            await Client.connect(server.url, token="guess")
        async with connect(server.url) as idle:  # says nothing: closed after the timeout
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(idle.recv(), 5)
        client = await Client.connect(server.url, token="s3cret")
        assert await client.ping() >= 0
        await client.close()

    run(scenario, token="s3cret", limits=Limits(auth_timeout=0.5))


def _garbage(rng: random.Random) -> str | bytes:
    kinds = ["define", "transact", "query", "subscribe", "unsubscribe", "explain", "stats",
             "ping", "auth", "why", "nope", 7, None]  # fmt: skip
    values = [None, True, -1, 2**70, 1.5, "x", [], {}, [[1]], [["a", "b"]], {"edge": [[1]]},
              {"edge": [["a", 1]]}, {"edge": 5}, {"nope": [[1, 2]]}, "edge(x, y", "reach(x)",
              ".decl", "reach(1, y) :- edg(1, y).", {"epochs": "2"}, "\udcff"]  # fmt: skip
    roll = rng.random()
    if roll < 0.15:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
    if roll < 0.3:
        return "".join(chr(rng.randrange(32, 0x2FF)) for _ in range(rng.randrange(60)))
    message = {"type": rng.choice(kinds), "id": rng.choice([1, "a", None, [2]])}
    for field in rng.sample(["text", "inserts", "retracts", "plan", "granularity",
                             "resume_from", "subscription", "token", "fact"], 3):  # fmt: skip
        message[field] = rng.choice(values)
    text = json.dumps(message)
    return text[: rng.randrange(len(text) + 1)] if roll > 0.9 else text


def test_fuzzed_messages_are_answered_and_lose_no_data() -> None:
    async def scenario(server: DeltalogServer) -> None:
        keeper = await Client.connect(server.url)
        await keeper.define(GRAPH)
        await keeper.transact({"edge": [(1, 2), (2, 3)]})
        sub = await keeper.subscribe("reach(x, y)")
        before = sorted(await keeper.query("reach(x, y)"))
        rng = random.Random(6262)
        deadline = time.monotonic() + 20

        async def fuzz(n: int) -> None:
            async with connect(server.url, max_size=None) as ws:
                for _ in range(n):
                    await ws.send(_garbage(rng))
                    if time.monotonic() > deadline:
                        break
                await ws.send(json.dumps({"type": "ping", "id": "last"}))
                while json.loads(await ws.recv()).get("id") != "last":
                    pass

        await asyncio.gather(*(fuzz(750) for _ in range(4)))
        await keeper.ping()
        assert sorted(await keeper.query("reach(x, y)")) == before
        assert (await sub.next(1)).snapshot and sub.queue.empty()
        await keeper.transact({"edge": [(3, 4)]})
        change = await sub.next(2)
        assert sorted(change.rows) == [(1, 4), (2, 4), (3, 4)]
        await keeper.close()

    run(scenario, timeout=45)


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param(Limits(outbox=20, abort_after=0.5), id="by-messages"),
        pytest.param(Limits(outbox=10**6, outbox_bytes=500_000, abort_after=0.5), id="by-bytes"),
    ],
)
def test_a_slow_client_is_dropped_without_stalling_anyone(limits: Limits) -> None:
    async def scenario(server: DeltalogServer) -> None:
        fast = await Client.connect(server.url)
        await fast.define(".decl big(i: number, pad: symbol)")
        fast_sub = await fast.subscribe("big(i, pad)")
        slow = await connect(server.url, max_queue=1)  # never reads after subscribing
        await slow.send(json.dumps({"type": "subscribe", "id": 1, "text": "big(i, pad)"}))
        await asyncio.sleep(0.1)
        pad = "x" * 2000
        for epoch in range(300):  # every one answered although `slow` never reads
            rows = [(epoch * 50 + k, pad) for k in range(50)]
            await fast.transact({"big": rows})
        await fast.ping()
        received = 0
        while not fast_sub.queue.empty():
            received += len((await fast_sub.next(1)).rows)
        assert received == 300 * 50
        # the slow one is dropped: closing it may take the abort delay, so wait (bounded)
        deadline = time.monotonic() + 10
        while (await fast.stats())["server"]["sessions"] != 1:
            assert time.monotonic() < deadline, "the slow client was never dropped"
            await asyncio.sleep(0.1)
        with pytest.raises(ConnectionClosed):
            while True:
                await asyncio.wait_for(slow.recv(), 5)
        await fast.close()

    run(scenario, limits=limits)


def test_a_client_that_falls_behind_gets_every_message_in_order() -> None:
    """Messages written at once while a client keeps up, queued while it lags, and
    written at once again after it caught up, arrive in the order they were sent."""

    async def scenario(server: DeltalogServer) -> None:
        writer = await Client.connect(server.url)
        await writer.define(".decl big(i: number, pad: symbol)")
        lagging = await connect(server.url, max_queue=1)  # reads nothing for a while
        await lagging.send(json.dumps({"type": "subscribe", "id": 1, "text": "big(i, pad)"}))
        assert json.loads(await lagging.recv())["type"] == "snapshot"
        pad = "x" * 2000
        epochs = [
            await writer.transact({"big": [(e * 50 + k, pad) for k in range(50)]})
            for e in range(100)  # 10 MB: more than the socket buffers hold
        ]
        await lagging.send(json.dumps({"type": "ping", "id": 2}))
        messages = [json.loads(await asyncio.wait_for(lagging.recv(), 5)) for _ in epochs]
        assert [m["epoch"] for m in messages] == epochs
        assert json.loads(await asyncio.wait_for(lagging.recv(), 5))["type"] == "pong"
        epochs.append(await writer.transact({"big": [(-1, pad)]}))  # caught up: at once
        assert json.loads(await asyncio.wait_for(lagging.recv(), 5))["epoch"] == epochs[-1]
        await lagging.close()
        await writer.close()

    run(scenario)


@contextlib.contextmanager
def _deltalog_serve(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A `deltalog serve` process on a free port, and its URL; killed at the end."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "datalog.cli", "serve", "--port", "0", *args],
        cwd=ROOT, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        while "deltalog serving on" not in line:
            line = process.stderr.readline()
        yield process, line.split(" on ")[1].split(" ")[0]
    finally:
        process.kill()
        process.wait()
        if process.stderr is not None:
            process.stderr.close()


def test_deltalog_serve_stops_gracefully_on_sigterm() -> None:
    with _deltalog_serve() as (process, url):

        async def talk() -> None:
            client = await Client.connect(url)
            assert await client.ping() >= 0
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(client.reader, 10)
            assert client.ws.close_code == 1001

        asyncio.run(talk())
        assert process.wait(10) == 0


def test_lingering_feeds_are_capped() -> None:
    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(".decl e(x: number, y: number)")
        for k in range(30):
            sub = await client.subscribe(f"e({k}, y)")
            await sub.unsubscribe()
        feeds = (await client.stats())["server"]["feeds"]
        assert len(feeds) == 10  # the 10 newest; the others stopped at once, not after 60 s
        assert len(server.db.live) == 10
        await client.close()

    run(scenario, history=HistoryLimits(lingering=10))


RUNAWAY = """
.decl cnt(x: number)
.decl go()
cnt(0).
cnt(x + 1) :- cnt(x), go().
"""


def test_a_runaway_request_is_stopped_by_its_budget_and_changes_nothing() -> None:
    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(RUNAWAY)
        sub = await client.subscribe("cnt(x)")
        assert (await sub.next(2)).rows == [(0,)]
        other = await Client.connect(server.url)
        with pytest.raises(ServerError, match="budget") as caught:
            await client.transact({"go": [()]})  # every commit step derives one more
        assert caught.value.category == "incorrect"
        assert await other.query("go()") == []  # nothing of it was applied
        await other.define(".decl inf(x: number)\ninf(0).\ninf(x + 1) :- inf(x).")
        with pytest.raises(ServerError, match="budget"):
            await other.query("inf(x), x < 0")  # a one-shot runaway query, likewise
        await client.define(".decl e(x: number)")
        await client.transact({"e": [(1,)]})
        assert await other.query("e(x)") == [(1,)]
        assert sub.queue.empty()  # the subscription saw nothing of the stopped commit
        await client.close()
        await other.close()

    run(scenario, history=HistoryLimits(seconds=0.5))


def test_an_answer_larger_than_the_limit_is_refused_clearly() -> None:
    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(".decl e(x: number)")
        await client.transact({"e": [(i,) for i in range(20)]})
        with pytest.raises(ServerError, match="20 rows, more than"):
            await client.query("e(x)")
        with pytest.raises(ServerError, match="20 rows, more than"):
            await client.subscribe("e(x)")
        assert await client.query("e(x), x < 5") != []
        await client.close()

    run(scenario, history=HistoryLimits(answer_rows=10))


def test_sigterm_stops_the_server_even_during_a_runaway_computation(tmp_path: Path) -> None:
    program = tmp_path / "runaway.dl"
    program.write_text(RUNAWAY + "go().\n")  # every step derives one more: never ends
    with _deltalog_serve("--budget", "0", "--program", str(program)) as (process, url):

        async def talk() -> None:
            async with Client.connect(url) as client:  # closed before the loop ends
                asking = asyncio.ensure_future(client.query("cnt(x)"))  # never finishes
                await asyncio.sleep(0.5)
                assert not asking.done()  # it runs (`cnt` unknown would end it at once)
                process.send_signal(signal.SIGTERM)
                with pytest.raises((ServerError, ConnectionClosed)) as ended:
                    await asyncio.wait_for(asking, 10)
                if isinstance(ended.value, ServerError):  # shutting down, or closed
                    assert ended.value.category != "not_found", ended.value

        asyncio.run(talk())
        assert process.wait(10) == 0


def test_sigterm_does_not_wait_for_a_client_that_never_answers_the_close() -> None:
    with _deltalog_serve() as (process, url):
        host, port = url.removeprefix("ws://").split(":")
        with socket.create_connection((host, int(port))) as silent:  # upgrades, then stays mute
            silent.sendall(
                f"GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n".encode()
            )
            assert silent.recv(4096).startswith(b"HTTP/1.1 101")
            process.send_signal(signal.SIGTERM)
            assert process.wait(8) == 0  # the close timeout, before websockets' own 10 s


def test_the_client_is_an_async_context_that_closes_itself() -> None:
    async def scenario(server: DeltalogServer) -> None:
        async with Client.connect(server.url) as client:
            assert await client.ping() >= 0
        assert client.ws.close_code is not None

    run(scenario)
