"""Multi-tenant dataflows through the server (ADR 0022): WebSocket clients subscribing
`reach(k, y)` with different `k` share one dataflow, and each still receives exactly
the changes of its own answer."""

from __future__ import annotations

import asyncio
import random

import pytest

from server.client import Client, Subscription
from server.feeds import HistoryLimits
from server.transport import DeltalogServer
from tests.server.helpers import GRAPH, View, closure, run

pytestmark = pytest.mark.server
SHARED = "tenant reach(_p0, y)"
LINGER = 0.1  # seconds an unwatched feed (and its database subscription) lingers


def _reach(edges: set[tuple[int, int]], k: int) -> set[tuple[int, ...]]:
    return {(y,) for x, y in closure(edges) if x == k}


def test_clients_of_different_constants_share_one_dataflow_and_get_their_own_answers() -> None:
    async def scenario(server: DeltalogServer) -> None:
        writer = await Client.connect(server.url)
        await writer.define(GRAPH)
        await writer.transact({"edge": [(1, 2), (2, 3), (3, 1)]})
        edges = {(1, 2), (2, 3), (3, 1)}
        clients: dict[int, tuple[Client, Subscription, View]] = {}
        for k in (1, 2, 3, 4):
            client = await Client.connect(server.url)
            sub = await client.subscribe(f"reach({k}, y)")
            view = View()
            snapshot = await sub.next(1)
            assert snapshot.snapshot
            view.apply(snapshot)
            assert view.answer == _reach(edges, k)
            clients[k] = (client, sub, view)
        stats = await writer.stats()
        assert [d["name"] for d in stats["dataflows"]] == [SHARED]
        assert {q: s["subscribers"] for q, s in stats["queries"].items()} == {
            f"reach({k}, y)": 1 for k in clients
        }
        explained = await writer.explain("reach(2, y)")
        assert f"shared multi-tenant dataflow {SHARED!r} (4 parameters" in explained

        async def step(rng: random.Random) -> None:
            """One transaction; each client gets exactly its own answer's change."""
            before = {k: _reach(edges, k) for k in clients}
            inserts = {(rng.randrange(1, 7), rng.randrange(1, 7)) for _ in range(2)}
            retracts = set(rng.sample(sorted(edges), min(1, len(edges)))) - inserts
            epoch = await writer.transact({"edge": inserts}, {"edge": retracts})
            edges.difference_update(retracts)
            edges.update(inserts)
            for k, (client, sub, view) in clients.items():
                await client.ping()
                changes = []
                while not sub.queue.empty():
                    changes.append(await sub.next(1))
                after = _reach(edges, k)
                expected = {(row, 1) for row in after - before[k]}
                expected |= {(row, -1) for row in before[k] - after}
                got = {(row, d) for c in changes for row, d in zip(c.rows, c.diffs, strict=True)}
                assert got == expected, (k, epoch)
                assert [c.epoch for c in changes] == ([epoch] if expected else [])
                for change in changes:
                    view.apply(change)
                assert view.answer == after == set(server.db.query(f"reach({k}, y)"))

        rng = random.Random(15)
        for _ in range(8):
            await step(rng)
        quitter, quit_sub, _ = clients.pop(2)
        await quit_sub.unsubscribe()
        await asyncio.sleep(LINGER * 3)  # the feed outlives its watcher, then unsubscribes
        for _ in range(8):
            await step(rng)
        await quitter.ping()
        assert quit_sub.queue.qsize() == 1  # the end marker only: nothing after leaving
        stats = await writer.stats()
        assert [d["name"] for d in stats["dataflows"]] == [SHARED]
        assert sorted(stats["queries"]) == [f"reach({k}, y)" for k in (1, 3, 4)]
        params = [i for name, i in stats["inputs"].items() if name.startswith("tenant@")]
        assert [i["tuples"] for i in params] == [3]  # 2 was retracted by the next commit
        assert set(server.db.query("deltalog.dataflow(q, _, s)")) == {
            (f"reach({k}, y)", 1) for k in (1, 3, 4)
        }
        explained = await writer.explain("reach(1, y)")
        assert f"shared multi-tenant dataflow {SHARED!r} (3 parameters" in explained
        for client, _, _ in clients.values():
            await client.close()
        await quitter.close()
        await writer.close()

    run(scenario, history=HistoryLimits(linger=LINGER))
