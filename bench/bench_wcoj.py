"""Delta queries with worst-case optimal joins (wcoj) next to binary join plans and DuckDB.

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_wcoj [--edges 100000] [--snap PATH ...] [--persons 100000]`.

(a) Triangles `e(a,b), e(b,c), e(a,c)` on a skewed power-law graph: each of
    the 6 clause orders of the body under wcoj and under binary joins, and the
    median wcoj count next to DuckDB. Every run forks a child (the loaded
    database is shared copy-on-write) with a timeout and an address-space cap,
    so a blown-up binary order reports "timeout" or "oom" instead of stalling.
    Counts are cross-checked with DuckDB (a mismatch raises).
(b) Streaming triangles on SNAP graphs (and generated power-law graphs,
    `--generated 10000000`): out-edges are inserted in node order, 1 or 100
    nodes per round, with the triangle query subscribed; per-round latency
    (p50/p99/max) for wcoj and the best and worst binary orders. When a graph
    has more than `--max-rounds` rounds, the earlier rounds are loaded before
    subscribing and only the last ones (on the largest graph) are timed.
(c) A 7-way star join over one-to-one person attributes: arranged tuples each
    dataflow holds, and the latency of inserting batches of 1000 new persons.
Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import re
import resource
import time
from collections.abc import Callable, Sequence
from functools import partial
from itertools import permutations
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from bench.common import DATA_DIR, peak_rss_mb, percentiles, print_table, timed
from bench.generators import power_law_graph, read_snap
from bench.peers.duckdb_peer import EdgeDB
from datalog import Change, Database
from datalog.lang.checks import check_query
from datalog.lang.parser import parse_query
from datalog.plan.plan import JoinPlan, Options
from datalog.plan.planner import Planner

EDGES = ".decl e(a: number, b: number)\n"
TRIANGLE_ATOMS = ("e(a, b)", "e(b, c)", "e(a, c)")
ORDERS = [", ".join(p) for p in permutations(TRIANGLE_ATOMS)]
SNAP_DIR = DATA_DIR / "snap"
DEFAULT_SNAP = [SNAP_DIR / "CA-GrQc.txt", SNAP_DIR / "p2p-Gnutella08.txt"]
T = TypeVar("T")
MEMORY_CAP = [8 << 30]  # bytes of address space a forked run may map (--memory-cap)


# -- running a query to a count ----------------------------------------------------


def count_answer(db: Database, text: str, plan: JoinPlan) -> int:
    """Rows in the answer of `text`, as `Database.query` computes it (no Python rows)."""
    checked = check_query(parse_query(text), db.checked.schema)
    planner = Planner(db.engine, db.symbols, db.functors)
    built = planner.build(db.checked, checked, f"{text} [{plan}]", Options(plan))
    total = 0

    def add(updates: Any, _epoch: int) -> None:
        nonlocal total
        total += int(updates.diffs.sum())

    built.output.listeners.append(add)
    db.engine.start(built.dataflow)
    db.engine.drop(built.dataflow)
    return total


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed_cpu(job: Callable[[], T]) -> tuple[T, float, float]:
    """`job()`, its wall-clock seconds and its CPU seconds (robust to a busy host)."""
    cpu = cpu_seconds()
    result, wall = timed(job)
    return result, wall, cpu_seconds() - cpu


Outcome = tuple[str, Any, float, float]  # status, result, wall s, cpu s


def _child(conn: Connection, job: Callable[[], object]) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP[0], MEMORY_CAP[0]))
    try:
        result, wall, cpu = timed_cpu(job)
        conn.send(("ok", result, wall, cpu))
    except MemoryError:
        conn.send(("oom", None, 0.0, 0.0))


def forked(job: Callable[[], object], timeout: float) -> Outcome:
    """Run `job` in a forked child: ("ok", result, wall, cpu), or "timeout"/"oom"/"crash"."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, job))
    proc.start()
    child.close()
    outcome: Outcome = ("timeout", None, timeout, timeout)
    if parent.poll(timeout):
        try:
            outcome = parent.recv()
        except EOFError:
            outcome = ("crash", None, 0.0, 0.0)
    if proc.is_alive():
        proc.kill()
    proc.join()
    return outcome


def _cell(outcome: Outcome, cpu: bool = False) -> object:
    status, _, wall, cpu_s = outcome
    return (cpu_s if cpu else wall) if status == "ok" else status


def _checked(outcome: Outcome, expected: int, what: str) -> None:
    if outcome[0] == "ok" and outcome[1] != expected:
        raise AssertionError(f"{what}: {outcome[1]} triangles, DuckDB says {expected}")


# -- (a) static triangles ----------------------------------------------------------


def skewed_graph(n_edges: int, orient: str) -> tuple[np.ndarray, np.ndarray]:
    """A power-law graph; with `orient="degree"` every edge points to its higher-degree end.

    Chung-Lu draws correlate in- and out-degree, so every clause order joins
    about as many 2-paths first. Orienting the undirected graph towards hubs
    (followers -> celebrities) leaves out-degrees small and in-degrees skewed:
    joining two in-edges first (on c) then explodes, joining on a does not.
    """
    if orient == "none":
        return power_law_graph(n_edges, seed=1)
    src, dst = power_law_graph(n_edges, seed=1, directed=False)
    degree = np.bincount(np.concatenate([src, dst]))
    flip = (degree[src] > degree[dst]) | ((degree[src] == degree[dst]) & (src > dst))
    return np.where(flip, dst, src), np.where(flip, src, dst)


def static_triangles(n_edges: int, orient: str, timeout: float) -> None:
    src, dst = skewed_graph(n_edges, orient)
    out_deg, in_deg = np.bincount(src), np.bincount(dst)
    kind = "edges towards hubs" if orient == "degree" else "Chung-Lu, directed"
    print(
        f"### (a) triangles, power-law graph ({kind}): {n_edges:,} edges, "
        f"max out-degree {out_deg.max():,}, max in-degree {in_deg.max():,}\n"
    )
    with EdgeDB(src, dst) as duck:
        (expected, _), duck_wall, duck_cpu = timed_cpu(duck.triangles)
    with EdgeDB(src, dst, threads=1) as duck1:
        (expected1, _), duck1_wall, duck1_cpu = timed_cpu(duck1.triangles)
    assert expected == expected1
    db = Database()
    db.define(EDGES)
    _, load = timed(lambda: db.insert("e", [src, dst]))
    rows = []
    outcomes: dict[str, list[Outcome]] = {"wcoj": [], "binary": []}
    for order in ORDERS:
        row: list[object] = [order]
        for plan in ("wcoj", "binary"):
            outcome = forked(partial(count_answer, db, order, plan), timeout)
            _checked(outcome, expected, f"{plan} {order}")
            row += [_cell(outcome), _cell(outcome, cpu=True)]
            outcomes[plan].append(outcome)
        rows.append(row)
    finished = [o for o in outcomes["wcoj"] if o[0] == "ok"]
    wall: object = float(np.median([o[2] for o in finished])) if finished else "timeout"
    cpu = float(np.median([o[3] for o in finished])) if finished else 0.0
    print_table(
        [
            ["deltalog load (insert e)", load, "", ""],
            ["deltalog wcoj (median of the 6 orders)", wall, cpu or "", cpu / duck1_cpu or ""],
            ["duckdb (all threads)", duck_wall, duck_cpu, duck_cpu / duck1_cpu],
            ["duckdb (1 thread)", duck1_wall, duck1_cpu, 1.0],
        ],
        ["initial triangle count", "wall s", "cpu s", "cpu / duckdb 1-thread cpu"],
    )
    print(f"triangles: {expected:,}\n")
    print_table(rows, ["body order", "wcoj wall s", "wcoj cpu s", "binary wall s", "binary cpu s"])
    for plan, runs in outcomes.items():
        values = [o[3] if o[0] == "ok" else float("inf") for o in runs]
        done = [v for v in values if v != float("inf")]
        spread = f"{max(done) / min(done):.3g}x"
        if len(done) < len(values):
            spread = f"> {timeout / min(done):.3g}x ({len(values) - len(done)} timed out)"
        print(f"{plan}: spread of cpu s (slowest / fastest order) = {spread}")
    print()


# -- (b) streaming triangles -------------------------------------------------------


def node_rounds(src: np.ndarray, dst: np.ndarray, nodes_per_round: int) -> list[np.ndarray]:
    """Edge indices grouped by source node, in node order, `nodes_per_round` nodes a round."""
    order = np.argsort(src, kind="stable")
    _, starts = np.unique(src[order], return_index=True)
    cuts = starts[nodes_per_round::nodes_per_round]
    return [part for part in np.split(order, cuts) if len(part)]


def read_edges(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """`read_snap`, or a whitespace-tolerant parse when a file mixes delimiters.

    (CA-GrQc.txt has one space-separated line among tab-separated ones, which
    pyarrow's CSV reader, given one delimiter, rejects.)
    """
    import pyarrow as pa

    try:
        return read_snap(path)
    except pa.ArrowInvalid:
        lines = path.read_text().splitlines()
        pairs = [line.split() for line in lines if line.strip() and not line.startswith("#")]
        edges = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        return np.ascontiguousarray(edges[:, 0]), np.ascontiguousarray(edges[:, 1])


def stream_latencies(
    src: np.ndarray,
    dst: np.ndarray,
    preload: np.ndarray,
    rounds: Sequence[np.ndarray],
    query: str,
    plan: JoinPlan,
) -> tuple[list[float], list[float], int]:
    """Wall and CPU seconds of each round's commit, and the triangles seen in the end.

    The `preload` edges are inserted before the query is subscribed (its snapshot
    is then computed at once); every round after that is one timed commit.
    """
    db = Database()
    db.define(EDGES)
    if len(preload):
        db.insert("e", [src[preload], dst[preload]])
    found = 0

    def on_change(change: Change) -> None:
        nonlocal found
        found += sum(change.diffs)

    db.subscribe(query, on_change, plan=plan)
    latencies, cpu = [], []
    for part in rounds:
        start, start_cpu = time.perf_counter(), time.process_time()
        db.insert("e", [src[part], dst[part]])
        latencies.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return latencies, cpu, found


def binary_extremes(src: np.ndarray, dst: np.ndarray) -> tuple[str, str]:
    """The body orders whose first binary join is smallest and largest on this graph.

    The planner joins the first atom with the next one sharing a variable; the
    2-paths it arranges number sum(in*out) on b, sum(out^2) on a, sum(in^2) on c.
    """
    size = max(int(src.max()), int(dst.max())) + 1
    out_deg = np.bincount(src, minlength=size).astype(np.float64)
    in_deg = np.bincount(dst, minlength=size).astype(np.float64)
    on = {"a": float(out_deg @ out_deg), "b": float(in_deg @ out_deg), "c": float(in_deg @ in_deg)}

    def first_join(order: str) -> float:
        first, second = (set(pair) for pair in re.findall(r"\((\w), (\w)\)", order)[:2])
        return on[(first & second).pop()]

    ranked = sorted(ORDERS, key=first_join)
    return ranked[0], ranked[-1]


Graph = tuple[str, np.ndarray, np.ndarray]


def stream_graphs(paths: Sequence[Path], generated: Sequence[int]) -> list[Graph]:
    graphs = [(path.name, *read_edges(path)) for path in paths]
    for n in generated:
        src, dst = power_law_graph(n, seed=2)
        graphs.append((f"power-law {n:,} (generated)", src, dst))
    return graphs


def streaming(
    graphs: Sequence[Graph], round_sizes: Sequence[int], max_rounds: int, timeout: float
) -> None:
    print("### (b) streaming triangles: out-edges inserted in node order\n")
    rows = []
    for name, src, dst in graphs:
        with EdgeDB(src, dst) as duck:
            expected, _ = duck.triangles()
        best, worst = binary_extremes(src, dst)
        variants: list[tuple[str, str, JoinPlan]] = [
            ("wcoj", ORDERS[0], "wcoj"),
            (f"binary best: {best}", best, "binary"),
            (f"binary worst: {worst}", worst, "binary"),
        ]
        for size in round_sizes:
            rounds = node_rounds(src, dst, size)
            # Too many rounds to time them all: load the earlier ones at once, time the last.
            skipped = max(0, len(rounds) - max_rounds)
            preload = np.concatenate([np.zeros(0, dtype=np.intp), *rounds[:skipped]])
            timed_rounds = rounds[skipped:]
            for label, query, plan in variants:
                job = partial(stream_latencies, src, dst, preload, timed_rounds, query, plan)
                outcome = forked(job, timeout)
                row: list[object] = [name, size, len(timed_rounds), f"{len(preload):,}", label]
                if outcome[0] != "ok":
                    rows.append([*row, outcome[0], *[""] * 5])
                    continue
                latencies, cpu_latencies, found = outcome[1]
                if found != expected:
                    raise AssertionError(f"{label} on {name}: {found} vs DuckDB {expected}")
                pct = percentiles(np.asarray(latencies) * 1e3)
                pct_cpu = percentiles(np.asarray(cpu_latencies) * 1e3)
                wall = [pct["p50"], pct["p99"], pct["max"]]
                cpu = [pct_cpu["p50"], pct_cpu["p99"]]
                rows.append([*row, *wall, *cpu, sum(latencies)])
        print(f"{name}: {len(src):,} edges, {expected:,} triangles")
    print()
    headers = ["graph", "nodes/round", "rounds timed", "edges preloaded", "plan"]
    headers += ["p50 ms", "p99 ms", "max ms", "p50 cpu ms", "p99 cpu ms", "total s"]
    print_table(rows, headers)


# -- (c) star join -----------------------------------------------------------------

ATTRIBUTES = ["name", "age", "city", "email", "phone", "job", "team"]
STAR_PROGRAM = "".join(f".decl {a}(p: number, v: number)\n" for a in ATTRIBUTES)
STAR_QUERY = ", ".join(f"{a}(p, a{i})" for i, a in enumerate(ATTRIBUTES, 1))


def load_persons(db: Database, first: int, count: int) -> None:
    persons = np.arange(first, first + count, dtype=np.int64)
    with db.transaction() as tx:
        for i, attr in enumerate(ATTRIBUTES):
            tx.insert(attr, [persons, persons * 7 + i])


def star(persons: int, batches: int, batch: int) -> None:
    print(f"### (c) 7-way star join on one-to-one attributes: {persons:,} persons\n")
    rows = []
    for plan in ("wcoj", "binary"):
        db = Database()
        db.define(STAR_PROGRAM)
        load_persons(db, 0, persons)
        seen = 0

        def on_change(change: Change) -> None:
            nonlocal seen
            seen += sum(change.diffs)

        _, initial = timed(partial(db.subscribe, STAR_QUERY, on_change, plan))
        dataflow = db.engine.dataflows[-1]
        held = dataflow.arrangements()
        latencies: list[float] = []
        for k in range(batches):
            _, seconds = timed(partial(load_persons, db, persons + k * batch, batch))
            latencies.append(seconds * 1e3)
        if seen != persons + batches * batch:
            raise AssertionError(f"{plan}: {seen} star rows, expected {persons + batches * batch}")
        pct = percentiles(latencies)
        tuples = sum(t for _, t, _ in held)
        ops = "; ".join(f"{op}: {t:,}" for op, t, _ in held)
        rows.append([plan, initial, tuples, len(held), pct["p50"], pct["p99"], ops])
    print_table(
        rows,
        [
            "plan",
            "subscribe s",
            "arranged tuples",
            "arrangements",
            f"p50 ms / {batch}",
            f"p99 ms / {batch}",
            "held by",
        ],
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=100_000)
    parser.add_argument(
        "--orient", nargs="*", default=["degree", "none"], choices=["degree", "none"]
    )
    parser.add_argument("--snap", type=Path, nargs="*", default=DEFAULT_SNAP)
    parser.add_argument("--generated", type=int, nargs="*", default=[], help="edges (streamed)")
    parser.add_argument("--rounds", type=int, nargs="*", default=[1, 100], help="nodes per round")
    parser.add_argument(
        "--max-rounds", type=int, default=2000, help="rounds timed (earlier ones preloaded)"
    )
    parser.add_argument("--persons", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per forked run")
    parser.add_argument("--skip", nargs="*", default=[], choices=["a", "b", "c"])
    parser.add_argument(
        "--memory-cap", type=float, default=8, help="GiB of address space per forked run"
    )
    args = parser.parse_args(argv)
    MEMORY_CAP[0] = int(args.memory_cap * (1 << 30))
    start = time.perf_counter()
    if "a" not in args.skip:
        for orient in args.orient:
            static_triangles(args.edges, orient, args.timeout)
    if "b" not in args.skip:
        graphs = stream_graphs(args.snap, args.generated)
        streaming(graphs, args.rounds, args.max_rounds, args.timeout * 3)
    if "c" not in args.skip:
        star(args.persons, args.batches, 1000)
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"peak RSS: this process {peak_rss_mb():,.0f} MiB, largest forked run "
        f"{children:,.0f} MiB; total {time.perf_counter() - start:,.0f} s"
    )


if __name__ == "__main__":
    main()
