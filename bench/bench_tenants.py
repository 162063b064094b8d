"""Figure 9 of 3DF's thesis (section 10.3): sharing among clients whose queries differ
only in constants.

Protocol, per simulated second: 500 new `edge` tuples, 10 new clients each
subscribing `out(k, y)` with its own `k`, and the epoch closed; we time each
second's work (the commit plus the new subscriptions). Three modes:

- (a) one dataflow per client, nothing shared. Deltalog always shares the base
  arrangements of one database among its dataflows, so each client gets a private
  `Database` of its own (own `edge` relation, own arrangements, own dataflow) fed
  the same stream: a new client's database is created and loaded with every tuple
  streamed so far, then subscribes; each second's 500 tuples are inserted into
  every client's database in turn. The time is the whole second's work across all
  of them (one thread, as Deltalog runs). Its cost per second grows with the
  clients, so the total grows quadratically: once its seconds together took more
  than `--budget` seconds, (a) stops and the plot marks where.
- (b) shared arrangements only: one database, one dataflow per client over its
  shared base arrangements (multi-tenancy switched off).
- (c) multi-tenant dataflows (ADR 0022): one database, one shared dataflow, each
  client's `k` a row of its parameter relation.

In (a) and (b) multi-tenancy is switched off, so each client's `out(k, y)` is a
dataflow of its own, specialized to its constant by magic sets. Writes
docs/benchmarks/tenants.md and tenants.png.

    python -m bench.bench_tenants [--seconds 30] [--budget 10]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from datalog.db.database import Database

PROGRAM = """
.decl edge(a: number, b: number)
.decl out(a: number, b: number)
out(x, y) :- edge(x, z), edge(z, y).
"""
NODES = 2000
MODES = {
    "private": "(a) one dataflow per client, nothing shared",
    "shared": "(b) shared arrangements only",
    "tenants": "(c) multi-tenant dataflow",
}


def _database(tenants: bool) -> Database:
    db = Database()
    db.define(PROGRAM)
    if not tenants:  # every `out(k, y)` builds a dataflow of its own
        db.queries.tenants.enabled = False
    return db


def run(
    mode: str, seconds: int, budget: float = float("inf"), rate: int = 500, clients: int = 10
) -> list[float]:
    """Seconds to close each simulated second's epoch; mode "private" stops once its
    epochs together took longer than `budget` (so the list may be shorter)."""
    rng = np.random.default_rng(7)
    shared = _database(tenants=mode == "tenants")
    private: list[Database] = []  # mode (a): one database per client
    streamed: list[np.ndarray] = []
    times: list[float] = []
    next_client = 0
    for _ in range(seconds):
        rows = rng.integers(0, NODES, size=(rate, 2))
        streamed.append(rows)
        start = time.perf_counter()
        if mode == "private":
            for db in private:
                db.insert("edge", rows)
            for _ in range(clients):
                db = _database(tenants=False)
                db.insert("edge", np.concatenate(streamed))
                db.subscribe(f"out({next_client}, y)", lambda change: None)
                private.append(db)
                next_client += 1
        else:
            shared.insert("edge", rows)
            for _ in range(clients):
                shared.subscribe(f"out({next_client}, y)", lambda change: None)
                next_client += 1
        times.append(time.perf_counter() - start)
        if mode == "private" and sum(times) > budget:
            break
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--budget", type=float, default=10.0, help="seconds (a) may take")
    parser.add_argument("--out", default="docs/benchmarks")
    args = parser.parse_args()
    load = os.getloadavg()[0]  # other processes on the machine skew the timings
    results = {mode: run(mode, args.seconds, args.budget) for mode in MODES}
    out = Path(args.out)
    cut = len(results["private"]) < args.seconds
    lines = [
        "# Multi-tenant dataflows (thesis figure 9 protocol)",
        "",
        "500 `edge` tuples and 10 new `out(k, y)` clients per epoch; seconds to close "
        "each epoch (the commit and the new subscriptions). (a) one dataflow per client "
        "with nothing shared: each client has a private `Database` (own `edge` relation "
        "and arrangements) loaded with the stream so far and fed every new tuple; the "
        "time is all of them together. (b) one dataflow per client over one database's "
        "shared arrangements; (c) one multi-tenant dataflow. Multi-tenancy is off in (a) "
        "and (b). One run, one thread; single spikes are other processes or garbage "
        f"collection (load average {load:.1f} on {os.cpu_count()} cores at the start). "
        f"`python -m bench.bench_tenants --seconds {args.seconds} --budget {args.budget:g}`.",
        "",
    ]
    if cut:
        lines += [
            f"(a) stopped after epoch {len(results['private'])}, when its epochs together "
            f"had taken more than the {args.budget:g} s budget (—: not run).",
            "",
        ]
    lines += [
        "| epoch | clients | (a) nothing shared s | (b) shared arrangements s | "
        "(c) multi-tenant s |",
        "|---:|---:|---:|---:|---:|",
    ]
    for i in range(args.seconds):
        a = results["private"]
        cell = f"{a[i]:.3f}" if i < len(a) else "—"
        b, c = results["shared"][i], results["tenants"][i]
        lines.append(f"| {i + 1} | {10 * (i + 1)} | {cell} | {b:.3f} | {c:.3f} |")
    (out / "tenants.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    plot(results, args.seconds, args.budget, out / "tenants.png")


def plot(results: dict[str, list[float]], seconds: int, budget: float, path: Path) -> None:
    """The three curves; (a)'s cut-off a cross labelled with its budget."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for (mode, label), marker in zip(MODES.items(), "^os", strict=True):
        times = results[mode]
        line = ax.plot(range(1, len(times) + 1), times, marker=marker, markersize=3, label=label)
        if len(times) < seconds:
            color = line[0].get_color()
            ax.plot([len(times)], [times[-1]], marker="x", color=color, markersize=9)
            ax.annotate(f"stopped: {budget:g} s budget spent", (len(times), times[-1]),
                        xytext=(-8, 0), textcoords="offset points", fontsize=7,
                        ha="right", va="center", color=color)  # fmt: skip
    ax.set_xlabel("epoch (one per simulated second; +10 clients each)")
    ax.set_ylabel("seconds to close the epoch")
    ax.set_title("Figure 9 protocol: 500 tuples/s, 10 new clients/s", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
