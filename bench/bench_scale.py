"""Graphs at scale: load, single-source reach and triangles, Deltalog next to DuckDB.

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_scale [--edges 1000000 10000000] [--livejournal]
[--tasks load reach triangles stream] [--systems deltalog duckdb] [--runs 3]
[--data DIR] [--memory-cap 20] [--timeout 1800] [--nodes-per-round 1000] [--rounds 100]
[--stream-from end|start] [--stream-seconds S]`.

Datasets are generated once (`bench.generators.power_law_graph`, seed 0) and kept as
Parquet files in `--data` (default: a folder in the system's temporary directory):
`powerlaw-N` for each `--edges N`, and with `--livejournal` a LiveJournal-shaped
graph of 69M edges over 4.8M nodes. Every (graph, task, system) runs in a fresh
process (`--child`) under a cap on its resident set (`--memory-cap` GiB: a thread in
the child ends it, having reported what it measured, once its resident set passes
the cap; the driver kills a child 2% above it as a backstop; no address-space cap,
which fails far below the resident set), interleaved over `--runs`; the table shows
medians. Each run reads the Parquet file itself:

- `load`: Deltalog `datalog.io.sources.parquet.insert_parquet(db, "e", path)` (a set:
  the rows deduplicated) against DuckDB `CREATE TABLE e AS SELECT * FROM
  read_parquet`; Deltalog then reports the bytes each of its structures holds
  (`Input.footprint`). `load-arrow`: Deltalog `db.insert("e",
  pyarrow.parquet.read_table(path))` instead (DuckDB as for `load`).
- `read`: load, then the stored relation read out: Deltalog `query_columns("e(a,
  b)")` (`query s`) and `query_arrow` (`arrow s`), DuckDB `SELECT * FROM e` fetched
  as numpy and as Arrow.
- `reach`: load, then the nodes reachable from the node of highest out-degree
  (Deltalog `query_columns`, DuckDB a recursive CTE with `UNION`).
- `triangles`: load, then the number of matches of `e(a,b), e(b,c), e(a,c)`
  (Deltalog's delta query counted without materializing, DuckDB's join count).
- `stream`: the 3DF thesis's node-order triangle stream (figures 6-7): out-edges
  inserted in node order, `--nodes-per-round` nodes a commit, with the triangle
  count kept live. `--stream-from end` (the default): all but the last `--rounds`
  rounds are loaded first (their count is the first evaluation), the last ones are
  timed one commit each (p50, p99); its final count must equal the `triangles`
  count. `--stream-from start`: the count starts on an empty relation and the first
  `--rounds` rounds are timed (a prefix of the stream; `--stream-seconds` ends it
  sooner), so the whole stream is measured when `--rounds` covers it; a prefix's
  count is reported but not cross-checked. Bytes per streamed edge: the child's peak
  less the resident set it held before the first round (the graph's columns and the
  rounds' indices: the bench's, not the count's), over the edges streamed (ADR 0069;
  before it, the peak over the edges, the bench's arrays included).

`peak MiB` is the child's own peak resident set (`VmHWM` of `/proc/self/status`,
read by the child as it ends): wait4's `ru_maxrss` would count the driver's resident
set too, since a forked child's peak before `exec` is kept across it. A child killed
before it reports (the backstop, a timeout) gets the largest resident set the
watchdog saw; a stream stopped by the cap reports the rounds it timed (`ended by`).
`B/edge` divides the peak by the edges. Times are wall seconds; `cpu s` is the child's
CPU time (DuckDB uses every core). Answers are cross-checked across systems and
tasks; a mismatch exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from bench.common import format_table

LIVEJOURNAL = (69_000_000, 4_800_000)  # edges, nodes of soc-LiveJournal1 (rounded)
TRIANGLES = "e(a, b), e(b, c), e(a, c)"
MARK = "RESULT "
# The arrangements of `e` (column order, key columns) each query reads.
READS = {"reach": [((0, 1), 1)], "triangles": [((0, 1), 2), ((0, 1), 1), ((1, 0), 1)]}


# -- datasets ----------------------------------------------------------------------


def dataset_name(edges: int, nodes: int | None) -> str:
    return "livejournal-shaped" if (edges, nodes) == LIVEJOURNAL else f"powerlaw-{edges}"


def generate(folder: Path, edges: int, nodes: int | None) -> Path:
    """The graph's Parquet file (`src`, `dst`), made once, and a JSON sidecar with
    its node count and the node of highest out-degree (the reach source)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.generators import power_law_graph

    path = folder / f"{dataset_name(edges, nodes)}.parquet"
    if path.exists() and path.with_suffix(".json").exists():
        return path
    src, dst = power_law_graph(edges, n_nodes=nodes, seed=0)
    out_degree = np.bincount(src)
    meta = {
        "edges": len(src),
        "nodes": int(max(src.max(), dst.max()) + 1),
        "hub": int(np.argmax(out_degree)),
        "hub_out_degree": int(out_degree.max()),
    }
    del out_degree
    pq.write_table(pa.table({"src": src, "dst": dst}), path, row_group_size=1 << 20)
    path.with_suffix(".json").write_text(json.dumps(meta))
    return path


# -- one measured run, in its own process --------------------------------------------


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def current_rss_mb() -> float:
    """This process's resident set now (Linux; 0 elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except OSError:
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def run_deltalog(spec: dict[str, Any]) -> dict[str, Any]:
    import pyarrow.parquet as pq

    from datalog import Database

    try:
        from datalog.io.sources.parquet import insert_parquet
    except ImportError:  # a version before it (measured for comparison): read_table
        insert_parquet = None  # type: ignore[assignment]

    db = Database()
    db.define(".decl e(a: number, b: number)\n.decl reach(a: number)\n")
    out: dict[str, Any] = {"rss_before_mb": current_rss_mb()}
    start, cpu = time.perf_counter(), cpu_seconds()
    if spec["task"] == "stream":
        return {**out, **stream_deltalog(db, spec)}
    if spec["task"] == "load-arrow" or insert_parquet is None:  # one Arrow table, inserted
        db.insert("e", pq.read_table(spec["path"]))
    else:
        insert_parquet(db, "e", spec["path"])
    out.update(load_s=time.perf_counter() - start, load_cpu_s=cpu_seconds() - cpu)
    out["rss_after_load_mb"] = current_rss_mb()
    e = db.engine.inputs["e"]
    out["footprint"] = footprint(e)
    start, cpu = time.perf_counter(), cpu_seconds()
    # The arrangements the query reads, made first and held (as the query would make
    # them), so that what they hold is measured after the query has dropped its own.
    held = [e.arrangement(*spec_).handle(db.epoch) for spec_ in READS.get(spec["task"], [])]
    if spec["task"] == "reach":
        db.define(f"reach({spec['hub']}).\nreach(b) :- reach(a), e(a, b).\n")
        out["answer"] = len(db.query_columns("reach(a)")["a"])
    elif spec["task"] == "read":  # the stored relation read out as columns, then Arrow
        out["answer"] = len(db.query_columns("e(a, b)")["a"])
        out["arrow_s"] = timed_seconds(lambda: db.query_arrow("e(a, b)"))
    elif spec["task"] == "triangles":
        built, found = counted(db, "triangles")
        db.engine.start(built.dataflow)
        db.engine.drop(built.dataflow)
        out["answer"] = found[0]
    if not spec["task"].startswith("load"):
        out.update(query_s=time.perf_counter() - start, query_cpu_s=cpu_seconds() - cpu)
        out["footprint_after_query"] = footprint(e)
    for handle in held:
        handle.release()
    return out


def timed_seconds(job: Any) -> float:
    start = time.perf_counter()
    job()
    return time.perf_counter() - start


def footprint(relation: Any) -> dict[str, dict[str, int]]:
    """Bytes by kind of each structure the relation's input holds (`Input.footprint`;
    nothing from a version of Deltalog before it, measured for comparison)."""
    if not hasattr(relation, "footprint"):
        return {}
    return {name: dict(found.bytes) for name, found in relation.footprint().items()}


def counted(db: Any, name: str) -> tuple[Any, list[int]]:
    """The triangle query's dataflow, built (not started), and the count of its output
    so far (`found[0]`), summed as each part of it is produced: nothing is kept, so
    counting hundreds of millions of triangles takes no memory for them (a query or a
    subscription would hold them all)."""
    from datalog.lang.checks import check_query
    from datalog.lang.parser import parse_query
    from datalog.plan.plan import Options
    from datalog.plan.planner import Planner

    checked = check_query(parse_query(TRIANGLES), db.checked.schema)
    planner = Planner(db.engine, db.symbols, db.functors)
    built = planner.build(db.checked, checked, name, Options("wcoj"))
    capture, found = built.output.capture, [0]

    def count(updates: Any) -> None:
        found[0] += int(updates.diffs.sum())
        capture.parts.clear()  # received just before: counted, not kept

    capture.stream.connect(count)
    return built, found


def stream_deltalog(db: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """The node-order triangle stream (module docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.bench_wcoj import node_rounds

    table = pq.read_table(spec["path"])
    src, dst = table.column(0).to_numpy(), table.column(1).to_numpy()
    del table
    pa.default_memory_pool().release_unused()  # the table's buffers: not the count's
    rounds = node_rounds(src, dst, spec["nodes_per_round"])
    total_rounds = len(rounds)
    if spec.get("stream_from", "end") == "start":
        timed_rounds, preload = rounds[: spec["rounds"]], np.zeros(0, np.intp)
    else:
        timed_rounds = rounds[-spec["rounds"] :]
        preload = np.concatenate(
            [np.zeros(0, np.intp), *rounds[: total_rounds - len(timed_rounds)]]
        )
    del rounds
    start = time.perf_counter()
    db.insert("e", [src[preload], dst[preload]])
    load_s = time.perf_counter() - start
    del preload
    built, found = counted(db, "stream")
    held_mb = current_rss_mb()  # the graph and its rounds, before any edge streams
    start, cpu = time.perf_counter(), cpu_seconds()
    db.engine.start(built.dataflow)
    first = {"first_s": time.perf_counter() - start, "first_cpu_s": cpu_seconds() - cpu}
    latencies: list[float] = []
    cpu_latencies: list[float] = []
    _STREAM.update(
        latencies=latencies,
        cpu_latencies=cpu_latencies,
        timed_rounds=timed_rounds,
        found=found,
        held_mb=held_mb,
        load_s=load_s,
        first=first,
        total_rounds=total_rounds,
        complete_when_all=spec.get("stream_from", "end") == "end",
    )
    ended = timed_stream(db, src, dst, timed_rounds, spec, latencies, cpu_latencies)
    return {**stream_figures(**_STREAM), "ended": ended}


def stream_figures(
    latencies: list[float],
    cpu_latencies: list[float],
    timed_rounds: list[np.ndarray],
    found: list[int],
    held_mb: float,
    load_s: float,
    first: dict[str, float],
    total_rounds: int,
    complete_when_all: bool,
) -> dict[str, Any]:
    """The stream's figures over the rounds timed so far."""
    done = len(cpu_latencies)  # appended last: a round fully timed
    ms, cpu_ms = np.array(latencies[:done]) * 1e3, np.array(cpu_latencies[:done]) * 1e3
    edges_timed = int(sum(len(p) for p in timed_rounds[:done]))
    resident = current_rss_mb()
    return {
        "load_s": load_s,
        "held_mb": held_mb,
        "end_rss_mb": resident,
        "resident_per_edge": (resident - held_mb) * (1 << 20) / max(edges_timed, 1),
        **first,
        "answer": found[0],
        "complete": complete_when_all or done == total_rounds,
        "rounds": done,
        "total_rounds": total_rounds,
        "edges_timed": edges_timed,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
        "p50_cpu_ms": float(np.percentile(cpu_ms, 50)),
        "p99_cpu_ms": float(np.percentile(cpu_ms, 99)),
        "max_cpu_ms": float(cpu_ms.max()),
        "tenths_p50_ms": [float(np.median(part)) for part in np.array_split(ms, 10) if len(part)],
    }


def timed_stream(
    db: Any,
    src: np.ndarray,
    dst: np.ndarray,
    rounds: list[np.ndarray],
    spec: dict[str, Any],
    latencies: list[float],
    cpu_latencies: list[float],
) -> str:
    """Append the wall and CPU seconds of each round's commit, until the rounds or
    `--stream-seconds` (of wall time, if given) run out, or memory does (the rounds
    timed before it are kept); what ended the stream."""
    budget = spec.get("stream_seconds") or float("inf")
    began = time.perf_counter()
    for part in rounds:
        start, cpu = time.perf_counter(), cpu_seconds()
        try:
            db.insert("e", [src[part], dst[part]])
        except MemoryError:
            return f"oom ({spec['memory_cap_gb']:g} GiB)"
        latencies.append(time.perf_counter() - start)
        cpu_latencies.append(cpu_seconds() - cpu)
        if len(latencies) % 100 == 0:  # what a kill from outside (the OOM killer) leaves
            print(progress(latencies, cpu_latencies), file=sys.stderr, flush=True)
        if time.perf_counter() - began > budget:
            return "time budget"
    return "end of the rounds"


def progress(latencies: list[float], cpu_latencies: list[float]) -> str:
    """A progress line: the last 100 rounds' and all rounds' wall p50/p99/max and CPU
    p50 so far, the resident set and the peak."""
    ms, cpu_ms = np.array(latencies) * 1e3, np.array(cpu_latencies) * 1e3
    recent = ms[-100:]
    return (
        f"  round {len(ms)}: last 100 p50 {np.median(recent):.0f} max {recent.max():.0f} ms;"
        f" all p50/p99/max {np.median(ms):.0f}/{np.percentile(ms, 99):.0f}/{ms.max():.0f} ms,"
        f" cpu p50/p99/max {np.median(cpu_ms):.0f}/{np.percentile(cpu_ms, 99):.0f}"
        f"/{cpu_ms.max():.0f} ms; resident {current_rss_mb():,.0f} MiB,"
        f" peak {own_peak_mb() or 0:,.0f} MiB"
    )


_REACH = """WITH RECURSIVE reach(n) AS (SELECT CAST({hub} AS BIGINT)
    UNION SELECT e.dst FROM reach JOIN e ON e.src = reach.n) SELECT count(*) FROM reach"""
_TRIANGLES = """SELECT count(*) FROM e ab JOIN e bc ON bc.src = ab.dst
    JOIN e ac ON ac.src = ab.src AND ac.dst = bc.dst"""


def run_duckdb(spec: dict[str, Any]) -> dict[str, Any]:
    import duckdb

    if spec["task"] == "stream":
        return {"status": "unsupported: not incremental"}
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")
    limit = int(spec["memory_cap_gb"] * 0.8 * 1024)  # its own limit, below the watchdog's
    con.execute(f"SET memory_limit = '{limit}MB'")
    out: dict[str, Any] = {"rss_before_mb": current_rss_mb()}
    start, cpu = time.perf_counter(), cpu_seconds()
    path = str(spec["path"]).replace("'", "''")
    con.execute(f"CREATE TABLE e AS SELECT * FROM read_parquet('{path}')")
    out.update(load_s=time.perf_counter() - start, load_cpu_s=cpu_seconds() - cpu)
    out["rss_after_load_mb"] = current_rss_mb()
    sql = {"reach": _REACH.format(hub=int(spec["hub"])), "triangles": _TRIANGLES}
    if spec["task"] == "read":  # the table read out as numpy columns, then Arrow
        start, cpu = time.perf_counter(), cpu_seconds()
        out["answer"] = len(con.execute("SELECT * FROM e").fetchnumpy()["src"])
        out.update(query_s=time.perf_counter() - start, query_cpu_s=cpu_seconds() - cpu)
        out["arrow_s"] = timed_seconds(lambda: con.execute("SELECT * FROM e").to_arrow_table())
    if spec["task"] in sql:
        start, cpu = time.perf_counter(), cpu_seconds()
        (out["answer"],) = con.execute(sql[spec["task"]]).fetchone() or (None,)
        out.update(query_s=time.perf_counter() - start, query_cpu_s=cpu_seconds() - cpu)
    return out


def child(spec: dict[str, Any]) -> None:
    # The cap is on the resident set, as the goals state it (an address-space cap,
    # RLIMIT_AS, fails far below it: glibc arenas and numpy's mappings reserve more
    # address space than they touch). The child watches itself, so that a stream
    # stopped by the cap still reports the rounds it timed; the driver's watchdog is
    # the backstop.
    watch_resident(spec)
    run = run_deltalog if spec["system"] == "deltalog" else run_duckdb
    try:
        result = run(spec)
    except MemoryError:
        result = {"status": f"oom ({spec['memory_cap_gb']:g} GiB)"}
    report_and_end(result)


def report_and_end(result: dict[str, Any]) -> None:
    result["own_peak_mb"] = own_peak_mb()
    print(MARK + json.dumps(result), flush=True)


_STREAM: dict[str, Any] = {}  # the running stream's figures so far, for the watcher


def watch_resident(spec: dict[str, Any], every_s: float = 0.02) -> None:
    """A thread that ends this process once its resident set passes the cap, having
    reported what it measured so far (a stream's rounds timed; `over the memory cap`)."""
    cap_mb = spec["memory_cap_gb"] * 1024

    def watch() -> None:
        while current_rss_mb() <= cap_mb:
            time.sleep(every_s)
        status = f"over the memory cap ({spec['memory_cap_gb']:g} GiB resident)"
        if _STREAM.get("latencies"):
            result = {**stream_figures(**_STREAM), "ended": status}
        else:
            result = {"status": status}
        report_and_end(result)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def own_peak_mb() -> float | None:
    """This process's peak resident set since its `exec` (Linux's `VmHWM`; None
    elsewhere). Unlike `ru_maxrss` it does not count the forking parent's pages."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


# -- the driver ----------------------------------------------------------------------


def measure(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run `spec` in a child; its result with `status`, `wall_s` and `peak_mb`."""
    cmd = [sys.executable, "-m", "bench.bench_scale", "--child", json.dumps(spec)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    # a backstop above the child's own watcher (which reports before it ends)
    cap_mb = spec["memory_cap_gb"] * 1024 * 1.02 + 64
    start, status, seen_mb = time.monotonic(), "ok", 0.0
    while True:
        pid, code, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        rss_mb = _rss_mb(proc.pid)
        seen_mb = max(seen_mb, rss_mb)
        if time.monotonic() - start > timeout or rss_mb > cap_mb:
            status = "timeout" if time.monotonic() - start > timeout else "over the memory cap"
            os.killpg(proc.pid, signal.SIGKILL)
            _, code, _ = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    output = proc.stdout.read() if proc.stdout else ""
    result: dict[str, Any] = {"status": status}
    lines = [line for line in output.splitlines() if line.startswith(MARK)]
    if status == "ok" and lines:
        result.update(json.loads(lines[-1][len(MARK) :]))
    elif status == "ok":
        result["status"] = f"crashed ({os.waitstatus_to_exitcode(code)})"
    # The child's own peak: wait4's ru_maxrss would include this driver's resident set
    # (a forked child's peak before exec is kept across it).
    peak = result.pop("own_peak_mb", None)
    result.update(wall_s=time.monotonic() - start, peak_mb=peak if peak else seen_mb)
    return result


def _rss_mb(pid: int) -> float:
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def _median(runs: list[dict[str, Any]], key: str) -> float | str:
    values = [r[key] for r in runs if key in r]
    return median(values) if values else ""


def report(
    graph: str, meta: dict[str, Any], results: dict[tuple[str, str], list[dict[str, Any]]]
) -> int:
    """Print the tables of one graph; 1 if two answers disagree."""
    edges = meta["edges"]
    print(f"### {graph}: {edges:,} edges, {meta['nodes']:,} nodes")
    print(f"(reach from node {meta['hub']:,}, out-degree {meta['hub_out_degree']:,})\n")
    rows: list[list[object]] = []
    answers: defaultdict[str, set[object]] = defaultdict(set)
    for (task, system), runs in results.items():
        ok = [r for r in runs if r.get("status", "ok") == "ok"]
        status = f"ok ({len(ok)}/{len(runs)})" if ok else runs[0]["status"]
        answer = ok[0].get("answer", "") if ok else ""
        if answer != "" and ok[0].get("complete", True):  # a stream's prefix: its own count
            answers["triangles" if task == "stream" else task].add(answer)
        query = "first_s" if task == "stream" else "query_s"
        peak = _median(ok, "peak_mb")
        per_edge = peak * (1 << 20) / edges if isinstance(peak, float) else ""
        times = [_median(ok, "load_s"), _median(ok, query)]
        times += [_median(ok, "load_cpu_s"), _median(ok, query.replace("_s", "_cpu_s"))]
        rows.append([task, system, status, answer, *times, peak, per_edge])
        if task == "read" and ok:
            print(f"read {system}: query_arrow / Arrow {_median(ok, 'arrow_s'):.4g} s")
    headers = ["task", "system", "status", "answer", "load s", "query s"]
    headers += ["load cpu s", "query cpu s", "peak MiB", "peak B/edge"]
    print(format_table(rows, headers), end="\n\n")
    streams = [r for r in results.get(("stream", "deltalog"), []) if "p50_ms" in r]
    if streams:
        figures = ", ".join(
            f"{label} {_median(streams, key):.4g} ms"
            for label, key in [("p50", "p50_ms"), ("p99", "p99_ms"), ("max", "max_ms")]
        )
        first = streams[0]
        which = "of" if first.get("complete", True) else "first, of"
        print(
            f"stream: {first['rounds']} rounds timed ({which} {first.get('total_rounds', '?')},"
            f" ended by {first.get('ended', '?')};"
            f" {first['edges_timed']:,} edges): {figures},"
            f" cpu p50/p99/max {_median(streams, 'p50_cpu_ms'):.4g}"
            f"/{_median(streams, 'p99_cpu_ms'):.4g}/{_median(streams, 'max_cpu_ms'):.4g} ms;"
            f" first evaluation {_median(streams, 'first_s'):.4g} s"
        )
        stream_peak = first.get("peak_mb")
        if stream_peak and "held_mb" in first:  # the peak less what the bench held before streaming
            own = (stream_peak - first["held_mb"]) * (1 << 20) / max(first["edges_timed"], 1)
            print(
                f"bytes per streamed edge: peak {own:.0f} (peak {stream_peak:,.0f} MiB less the"
                f" {first['held_mb']:,.0f} MiB held before the first round), resident at the end"
                f" {first['resident_per_edge']:.0f}"
            )
        tenths = ", ".join(f"{v:.3g}" for v in first.get("tenths_p50_ms", []))
        print(f"p50 ms by tenth of the timed rounds (first run): {tenths}\n")
    footprint_table(results, edges)
    wrong = {task: found for task, found in answers.items() if len(found) > 1}
    if wrong:
        print(f"MISMATCH on {graph}: {wrong}")
    return 1 if wrong else 0


def footprint_table(results: dict[tuple[str, str], list[dict[str, Any]]], edges: int) -> None:
    """Bytes per edge of each structure Deltalog holds for `e`, after the load and after
    each query (the arrangements it built)."""
    rows = []
    for (task, system), runs in results.items():
        ok = [r for r in runs if "footprint" in r]
        if system != "deltalog" or not ok:
            continue
        key = "footprint" if task.startswith("load") else "footprint_after_query"
        for name, kinds in ok[0].get(key, {}).items():
            total = sum(kinds.values())
            rows.append([task, name, *(kinds[k] / edges for k in kinds), total / edges])
            kind_names = list(kinds)
    if rows:
        print(
            format_table(
                rows, ["after", "structure", *(f"{k} B/edge" for k in kind_names), "total B/edge"]
            ),
            end="\n\n",
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--edges", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--livejournal", action="store_true", help="also the 69M-edge graph")
    parser.add_argument(
        "--tasks",
        nargs="*",
        default=["load", "reach", "triangles"],
        choices=["load", "load-arrow", "read", "reach", "triangles", "stream"],
    )
    parser.add_argument(
        "--systems", nargs="*", default=["deltalog", "duckdb"], choices=["deltalog", "duckdb"]
    )
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "deltalog-scale")
    parser.add_argument("--memory-cap", type=float, default=20.0, help="GiB per child")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per child")
    parser.add_argument("--nodes-per-round", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=100, help="stream rounds timed")
    parser.add_argument(
        "--stream-from",
        choices=["end", "start"],
        default="end",
        help="time the stream's last rounds (the rest preloaded) or its first (from empty)",
    )
    parser.add_argument(
        "--stream-seconds", type=float, default=None, help="end the timed rounds after this"
    )
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return 0
    args.data.mkdir(parents=True, exist_ok=True)
    graphs = [(n, None) for n in args.edges] + ([LIVEJOURNAL] if args.livejournal else [])
    failed = 0
    for edges, nodes in graphs:
        path = generate(args.data, edges, nodes)
        meta = json.loads(path.with_suffix(".json").read_text())
        results: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for _ in range(args.runs):
            for task in args.tasks:
                for system in args.systems:
                    spec = {
                        "system": system,
                        "task": task,
                        "path": str(path),
                        "hub": meta["hub"],
                        "memory_cap_gb": args.memory_cap,
                        "nodes_per_round": args.nodes_per_round,
                        "rounds": args.rounds,
                        "stream_from": args.stream_from,
                        "stream_seconds": args.stream_seconds,
                    }
                    found = measure(spec, args.timeout)
                    answer = found.get("answer", "")
                    print(
                        f"  {dataset_name(edges, nodes)} {task} {system}: {found['status']}"
                        f" {answer} {found['wall_s']:.1f} s, peak {found['peak_mb']:,.0f} MiB",
                        file=sys.stderr,
                        flush=True,
                    )
                    results.setdefault((task, system), []).append(found)
        failed |= report(dataset_name(edges, nodes), meta, results)
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
