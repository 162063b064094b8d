"""The benchmark suite: every workload on every system, side by side, cross-checked.

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.suite [--quick] [--scale F] [--only WORKLOAD] [--systems a,b]
[--out docs/benchmarks]` (or `make bench`). Each (workload, dataset, system, mode) runs
in its own process (`bench.runner`) with a timeout; its peak memory comes from
`os.wait4`, so peaks are per system. Answers of all systems that finished are compared
(sizes, and row digests for workloads with `columns`; for incremental runs also after
the retractions and at the end): any mismatch is printed loudly and the exit status is
1. A peer that cannot express a workload says why (`Peer.unsupported`), and the report
shows it. `--scale F` multiplies the size of every generated dataset by F (and leaves
out the fixed SNAP and LDBC-sample files). Writes `results.md`, `results.json` and PNG
plots to `--out` (see `bench.report` and docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.datasets import available, scaled
from bench.peers.base import PEERS, peer_class, unavailable
from bench.report import write_report
from bench.runner import MARK
from bench.workloads import WORKLOADS

__all__ = ["FULL", "QUICK", "Run", "check", "main", "run_suite"]

# (workload, dataset) pairs; sizes chosen so the full suite ends in ~15 minutes on 2 cores.
QUICK = [
    ("reach", "powerlaw-2000"),
    ("tc", "dag-5000"),
    ("triangles", "powerlaw-u-2000"),
    ("clique4", "powerlaw-u-2000"),
    *((w, "ldbc-sf0.003") for w in ("star7", "bi2", "bi11", "is1", "is2", "is3")),
]
FULL = [
    ("reach", "powerlaw-50000"),
    ("reach", "snap:p2p-Gnutella08"),
    ("tc", "dag-50000"),
    ("triangles", "powerlaw-u-50000"),
    ("triangles", "snap-u:CA-GrQc"),
    ("clique4", "powerlaw-u-20000"),
    ("clique4", "snap-u:CA-GrQc"),
    *((w, "ldbc-sf0.01") for w in ("star7", "bi2", "bi11", "is1", "is2", "is3")),
    *((w, "ldbc-sample") for w in ("star7", "bi2", "bi11", "is1", "is2", "is3")),
]
MODES = ("initial", "single", "batch")


@dataclass
class Run:
    """One measured (or refused) run; `status` is "ok", "timeout", "error: ..." etc."""

    workload: str
    dataset: str
    system: str
    mode: str
    status: str = "ok"
    wall_s: float = 0.0
    peak_mb: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Options:
    cases: list[tuple[str, str]]
    systems: list[str]
    modes: list[str]
    timeout: float
    updates: int
    batches: int
    batch: int
    recompute_budget: float


def _child(spec: dict[str, Any], timeout: float) -> tuple[str, float, float, dict[str, Any]]:
    """Run `bench.runner` on `spec`: (status, wall seconds, peak MiB, measurements)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        cmd = [sys.executable, "-m", "bench.runner", json.dumps(spec)]
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True)
        status, usage = _wait(proc, timeout)
        wall = time.perf_counter() - start
        peak = usage.ru_maxrss / 1024.0 if usage is not None else 0.0
        out.seek(0)
        err.seek(0)
        lines = [ln for ln in out.read().splitlines() if ln.startswith(MARK)]
        if status == "ok" and lines:
            data = json.loads(lines[-1][len(MARK) :])
            return data.pop("skipped", "ok"), wall, peak, data
        if status == "ok":
            tail = err.read().strip().splitlines()[-1:] or ["no result"]
            status = "error: " + tail[0][:120]
        return status, wall, peak, {}


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> tuple[str, Any]:
    """Wait for `proc` with wait4 (its own rusage); kill its process group on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = -signal.SIGKILL
            return f"timeout ({timeout:.0f} s)", usage
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode < 0:
        return f"crashed (signal {-proc.returncode})", usage
    return "ok", usage


def _spec(opts: Options, system: str, workload: str, dataset: str, mode: str) -> dict[str, Any]:
    updates = opts.updates if mode == "single" else opts.batches
    return {
        "system": system,
        "workload": workload,
        "dataset": dataset,
        "mode": mode,
        "updates": updates,
        "batch": opts.batch,
    }


def _measure(opts: Options, system: str, workload: str, dataset: str, mode: str) -> Run:
    run = Run(workload, dataset, system.partition("=")[0], mode)
    spec = _spec(opts, system, workload, dataset, mode)
    run.status, run.wall_s, run.peak_mb, run.data = _child(spec, opts.timeout)
    print(f"  {run.system:16} {mode:8} {run.status:10} {run.data.get('answer', '')}", flush=True)
    return run


def _case(opts: Options, workload: str, dataset: str) -> list[Run]:
    """Every system's runs of one (workload, dataset)."""
    print(f"{workload} on {dataset}", flush=True)
    runs: list[Run] = []
    for system in opts.systems:
        name = system.partition("=")[0]
        why = unavailable(system)
        if why is not None:
            runs.append(Run(workload, dataset, name, "initial", f"unavailable: {why}"))
            continue
        cls = peer_class(system)
        if workload in cls.unsupported:
            runs.append(
                Run(workload, dataset, name, "initial", "unsupported: " + cls.unsupported[workload])
            )
            continue
        if workload not in cls.workloads:
            continue
        first: Run | None = None
        for mode in opts.modes:
            if mode != "initial" and (not cls.incremental or not WORKLOADS[workload].stream):
                continue
            skip = _recompute_skip(opts, cls.incremental, first, mode)
            if skip:
                runs.append(Run(workload, dataset, name, mode, skip))
                continue
            runs.append(_measure(opts, system, workload, dataset, mode))
            first = first or runs[-1]
    return runs


def _recompute_skip(opts: Options, incremental: str, first: Run | None, mode: str) -> str:
    """Why a peer skips an update stream, or "": every stream starts by computing the
    initial answer, so none can end where the initial run timed out; a re-running peer
    also skips a stream whose re-runs would take too long."""
    if first is not None and first.status.startswith("timeout"):
        return "skipped: the initial run timed out"
    if incremental != "recompute" or first is None or first.status != "ok":
        return ""
    count = 2 * (opts.updates if mode == "single" else opts.batches)
    estimate = count * float(first.data.get("run_s", 0.0))
    if estimate > opts.recompute_budget:
        return f"skipped: re-runs would take ~{estimate:.0f} s"
    return ""


def check(runs: list[Run]) -> list[str]:
    """Mismatches between the answer sizes of runs of the same workload and dataset."""
    problems = []
    groups: dict[tuple[str, str, str], dict[str, object]] = {}

    def add(run: Run, stage: str, label: str, value: object) -> None:
        group = groups.setdefault((run.workload, run.dataset, stage), {})
        group[f"{run.system} {label}"] = value

    for run in (r for r in runs if r.status == "ok"):
        add(run, "answer", run.mode, run.data["answer"])
        if "digest" in run.data:
            add(run, "answer rows", run.mode, run.data["digest"])
        if "mid" in run.data:  # every incremental run also starts from the full answer
            add(run, "answer", f"{run.mode} start", run.data["initial"])
            add(run, f"after the {run.mode} retractions", "", run.data["mid"])
            if "mid_digest" in run.data:
                add(run, "answer rows", f"{run.mode} start", run.data["initial_digest"])
                add(run, f"rows after the {run.mode} retractions", "", run.data["mid_digest"])
    for (workload, dataset, stage), answers in sorted(groups.items()):
        if len(set(answers.values())) > 1:
            found = ", ".join(f"{k}={v}" for k, v in answers.items())
            what = "row digests" if "rows" in stage else "answer sizes"
            problems.append(f"{workload} on {dataset} [{stage}]: {what} differ: {found}")
    return problems


def run_suite(opts: Options) -> list[Run]:
    runs: list[Run] = []
    for workload, dataset in opts.cases:
        why = available(dataset)
        if why is not None:
            print(f"{workload} on {dataset}: dataset unavailable ({why})")
            runs.append(Run(workload, dataset, "-", "initial", f"dataset unavailable: {why}"))
            continue
        runs.extend(_case(opts, workload, dataset))
    return runs


def _options(argv: Sequence[str] | None) -> tuple[Options, Path]:
    parser = argparse.ArgumentParser(description="Deltalog next to its peers")
    parser.add_argument("--quick", action="store_true", help="tiny data, a minute or so")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply generated dataset sizes by this"
    )
    parser.add_argument("--only", action="append", choices=sorted(WORKLOADS), default=[])
    parser.add_argument("--systems", default=",".join(PEERS), help="comma-separated peers")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--timeout", type=float, help="seconds per run (30 quick, 60 full)")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"))
    args = parser.parse_args(argv)
    cases = [c for c in (QUICK if args.quick else FULL) if not args.only or c[0] in args.only]
    if args.scale != 1.0:
        cases = [(w, d) for w, d in ((w, scaled(d, args.scale)) for w, d in cases) if d]
    opts = Options(
        cases=cases,
        systems=[s for s in args.systems.split(",") if s],
        modes=[m for m in args.modes.split(",") if m],
        timeout=args.timeout or (30.0 if args.quick else 60.0),
        updates=10 if args.quick else 30,
        batches=2,
        batch=100 if args.quick else 1000,
        recompute_budget=10.0 if args.quick else 20.0,
    )
    return opts, args.out


def main(argv: Sequence[str] | None = None) -> int:
    opts, out = _options(argv)
    started = time.perf_counter()
    runs = run_suite(opts)
    problems = check(runs)
    write_report(runs, out, opts.systems, time.perf_counter() - started, problems)
    print(f"wrote {out}/results.md")
    if problems:
        print("\nMISMATCH: systems disagree on answer sizes:", file=sys.stderr)
        for problem in problems:
            print("  " + problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
