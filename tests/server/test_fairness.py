"""Fair, preemptible service: a heavy request slows only itself (docs/adr/0038).

Nothing here measures time: each test checks an order of events, that another
client's ping, query, commit and deliveries complete while a heavy request is still
running, which on a server that computes every request to its end on the engine
thread cannot happen (they would wait for the heavy one's budget).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from datalog import Database
from server.client import Client, ServerError
from server.feeds import HistoryLimits
from server.transport import DeltalogServer, Limits
from server.workers import Workers, fork_available
from tests.server.helpers import GRAPH, run

pytestmark = pytest.mark.server
needs_fork = pytest.mark.skipif(not fork_available(), reason="workers need os.fork")

# `inf(x)` never ends: every step derives one more; `go()` makes `cnt` do the same
# inside a commit.
RUNAWAY = """
.decl inf(x: number)
inf(0).
inf(x + 1) :- inf(x).
.decl cnt(x: number)
.decl go()
cnt(0).
cnt(x + 1) :- cnt(x), go().
.decl e(x: number)
"""
LONG = HistoryLimits(seconds=60.0, slice=0.05)  # heavy requests outlast every test


async def _served_meanwhile(server: DeltalogServer, heavy: asyncio.Future[object]) -> None:
    """Another client pings, queries, commits and gets the commit's change, and a new
    client connects, all while `heavy` is still computing."""
    other = await Client.connect(server.url)
    watcher = await Client.connect(server.url)
    sub = await watcher.subscribe("e(x)")
    await sub.next(5)  # its snapshot
    assert await other.ping() >= 0
    assert await other.query("e(x)") == []
    epoch = await other.transact({"e": [(1,)]})
    change = await sub.next(5)
    assert (change.epoch, change.rows, change.diffs) == (epoch, [(1,)], [1])
    assert await other.query("e(x)") == [(1,)]
    late = await Client.connect(server.url)
    assert await late.ping() >= epoch
    assert not heavy.done(), "the heavy request ended before the others were served"
    for client in (other, watcher, late):
        await client.close()


@needs_fork
def test_others_are_served_while_a_runaway_query_computes() -> None:
    async def scenario(server: DeltalogServer) -> None:
        heavy = await Client.connect(server.url)
        await heavy.define(RUNAWAY)
        asking = asyncio.ensure_future(heavy.query("inf(x), x < 0"))
        await _served_meanwhile(server, asking)
        await server.stop()  # kills the child computing it
        with pytest.raises(ServerError):
            await asyncio.wait_for(asking, 10)

    run(scenario, history=LONG)


@needs_fork
@pytest.mark.parametrize("request_kind", ["subscribe", "transact", "define"])
def test_others_are_served_while_a_runaway_change_is_tried(request_kind: str) -> None:
    async def scenario(server: DeltalogServer) -> None:
        heavy = await Client.connect(server.url)
        await heavy.define(RUNAWAY)
        if request_kind == "subscribe":
            running = heavy.subscribe("inf(x)")
        else:  # with `cnt` live, a commit or a definition of `go()` never ends
            await (await heavy.subscribe("cnt(x)")).next(5)
            if request_kind == "transact":
                running = heavy.transact({"go": [()]})
            else:
                running = heavy.define("go().")
        attempt = asyncio.ensure_future(running)
        await _served_meanwhile(server, attempt)
        await server.stop()
        with pytest.raises(ServerError):
            await asyncio.wait_for(attempt, 10)
        assert server.db.query("go()") == []  # nothing of the runaway was applied

    run(scenario, history=LONG)


@needs_fork
def test_a_runaway_request_ends_with_its_budget_in_a_child_and_changes_nothing() -> None:
    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(RUNAWAY)
        sub = await client.subscribe("cnt(x)")
        await sub.next(5)
        for attempt in (
            client.query("inf(x), x < 0"),
            client.subscribe("inf(x)"),
            client.transact({"go": [()], "e": [(7,)]}),
        ):
            with pytest.raises(ServerError, match="budget") as caught:
                await attempt
            assert caught.value.category == "incorrect"
        assert await client.query("e(x)") == [] and await client.query("go()") == []
        assert sub.queue.empty()  # the subscription saw nothing of the stopped commit
        assert server.workers.children == set()  # every child ended and was reaped
        assert len(server.db.live) == 1  # cnt(x)'s; none left by the refused subscription
        await client.close()

    run(scenario, history=HistoryLimits(seconds=1.0, slice=0.05))


def _reference_answers(program: str, steps: list[tuple[str, dict[str, object]]]) -> list[object]:
    """What the engine thread answers with no slice (nothing goes to a child)."""
    answers: list[object] = []

    async def scenario(server: DeltalogServer) -> None:
        answers.extend(await _ask(server, program, steps))

    run(scenario, history=HistoryLimits(slice=None))
    return answers


async def _ask(
    server: DeltalogServer, program: str, steps: list[tuple[str, dict[str, object]]]
) -> list[object]:
    client = await Client.connect(server.url)
    await client.define(program)
    answers = []
    for kind, fields in steps:
        reply = await client.request(kind, **fields)
        reply.pop("id", None)
        reply.pop("instance", None)
        answers.append(reply)
    await client.close()
    return answers


STEPS: list[tuple[str, dict[str, object]]] = [
    ("transact", {"inserts": {"edge": [[i, i + 1] for i in range(40)]}}),
    ("query", {"text": "reach(0, y), y > 30"}),
    ("explain", {"text": "reach(3, y)"}),
    ("why", {"fact": "reach(0, 40)"}),
    ("subscribe", {"text": "reach(x, y), x > 35"}),
    ("transact", {"inserts": {"edge": [[40, 41]]}, "retracts": {"edge": [[0, 1]]}}),
    ("query", {"text": "reach(x, 41)"}),
    ("query", {"text": "reach(0, y)"}),
    ("define", {"text": ".decl hop(x: number, y: number)\nhop(x, z) :- edge(x, y), edge(y, z)."}),
    ("query", {"text": "hop(1, z)"}),
    ("stats", {}),
]


@needs_fork
def test_requests_done_through_a_child_answer_as_on_the_engine_and_apply_once() -> None:
    expected = _reference_answers(GRAPH, STEPS)
    through_children: list[object] = []

    async def scenario(server: DeltalogServer) -> None:
        through_children.extend(await _ask(server, GRAPH, STEPS))

    # With a slice this short, every request that checks its budget at all goes through
    # a child (reads answered there; changes tried there, then applied here once).
    run(scenario, history=HistoryLimits(slice=1e-9, probe_text=10))
    stats = [a for a in through_children if a["type"] == "stats"]  # type: ignore[index]
    assert through_children[:-1] == expected[:-1]
    assert stats and stats[0]["stats"]["epoch"] == expected[-1]["stats"]["epoch"]  # type: ignore[index]


@needs_fork
def test_a_durable_database_logs_a_change_tried_in_a_child_once(tmp_path: Path) -> None:
    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(GRAPH)
        for i in range(5):
            await client.transact({"edge": [(i, i + 1)]})
        await client.close()

    db = Database(tmp_path / "db")
    run(scenario, db=db, history=HistoryLimits(slice=1e-9, probe_text=10))
    epoch, definitions = db.epoch, len(db.definitions)
    db.close()
    again = Database(tmp_path / "db")
    assert (again.epoch, len(again.definitions)) == (epoch, definitions)
    assert sorted(again.query("edge(x, y)")) == [(i, i + 1) for i in range(5)]
    again.close()


@needs_fork
def test_a_worker_that_runs_out_of_memory_answers_so_and_the_server_goes_on() -> None:
    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(".decl n(x: number)")
        await client.transact({"n": [(i,) for i in range(3000)]})
        with pytest.raises(ServerError, match="memory") as caught:
            await client.query("n(a), n(b), n(c)")  # 27 billion rows
        assert caught.value.category == "incorrect"
        assert await client.query("n(x), x < 2") == [(0,), (1,)]
        await client.close()

    # Rows enough that no row limit refuses the product before it is built.
    history = HistoryLimits(slice=1e-9, worker_memory=64 << 20, answer_rows=10**11)
    run(scenario, history=history)


def test_without_workers_a_heavy_request_finishes_on_the_engine_thread() -> None:
    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(GRAPH + RUNAWAY)
        await client.transact({"edge": [(i, i + 1) for i in range(30)]})
        assert len(await client.query("reach(0, y)")) == 30
        with pytest.raises(ServerError, match="budget"):
            await client.query("inf(x), x < 0")
        assert server.workers.children == set()
        await client.close()

    run(scenario, history=HistoryLimits(seconds=0.5, slice=1e-9), limits=Limits(workers=0))


def test_worker_places_go_in_arrival_order_and_one_client_cannot_take_them_all() -> None:
    async def scenario() -> list[str]:
        workers = Workers(limit=2, per_client=1)
        order: list[str] = []
        release = asyncio.Event()

        async def use(client: str) -> None:
            async with workers.slot(client):
                order.append(client)
                await release.wait()

        tasks = [asyncio.ensure_future(use(c)) for c in ("a", "a", "b", "c")]
        await asyncio.sleep(0)
        assert order == ["a", "b"]  # a's second waits for a; c waits for a place
        assert workers.running == {"a": 1, "b": 1}
        release.set()
        await asyncio.gather(*tasks)
        assert workers.running == {} and not workers.waiting
        return order

    assert asyncio.run(scenario()) == ["a", "b", "a", "c"]


def test_by_default_clients_of_one_address_may_use_every_worker() -> None:
    async def scenario() -> dict[str, int]:
        workers = Workers(limit=2)  # every loopback client has the same address
        inside = asyncio.Event()

        async def use() -> None:
            async with workers.slot("127.0.0.1"):
                if workers.running == {"127.0.0.1": 2}:
                    inside.set()
                await inside.wait()

        await asyncio.wait_for(asyncio.gather(use(), use()), 10)
        return workers.running

    assert asyncio.run(scenario()) == {}
