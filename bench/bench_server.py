"""The WebSocket server over loopback: transaction throughput and delivery latency.

Layer: bench — may import anything public from deltalog packages and peers.

One writer commits single-edge transactions as fast as the server replies while
1, 10 or 100 clients subscribe to the same query (one shared dataflow). Delivery
latency is from sending a transaction to a subscriber receiving its change.
Prints a table; asserts nothing.

    python -m bench.bench_server [--transactions 300]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench.common import percentiles, print_table
from server.client import Client, Subscription
from server.transport import DeltalogServer

PROGRAM = """
.decl edge(x: number, y: number)
.decl out(x: number, y: number)
out(x, y) :- edge(x, y), x < y.
"""


async def _listen(
    sub: Subscription, sent: dict[int, float], latencies: list[float], n: int
) -> None:
    """Record, for every change, the time since its transaction's epoch was sent."""
    seen = 0
    async for change in sub:
        if change.snapshot:
            continue
        arrived = time.perf_counter()
        for x, _ in change.rows:
            latencies.append(arrived - sent[x])
        seen += len(change.rows)
        if seen >= n:
            return


async def measure(subscribers: int, transactions: int) -> list[object]:
    server = DeltalogServer(port=0)
    await server.start()
    try:
        writer = await Client.connect(server.url)
        await writer.define(PROGRAM)
        clients = [await Client.connect(server.url) for _ in range(subscribers)]
        subs = [await c.subscribe("out(x, y)") for c in clients]
        sent: dict[int, float] = {}
        latencies: list[float] = []
        listeners = [asyncio.create_task(_listen(s, sent, latencies, transactions)) for s in subs]
        start = time.perf_counter()
        for i in range(transactions):
            sent[i] = time.perf_counter()
            await writer.transact({"edge": [(i, i + 1)]})
        committed = time.perf_counter() - start
        await asyncio.wait_for(asyncio.gather(*listeners), 120)
        delivered = time.perf_counter() - start
        for client in [writer, *clients]:
            await client.close()
    finally:
        await server.stop()
    p = percentiles([x * 1000 for x in latencies])
    return [subscribers, transactions, round(transactions / committed),
            round(transactions * subscribers / delivered), round(p["p50"], 2),
            round(p["p99"], 2)]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=300)
    args = parser.parse_args()
    rows = [asyncio.run(measure(n, args.transactions)) for n in (1, 10, 100)]
    headers = ["subscribers", "transactions", "tx/s", "changes delivered/s",
               "latency p50 ms", "latency p99 ms"]  # fmt: skip
    print_table(rows, headers)


if __name__ == "__main__":
    main()
