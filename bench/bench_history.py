"""What time travel costs: memory of kept epochs, commit latency and `as_of` latency.

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_history [--quick] [--write]`.

The single-edge update streams of the benchmarks (bench_latency, the runner's
`single` mode): `reach` from the biggest hub on the 100k-edge power-law graph
and the triangle query on the 10k-edge undirected one, subscribed; then 1,000
sampled edges are retracted one commit at a time and inserted back the same
way (2,000 commits). Each `Database(history=N)` setting runs in its own process
(`--one`), so peak RSS is its own. Reported per setting: the updates and bytes
(columns, times, diffs, hashes) the base relation's state trace holds at the end,
peak RSS after the stream and after the `as_of` queries, commit latency (p50,
p99), and the latency of `query_columns(q, as_of=E)` for an epoch 1, 500 and 999
commits back (history permitting) next to the first evaluation (`subscribe`).
Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import format_table, peak_rss_mb, percentiles
from bench.datasets import build
from bench.ldbc import load_database
from bench.runner import update_groups
from bench.workloads import WORKLOADS, params
from datalog import Database

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SECTION = "## Time travel (bench_history)"
MARK = "RESULT "
CASES = {"reach": "powerlaw-100000", "triangles": "powerlaw-u-10000"}
HISTORIES = (1, 1000)
BACK = (1, 500, 999)


def state_trace(db: Database, relation: str) -> tuple[int, int]:
    """(updates, bytes) the relation's state trace holds: arranged batches, and
    updates still waiting unarranged."""
    spine = db.engine.inputs[relation].presence.spine
    arrays: list[np.ndarray] = []
    for batch in spine.batches:
        arrays += [batch.hashes, *batch.columns, batch.times, batch.diffs]
    return len(spine), sum(a.nbytes for a in arrays)


def run_one(workload_name: str, history: int, updates: int) -> dict[str, Any]:
    """One setting, in this process: load, subscribe, stream, then read the past."""
    workload, dataset = WORKLOADS[workload_name], CASES[workload_name]
    relations = workload.select(build(dataset))
    p = params(workload, relations)
    db = Database(history=history)
    load_database(db, relations)
    if workload.rules(p):
        db.define(workload.rules(p))
    table = relations["e"]
    query = workload.queries(p)[0]
    start = time.perf_counter()
    db.subscribe(query, lambda change: None)
    first_s = time.perf_counter() - start
    latencies = []
    for insert in (False, True):
        for rows in update_groups(table, updates, 1):
            start = time.perf_counter()
            (db.insert if insert else db.retract)("e", rows)
            latencies.append(time.perf_counter() - start)
    kept, nbytes = state_trace(db, "e")
    stream_rss = peak_rss_mb()
    ms = percentiles(np.array(latencies) * 1e3)
    result = {"workload": workload_name, "dataset": dataset, "history": history,
              "commits": len(latencies), "kept_updates": kept, "kept_bytes": nbytes,
              "edges": table.num_rows, "first_s": first_s, "stream_rss_mb": stream_rss,
              **{f"commit_{k}_ms": v for k, v in ms.items()}}  # fmt: skip
    for back in BACK:
        epoch = db.epoch - back
        if epoch >= db.engine.oldest_readable():
            start = time.perf_counter()
            db.query_columns(query, as_of=epoch)
            result[f"as_of_{back}_s"] = time.perf_counter() - start
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def run_isolated(workload: str, history: int, updates: int) -> dict[str, Any]:
    """`run_one` in a fresh process (so its peak RSS is its own)."""
    argv = [sys.executable, "-m", "bench.bench_history", "--one", workload, str(history)]
    done = subprocess.run([*argv, "--updates", str(updates)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{workload} history={history} failed:\n{done.stderr[-2000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith(MARK)][-1]
    return dict(json.loads(line[len(MARK) :]))


def rows_of(results: list[dict[str, Any]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for r in results:
        as_of = " / ".join(f"{r[f'as_of_{b}_s']:.2f}" if f"as_of_{b}_s" in r else "-" for b in BACK)
        rows.append([
            f"{r['workload']} {r['dataset']}", r["history"], r["commits"], r["kept_updates"],
            f"{r['kept_bytes'] / 1024:,.0f} KiB",
            f"{r['stream_rss_mb']:.0f} / {r['peak_rss_mb']:.0f} MiB",
            f"{r['commit_p50_ms']:.2f} / {r['commit_p99_ms']:.2f}",
            f"{r['first_s']:.2f}", as_of,
        ])  # fmt: skip
    return rows


HEADERS = ["stream", "history", "commits", "state updates", "state bytes",
           "peak RSS: stream / + as_of", "commit p50 / p99 ms", "first answer s",
           "as_of 1 / 500 / 999 back s"]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 edges each way, not 1,000")
    parser.add_argument("--updates", type=int, default=None, help="edges retracted (then back)")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--one", nargs=2, metavar=("WORKLOAD", "HISTORY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    updates = args.updates or (100 if args.quick else 1000)
    if args.one:
        print(MARK + json.dumps(run_one(args.one[0], int(args.one[1]), updates)), flush=True)
        return 0
    results = [run_isolated(w, h, updates) for w in CASES for h in HISTORIES]
    table = format_table(rows_of(results), HEADERS)
    print(table)
    if args.write:
        _write(table)
    return 0


def _write(table: str) -> None:
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    body = (
        f"{SECTION}\n\n`python -m bench.bench_history --write`: one run per setting, each in "
        "its own process (the machine is shared, so compare rows of one run). The state "
        "trace is the base relation's, where history is kept; live dataflows hold none.\n\n"
        + table
        + "\n"
    )
    head, found, tail = text.partition(SECTION)
    rest = tail.split("\n## ", 1)
    after = "\n## " + rest[1] if found and len(rest) > 1 else ""
    DOC.write_text((head.rstrip() + "\n\n" if head.strip() else "") + body + after)


if __name__ == "__main__":
    sys.exit(main())
