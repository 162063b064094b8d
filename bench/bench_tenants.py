"""Figure 9 of 3DF's thesis (section 10.3): sharing among clients whose queries differ
only in constants.

Protocol, per simulated second: 500 new `edge` tuples, 10 new clients each
subscribing `out(k, y)` with its own `k`, and the epoch closed; we time each
second's work (the commit plus the subscriptions). Modes: (b) shared
arrangements only (one dataflow per client over the shared base arrangements,
multi-tenancy switched off) and (c) multi-tenant dataflows (ADR 0022). Mode
(a), shared-nothing dataflows, is not measured: Deltalog always shares base
arrangements. Writes docs/benchmarks/tenants.md and tenants.png.

    python -m bench.bench_tenants [--seconds 20]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from datalog.database import Database

PROGRAM = """
.decl edge(a: number, b: number)
.decl out(a: number, b: number)
out(x, y) :- edge(x, z), edge(z, y).
"""
NODES = 2000


def run(mode: str, seconds: int, rate: int = 500, clients: int = 10) -> list[float]:
    db = Database()
    db.define(PROGRAM)
    if mode == "shared":
        db.tenants.join = lambda *args: None  # type: ignore[method-assign]
    rng = np.random.default_rng(7)
    times = []
    next_client = 0
    for _ in range(seconds):
        rows = rng.integers(0, NODES, size=(rate, 2))
        start = time.perf_counter()
        db.insert("edge", rows)
        for _ in range(clients):
            db.subscribe(f"out({next_client}, y)", lambda change: None)
            next_client += 1
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--out", default="docs/benchmarks")
    args = parser.parse_args()
    results = {mode: run(mode, args.seconds) for mode in ("shared", "tenants")}
    out = Path(args.out)
    lines = [
        "# Multi-tenant dataflows (thesis figure 9 protocol)",
        "",
        "500 `edge` tuples and 10 new `out(k, y)` clients per epoch; seconds to close "
        "each epoch. (b) one dataflow per client over shared arrangements; (c) one "
        "multi-tenant dataflow. `python -m bench.bench_tenants`.",
        "",
        "| epoch | clients | (b) shared arrangements s | (c) multi-tenant s |",
        "|---:|---:|---:|---:|",
    ]
    for i, (b, c) in enumerate(zip(results["shared"], results["tenants"], strict=True)):
        lines.append(f"| {i + 1} | {10 * (i + 1)} | {b:.3f} | {c:.3f} |")
    (out / "tenants.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for mode, label, marker in (
        ("shared", "(b) shared arrangements", "o"),
        ("tenants", "(c) multi-tenant dataflow", "s"),
    ):
        ax.plot(range(1, args.seconds + 1), results[mode], marker=marker, label=label)
    ax.set_xlabel("epoch (one per simulated second; +10 clients each)")
    ax.set_ylabel("seconds to close the epoch")
    ax.set_title("Figure 9 protocol: 500 tuples/s, 10 new clients/s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "tenants.png", dpi=100)


if __name__ == "__main__":
    main()
