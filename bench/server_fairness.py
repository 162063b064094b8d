"""`bench_server --fairness`: what one client's heavy requests cost everyone else.

Layer: bench — may import anything public from deltalog packages and peers.

A `deltalog serve` process (its own process, so the clients here do not share its
event loop); one client sends heavy requests back to back (a recursion that never
ends, a 10k x 10k cross product, a ReDoS regular expression over a 34-character
symbol, a 2 MB definition of nested parentheses, a subscription that never ends)
while others run the usual mix: pings, small queries, one-fact commits and
subscribers that receive every commit's change. Reports the others' round trips and
delivery delays (first without the heavy client, then with it), how long each heavy
request took against the budget, how long SIGTERM takes whatever runs, and the
server's RSS around 1,000 distinct lingering queries and a failed cross product.
Asserts nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import percentiles, print_table
from server.client import Client, ServerError, Subscription

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = """
.decl edge(x: number, y: number)
.decl out(x: number, y: number)
out(x, y) :- edge(x, y), x < y.
.decl small(x: number)
.decl inf(x: number)
inf(0).
inf(x + 1) :- inf(x).
.decl big(x: number)
.decl s(x: symbol)
.decl p(k: number, v: number)
"""
HUGE_DEFINE = ".decl h(x: number)\nh(" + "(" * 1_000_000 + "1" + ")" * 1_000_000 + ")."
HEAVY: dict[str, tuple[str, dict[str, object]]] = {
    "runaway recursion": ("query", {"text": "inf(x), x < 0"}),
    "10k x 10k cross product": ("query", {"text": "big(x), big(y)"}),
    'ReDoS match("(a|a)+b", x)': ("query", {"text": 's(x), match("(a|a)+b", x)'}),
    "2 MB nested define": ("define", {"text": HUGE_DEFINE}),
    "runaway subscription": ("subscribe", {"text": "inf(x)"}),
}
PACE = 0.05  # seconds each of the others waits between two requests


@dataclass
class Samples:
    """Milliseconds by kind (`ping`, `query`, `commit`, `delivery`)."""

    ms: dict[str, list[float]] = field(default_factory=dict)

    def add(self, kind: str, seconds: float) -> None:
        self.ms.setdefault(kind, []).append(seconds * 1000)

    def rows(self, phase: str) -> list[list[object]]:
        rows: list[list[object]] = []
        for kind, values in self.ms.items():
            p = percentiles(values)
            rows.append([phase, kind, len(values), *(_ms(p[k]) for k in ("p50", "p99", "max"))])
        return rows


def _ms(value: float) -> float | int:
    """Milliseconds as the table shows them: whole ones past 100 (no exponent)."""
    return round(value) if value >= 100 else round(value, 1)


@contextlib.contextmanager
def serving(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A `deltalog serve` process and its URL (from its `ready` line); killed at the end."""
    command = [sys.executable, "-m", "datalog.cli", "serve", "--port", "0", *args]
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("ready "):
            raise RuntimeError(f"the server did not start: {line!r}")
        yield process, line.split()[1]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def load(url: str) -> None:
    async with Client.connect(url) as client:
        await client.define(PROGRAM)
        await client.transact({
            "small": [(i,) for i in range(10)], "big": [(i,) for i in range(10_000)],
            "s": [("a" * 34,)],
        })  # fmt: skip
        for part in range(0, 1000, 100):  # in parts: each a commit well within the budget
            rows = [(k, v) for k in range(part, part + 100) for v in range(300)]
            await client.transact({"p": rows})


async def _others(url: str, samples: Samples, seconds: float, subscribers: int,
                  connected: asyncio.Event) -> None:  # fmt: skip
    """The usual mix for `seconds` once everyone is connected (then `connected` is set):
    a pinger, a querier, a committer, subscribers, and a new connection every second."""
    clients = [await Client.connect(url) for _ in range(3 + subscribers)]
    pinger, querier, committer, *watchers = clients
    subs = [await w.subscribe("out(x, y)") for w in watchers]
    sent: dict[int, float] = {}
    base = int(time.time() * 1000) % 1_000_000_000 * 1000  # fresh edges every run
    until = time.monotonic() + seconds
    connected.set()

    async def repeat(action: Callable[[], Awaitable[object]], kind: str, pace: float) -> None:
        while time.monotonic() < until:
            started = time.monotonic()
            await action()
            samples.add(kind, time.monotonic() - started)
            await asyncio.sleep(pace)

    async def commit() -> None:
        x = base + len(sent)
        sent[x] = time.monotonic()
        await committer.transact({"edge": [(x, x + 1)]})

    async def connect() -> None:
        async with Client.connect(url) as client:
            await client.ping()

    async def listen(sub: Subscription) -> None:
        with contextlib.suppress(ServerError, asyncio.CancelledError):
            async for change in sub:
                arrived = time.monotonic()
                for x, _ in change.rows if not change.snapshot else ():
                    samples.add("delivery", arrived - sent[x])

    listening = [asyncio.ensure_future(listen(s)) for s in subs]
    await asyncio.gather(
        repeat(pinger.ping, "ping", PACE),
        repeat(lambda: querier.query("small(x), x < 5"), "small query", PACE),
        repeat(commit, "one-fact commit", PACE),
        repeat(connect, "connect and ping", 1.0),
    )
    await pinger.ping()  # every delivery of the last commit has arrived
    await asyncio.sleep(0.2)
    for task in listening:
        task.cancel()
    for client in clients:
        await client.close()


async def _heavy(url: str, until: float, budget: float) -> list[list[object]]:
    """Heavy requests back to back until `until`: (kind, count, median and max
    seconds, how many ended within 1.5 times the budget)."""
    took: dict[str, list[float]] = {kind: [] for kind in HEAVY}
    async with Client.connect(url, max_size=None) as client:
        while time.monotonic() < until:
            for kind, (request, fields) in HEAVY.items():
                started = time.monotonic()
                with contextlib.suppress(ServerError):
                    await client.request(request, **fields)
                took[kind].append(time.monotonic() - started)
    rows: list[list[object]] = []
    for kind, seconds in took.items():
        if seconds:
            p = percentiles(seconds)
            within = sum(s <= 1.5 * budget for s in seconds)
            rows.append([kind, len(seconds), round(p["p50"], 2), round(p["max"], 2),
                         f"{within}/{len(seconds)}"])  # fmt: skip
    return rows


async def mix(url: str, seconds: float, budget: float, heavy: bool, subscribers: int
              ) -> tuple[Samples, list[list[object]]]:  # fmt: skip
    samples = Samples()
    connected = asyncio.Event()
    others = asyncio.ensure_future(_others(url, samples, seconds, subscribers, connected))
    await connected.wait()
    if not heavy:
        await others
        return samples, []
    _, rows = await asyncio.gather(others, _heavy(url, time.monotonic() + seconds, budget))
    return samples, rows


async def sigterm_during(process: subprocess.Popen[str], url: str, kind: str) -> float:
    """Seconds from SIGTERM to the server's exit while `kind` (a heavy request, a
    runaway commit, or nothing) runs."""
    async with Client.connect(url, max_size=None) as client:
        running: asyncio.Future[Any] | None = None
        if kind == "runaway commit":
            await (await client.subscribe("cnt(x)")).next(5)
            running = asyncio.ensure_future(client.transact({"go": [()]}))
        elif kind in HEAVY:
            request, fields = HEAVY[kind]
            running = asyncio.ensure_future(client.request(request, **fields))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):  # reported as more than 30 s
            await asyncio.to_thread(process.wait, 30)
        stopped = time.monotonic() - started
        process.kill()
        if running is not None:
            with contextlib.suppress(ServerError, asyncio.CancelledError, ConnectionError):
                await running
    return stopped


RUNAWAY_COMMIT = ".decl cnt(x: number)\n.decl go()\ncnt(0).\ncnt(x + 1) :- cnt(x), go()."


def sigterm_rows(args: list[str]) -> list[list[object]]:
    rows: list[list[object]] = []
    for kind in ["nothing", *HEAVY, "runaway commit"]:
        with serving(*args) as (process, url):
            asyncio.run(load(url))
            asyncio.run(_define(url, RUNAWAY_COMMIT))
            rows.append([kind, round(asyncio.run(sigterm_during(process, url, kind)), 2)])
    return rows


async def _define(url: str, text: str) -> None:
    async with Client.connect(url) as client:
        await client.define(text)


async def lingering(url: str, queries: list[str]) -> None:
    """Subscribe to each query in turn, leaving it at once."""
    async with Client.connect(url, max_size=None) as client:
        for query in queries:
            sub = await client.subscribe(query)
            await sub.unsubscribe()


async def cross_product(url: str) -> str:
    async with Client.connect(url, max_size=None) as client:
        try:
            await client.query("big(x), big(y)")
        except ServerError as error:
            return error.message[:60]
    return "answered"


LINGERING = {  # distinct queries subscribed to and left, one after the other
    "1,000 distinct lingering queries (300 rows)": [f"p({k}, v)" for k in range(1000)],
    "100 distinct lingering queries (3k-300k rows)": [
        f"p(k, v), k >= {k}" for k in range(0, 1000, 10)
    ],
}


def memory_rows(args: list[str]) -> list[list[object]]:
    rows: list[list[object]] = []
    with serving(*args) as (process, url):
        asyncio.run(load(url))
        for name, queries in LINGERING.items():
            before = rss_mb(process.pid)
            asyncio.run(lingering(url, queries))
            after = rss_mb(process.pid)
            rows.append([name, round(before), round(after), round(after / before, 2), ""])
        before = rss_mb(process.pid)
        outcome = asyncio.run(cross_product(url))
        after = rss_mb(process.pid)
        rows.append(["a failed 10k x 10k cross product", round(before), round(after),
                     round(after / before, 2), outcome])  # fmt: skip
    return rows


PARTS = ("mix", "sigterm", "memory")


def fairness(seconds: float, budget: float, subscribers: int, extra: list[str],
             parts: tuple[str, ...] = PARTS) -> None:  # fmt: skip
    args = ["--budget", str(budget), *extra]
    print(f"load average {os.getloadavg()[0]:.1f}; deltalog serve {' '.join(args)}\n")
    if "mix" in parts:
        with serving(*args) as (_, url):
            asyncio.run(load(url))
            quiet, _ = asyncio.run(mix(url, seconds / 3, budget, False, subscribers))
            busy, heavy = asyncio.run(mix(url, seconds, budget, True, subscribers))
        headers = ["phase", "others' request", "count", "p50 ms", "p99 ms", "max ms"]
        print_table(quiet.rows("quiet") + busy.rows("heavy client"), headers)
        print()
        print_table(heavy, ["heavy request", "count", "p50 s", "max s", "within 1.5x budget"])
        print()
    if "sigterm" in parts:
        print_table(sigterm_rows(args), ["running at SIGTERM", "seconds to exit"])
        print()
    if "memory" in parts:
        memory = memory_rows(args)
        print_table(memory, ["server RSS", "before MB", "after MB", "ratio", "outcome"])
