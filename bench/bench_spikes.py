"""Where single-edge commits spike: merges, garbage collection, or the machine.

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_spikes [--updates 500] [--runs 1] [--cases reach triangles]
[--merges eager fueled] [--gc on frozen]`.

For each case (single-source reach on `powerlaw-10000`, the triangle count on
`powerlaw-u-10000`, the streams of `bench_latency`/the suite), each merge policy
(`eager`: `Tuning.merge_fuel = 0`, every merge whole when decided; `fueled`: the
default, ADR 0054; `fuel=N`: `merge_fuel = N`) and each collector setting (`on`:
Python's default; `frozen`: `gc.freeze()` after loading, as a latency-minded host
would), one process retracts
`--updates` sampled edges one commit at a time and inserts them back, and reports
per-commit wall time and thread CPU time (p50, p99, max), and for the worst commits
how much of them was the cyclic garbage collector and how much merging. Wall time
minus CPU time is time the process was not running (a shared machine).
Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.common import format_table

CASES = {"reach": ("reach", "powerlaw-10000"), "triangles": ("triangles", "powerlaw-u-10000")}


class _Meter:
    """Thread CPU seconds spent in merges and in the collector, as they happen."""

    def __init__(self) -> None:
        self.merge = 0.0
        self.gc = 0.0
        self.full_gcs = 0
        self._gc_start = 0.0
        gc.callbacks.append(self._on_gc)
        from differential.trace import fuel, spine

        whole, step = spine.merge, fuel.Merging.work

        def timed_merge(*args: Any) -> Any:
            start = time.thread_time()
            try:
                return whole(*args)
            finally:
                self.merge += time.thread_time() - start

        def timed_work(merging: Any, fuel_: int) -> int:
            start = time.thread_time()
            try:
                return step(merging, fuel_)
            finally:
                self.merge += time.thread_time() - start

        spine.merge = timed_merge  # type: ignore[assignment]
        fuel.Merging.work = timed_work  # type: ignore[method-assign,assignment]

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.thread_time()
        else:
            self.gc += time.thread_time() - self._gc_start
            self.full_gcs += info["generation"] == 2


def one(case: str, merges: str, collector: str, updates: int) -> dict[str, Any]:
    """Run one case in this process (see the module)."""
    from bench.datasets import build
    from bench.peers.deltalog_peer import DeltalogPeer
    from bench.runner import update_groups
    from bench.workloads import WORKLOADS, params
    from differential.tuning import TUNING, tuned

    workload_name, dataset = CASES[case]
    workload = WORKLOADS[workload_name]
    everything = build(dataset)
    relations = workload.select(everything)
    tuning = TUNING.but(merge_fuel=_fuel(merges, TUNING.merge_fuel))
    with tuned(tuning):
        peer = DeltalogPeer()
        peer.load(relations)
        peer.watch(workload, params(workload, everything, persons=10))
        assert workload.stream is not None
        groups = update_groups(relations[workload.stream], updates, 1)
        if collector == "frozen":
            gc.collect()
            gc.freeze()
        meter = _Meter()
        rows = []
        for insert in (False, True):
            for group in groups:
                merge0, gc0 = meter.merge, meter.gc
                wall, cpu = time.perf_counter(), time.thread_time()
                peer.apply(workload.stream, group, insert)
                cpu = time.thread_time() - cpu
                wall = time.perf_counter() - wall
                rows.append((wall, cpu, meter.gc - gc0, meter.merge - merge0))
    a = np.array(rows) * 1e3
    worst = np.argsort(a[:, 1])[::-1][:5]
    return {
        "wall": _percentiles(a[:, 0]),
        "cpu": _percentiles(a[:, 1]),
        "worst": [[round(float(x), 2) for x in a[i]] for i in worst],
        "merge_ms": float(a[:, 3].sum()),
        "gc_ms": float(a[:, 2].sum()),
        "full_gcs": meter.full_gcs,
        "commits": len(rows),
    }


def _fuel(merges: str, default: int) -> int:
    """`eager`: 0; `fueled`: the default; `fuel=N`: N."""
    if merges.startswith("fuel="):
        return int(merges.removeprefix("fuel="))
    return 0 if merges == "eager" else default


def _percentiles(ms: np.ndarray) -> list[float]:
    return [float(np.percentile(ms, 50)), float(np.percentile(ms, 99)), float(ms.max())]


def _spawn(case: str, merges: str, collector: str, updates: int) -> dict[str, Any]:
    args = [sys.executable, "-m", "bench.bench_spikes", "--one"]
    args += [json.dumps([case, merges, collector, updates])]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=500)
    parser.add_argument("--runs", type=int, default=1, help="interleaved runs (medians)")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--merges", nargs="+", default=["eager", "fueled"])
    parser.add_argument("--gc", nargs="+", default=["on", "frozen"])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(*json.loads(args.one))))
        return 0
    table = []
    for case in args.cases:
        for collector in args.gc:
            results: dict[str, list[dict[str, Any]]] = {m: [] for m in args.merges}
            for _ in range(args.runs):  # interleaved, so load drifts hit both alike
                for merges in args.merges:
                    results[merges].append(_spawn(case, merges, collector, args.updates))
            for merges, found in results.items():
                table.append(_row(case, merges, collector, found))
    print(format_table(table, HEAD))
    return 0


HEAD = [
    "case",
    "merges",
    "gc",
    "wall p50/p99/max ms",
    "cpu p50/p99/max ms",
    "merging ms",
    "gc ms (full)",
    "worst commits by cpu: cpu (gc, merge) ms",
]


def _row(case: str, merges: str, collector: str, found: list[dict[str, Any]]) -> list[object]:
    def med(key: str, i: int) -> float:
        return statistics.median(r[key][i] for r in found)

    first = found[0]
    worst = ", ".join(f"{w[1]:.1f} ({w[2]:.1f}, {w[3]:.1f})" for w in first["worst"][:3])
    return [
        f"{case} ({first['commits']} commits)",
        merges,
        collector,
        "/".join(f"{med('wall', i):.2f}" for i in range(3)),
        "/".join(f"{med('cpu', i):.2f}" for i in range(3)),
        f"{statistics.median(r['merge_ms'] for r in found):.1f}",
        f"{statistics.median(r['gc_ms'] for r in found):.1f} ({first['full_gcs']})",
        worst,
    ]


if __name__ == "__main__":
    raise SystemExit(main())
