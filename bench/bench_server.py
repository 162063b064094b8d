"""The WebSocket server over loopback: transaction throughput and delivery latency.

Layer: bench — may import anything public from deltalog packages and peers.

One writer commits single-edge transactions as fast as the server replies while
1, 10 or 100 clients subscribe to the same query (one shared dataflow). Delivery
latency is from sending a transaction to a subscriber receiving its change.
Prints a table; asserts nothing.

By default the subscribers run in the server's process and event loop, so their
decoding is charged to the server's throughput (at 100 subscribers they take more
of the loop than the server does). `--subscriber-process` runs them in a process
of their own, so the table measures the server alone, at the price of a process
wake-up per change (latency compares `time.perf_counter` across the processes:
one monotonic clock on Linux); with fewer free cores than processes it measures
less. The writer always shares the server's loop: one request and one reply per
transaction, as any client has.

    python -m bench.bench_server [--transactions 300] [--subscriber-process]
    python -m bench.bench_server --fairness [--seconds 30] [--budget 5] [--subscribers 10]
                                 [--serve-args="--workers 0"] [--parts mix,sigterm,memory]

`--fairness` runs `deltalog serve` in a process of its own while one client sends
heavy requests back to back and others run the usual mix (bench/server_fairness.py).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import time
from multiprocessing.connection import Connection

from bench.common import percentiles, print_table
from server.client import Client, Subscription
from server.transport import DeltalogServer

PROGRAM = """
.decl edge(x: number, y: number)
.decl out(x: number, y: number)
out(x, y) :- edge(x, y), x < y.
"""

Arrival = tuple[int, float]  # (the transaction's number, when its change arrived)
Listening = asyncio.Future[list[Arrival]]  # every arrival, once all changes came


async def _listen(sub: Subscription, arrivals: list[Arrival], n: int) -> None:
    """Record when every change arrives, until `n` rows have come."""
    seen = 0
    async for change in sub:
        if change.snapshot:
            continue
        arrived = time.perf_counter()
        arrivals.extend((x, arrived) for x, _ in change.rows)
        seen += len(change.rows)
        if seen >= n:
            return


async def _listening(url: str, subscribers: int, n: int) -> Listening:
    """Subscribe `subscribers` clients, then listen (in this event loop)."""
    clients = [await Client.connect(url) for _ in range(subscribers)]
    subs = [await c.subscribe("out(x, y)") for c in clients]

    async def listen() -> list[Arrival]:
        arrivals: list[Arrival] = []
        await asyncio.wait_for(asyncio.gather(*(_listen(s, arrivals, n) for s in subs)), 120)
        for client in clients:
            await client.close()
        return arrivals

    return asyncio.ensure_future(listen())


def _subscribers(url: str, subscribers: int, n: int, parent: Connection) -> None:
    """The subscribers' own process: subscribe, say so, then send back every arrival."""

    async def main() -> None:
        listening = await _listening(url, subscribers, n)
        parent.send("subscribed")
        parent.send(await listening)

    asyncio.run(main())


async def _listening_apart(url: str, subscribers: int, n: int) -> Listening:
    """Subscribe and listen in another process."""
    ours, theirs = multiprocessing.Pipe()
    context = multiprocessing.get_context("spawn")
    process = context.Process(target=_subscribers, args=(url, subscribers, n, theirs))
    process.start()
    assert await asyncio.to_thread(ours.recv) == "subscribed"

    async def arrivals() -> list[Arrival]:
        received: list[Arrival] = await asyncio.to_thread(ours.recv)
        await asyncio.to_thread(process.join)
        return received

    return asyncio.ensure_future(arrivals())


async def measure(subscribers: int, transactions: int, apart: bool = False) -> list[object]:
    server = DeltalogServer(port=0)
    await server.start()
    try:
        writer = await Client.connect(server.url)
        await writer.define(PROGRAM)
        subscribe = _listening_apart if apart else _listening
        listening = await subscribe(server.url, subscribers, transactions)
        sent: dict[int, float] = {}
        start = time.perf_counter()
        for i in range(transactions):
            sent[i] = time.perf_counter()
            await writer.transact({"edge": [(i, i + 1)]})
        committed = time.perf_counter() - start
        arrivals = await listening
        await writer.close()
    finally:
        await server.stop()
    delivered = max(arrived for _, arrived in arrivals) - start
    p = percentiles([(arrived - sent[x]) * 1000 for x, arrived in arrivals])
    return [subscribers, transactions, round(transactions / committed),
            round(transactions * subscribers / delivered), round(p["p50"], 2),
            round(p["p99"], 2)]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--subscriber-process", action="store_true",
                        help="run the subscribers in a process of their own")  # fmt: skip
    parser.add_argument("--fairness", action="store_true",
                        help="others' latency while one client sends heavy requests")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=30.0, help="of the heavy phase")
    parser.add_argument("--budget", type=float, default=5.0, help="the server's --budget")
    parser.add_argument("--subscribers", type=int, default=10, help="of the fairness mix")
    parser.add_argument("--serve-args", default="", help="more options for deltalog serve")
    parser.add_argument("--parts", default="mix,sigterm,memory",
                        help="of the fairness run (comma-separated)")  # fmt: skip
    args = parser.parse_args()
    if args.fairness:
        from bench.server_fairness import fairness

        parts = tuple(args.parts.split(","))
        fairness(args.seconds, args.budget, args.subscribers, args.serve_args.split(), parts)
        return
    rows = [asyncio.run(measure(n, args.transactions, args.subscriber_process))
            for n in (1, 10, 100)]  # fmt: skip
    headers = ["subscribers", "transactions", "tx/s", "changes delivered/s",
               "latency p50 ms", "latency p99 ms"]  # fmt: skip
    print_table(rows, headers)


if __name__ == "__main__":
    main()
