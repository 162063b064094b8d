"""One measured run of one system, in its own process: `python -m bench.runner SPEC_JSON`.

Layer: bench — may import anything public from deltalog packages and peers.
SPEC is `{"system", "workload", "dataset", "mode", "updates", "batch"}`. The process
builds the dataset (seeded, so every system gets the same rows; not timed), loads the
relations the workload reads into the system (timed) and then, by mode:
- `initial`: answers the workload once (timed);
- `single` / `batch`: starts watching the answer, then retracts `updates` sampled
  rows of the workload's stream relation one at a time (or in batches of `batch`),
  and inserts them back the same way; every change's latency is measured up to the
  point the new answer is known. `mid` is the answer size after the retractions,
  `answer` the final one (equal to the initial answer when all is well); `digest`,
  `mid_digest` and `initial_digest` are the matching row digests of checked workloads.
The last stdout line is `RESULT <json>`; the parent reads peak memory from wait4.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from bench.answers import Answer
from bench.common import peak_rss_mb, percentiles, timed
from bench.datasets import build, size
from bench.peers.base import Peer, make_peer, peer_class
from bench.workloads import WORKLOADS, Params, Workload, params

__all__ = ["execute", "main", "update_groups"]

MARK = "RESULT "


def update_groups(table: pa.Table, count: int, batch: int, seed: int = 1) -> list[pa.Table]:
    """`count` distinct rows of `table`, sampled with `seed`, in groups of `batch`."""
    count = min(count, table.num_rows)
    picked = np.sort(np.random.default_rng(seed).choice(table.num_rows, count, replace=False))
    rows = table.take(pa.array(picked))
    return [rows.slice(i, batch) for i in range(0, count, batch)]


def _stream(peer: Peer, workload: Workload, p: Params, groups: list[pa.Table]) -> dict[str, Any]:
    assert workload.stream is not None
    initial, watch_s = timed(lambda: peer.watch(workload, p))
    latencies: list[float] = []
    answers: list[Answer] = []
    for insert in (False, True):
        answer = initial
        for rows in groups:
            start = time.perf_counter()
            answer = peer.apply(workload.stream, rows, insert)
            latencies.append(time.perf_counter() - start)
        answers.append(answer)
    ms = percentiles(np.array(latencies) * 1000.0)
    return {
        **_answer(initial, "initial", "initial_digest"),
        **_answer(answers[0], "mid", "mid_digest"),
        **_answer(answers[1], "answer", "digest"),
        "run_s": watch_s,
        "updates": len(latencies),
        "update_rows": sum(g.num_rows for g in groups),
        "update_s": float(sum(latencies)),
        **{f"{k}_ms": v for k, v in ms.items()},
    }


def _answer(answer: Answer, size_key: str, digest_key: str) -> dict[str, Any]:
    found: dict[str, Any] = {size_key: answer.size}
    if answer.digest is not None:
        found[digest_key] = f"{answer.digest:016x}"
    return found


def execute(spec: dict[str, Any]) -> dict[str, Any]:
    """Run `spec` in this process; return the measurements (see the module)."""
    workload = WORKLOADS[spec["workload"]]
    everything = build(spec["dataset"])
    p = params(workload, everything, persons=int(spec.get("persons", 10)))
    relations = workload.select(everything)
    del everything
    limit = peer_class(spec["system"]).max_facts
    if limit is not None and size(relations) > limit:
        return {"skipped": f"skipped: {size(relations):,} facts > its limit {limit:,}"}
    base_mb = peak_rss_mb()
    peer = make_peer(spec["system"])
    try:
        _, load_s = timed(lambda: peer.load(relations))
        result: dict[str, Any] = {"base_mb": base_mb, "load_s": load_s, "facts": size(relations)}
        if spec["mode"] == "initial":
            answer, run_s = timed(lambda: peer.run(workload, p))
            result.update(_answer(answer, "answer", "digest"), run_s=run_s)
        else:
            assert workload.stream is not None
            batch = 1 if spec["mode"] == "single" else int(spec["batch"])
            count = int(spec["updates"]) * batch
            groups = update_groups(relations[workload.stream], count, batch)
            result.update(_stream(peer, workload, p, groups))
    finally:
        peer.close()
    result["self_peak_mb"] = peak_rss_mb()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    result = execute(json.loads(args[0]))
    print(MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
