"""Spark as loader and as evaluator, against the same work done without Spark.

Layer: bench — may import anything public from deltalog packages and peers.
Prints markdown tables; asserts nothing (it checks that both sides give the same
answer and says so). Each measurement runs in a fresh process
(`--case NAME`), so peak RSS and session start-up are its own.

- **start-up**: creating the session and running a first job.
- **load**: one Parquet file of a power-law edge list (`--load-rows`, default
  10M), inserted into a `Database` by `pyarrow.parquet.read_table` +
  `tx.insert` ("direct") and by `datalog.io.sources.spark.load_frames`, as it is
  (a plain scan read as its files' bytes, ADR 0079; a frame the user made, through
  the JVM's rows) and de-duplicated in Spark, and directly in 100,000-row batches of one
  transaction (a Spark load's shape); seconds exclude session start-up; driver RSS is
  the load's growth of the Python process's peak RSS, next to the growth a
  direct load leaves once its table is dropped (the relation in the database).
- **evaluate**: single-source reach on power-law graphs (1M and 10M edges) and
  transitive closure of a DAG with about 1M pairs, by `datalog.io.spark.evaluate`
  (`local[2]` unless `--master`) and by the embedded engine, from the same
  Parquet file; the answers are compared. A decomposable recursion (TC) runs as
  one job of local fixpoints (ADR 0065), reach (no pivot) in one task (ADR 0070);
  `--case eval_spark_rounds` runs them round by round.
- **demo**: `deltalog run --engine spark` on `datalog/cli/examples/social.dl`.

Data is generated (seeded) into `$DELTALOG_DATA/spark-bench` (default
`../shared/data` beside the repository; see `bench.common.DATA_DIR`) and reused.

    python -m bench.bench_spark [--quick] [--master local[2]] [--cases ...]
        [--timeout SECONDS] [--spark-conf KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import DATA_DIR, peak_rss_mb, print_table
from bench.generators import dag_for_closure, power_law_graph
from datalog import Database

FOLDER = DATA_DIR / "spark-bench"
REPO = Path(__file__).resolve().parents[1]
EDGE = ".decl e(x: number, y: number)\n"
PROGRAMS = {
    "reach": EDGE + ".decl reach(y: number)\nreach({source}).\nreach(y) :- reach(x), e(x, y).\n",
    "tc": EDGE + ".decl tc(x: number, y: number)\ntc(x, y) :- e(x, y).\n"
    "tc(x, z) :- tc(x, y), e(y, z).\n",
}


def rss_now_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def tree_cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process and every live
    descendant (the JVM, the Python workers it forked): on a loaded machine the
    wall time of a run says little, its CPU more."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, pending = 0.0, [os.getpid()]
    while pending:
        pid = pending.pop()
        total += cpu.get(pid, 0.0)
        pending.extend(children.get(pid, []))
    return total


def edges_file(kind: str, size: int) -> Path:
    """`powerlaw-N` (N edges) or `dag-P` (about P closure pairs), as Parquet."""
    path = FOLDER / f"{kind}-{size}.parquet"
    if not path.exists():
        FOLDER.mkdir(parents=True, exist_ok=True)
        src, dst = power_law_graph(size, seed=0) if kind == "powerlaw" else dag_for_closure(size)
        pq.write_table(pa.table({"x": src, "y": dst}), path)
    return path


def source_of(path: Path) -> int:
    """The source of single-source reach: the first edge's tail (a hub, in a power law)."""
    return int(pq.read_table(path).column(0)[0].as_py())


def session(master: str, conf: list[str] | None = None) -> Any:
    from datalog.io.spark.session import spark_session

    options = dict(item.split("=", 1) for item in conf or [])
    spark = spark_session(master, options, app="deltalog-bench")
    spark.range(1).count()
    return spark


# --- cases, each in its own process ------------------------------------------------


def case_startup(args: argparse.Namespace) -> dict[str, Any]:
    start = time.perf_counter()
    session(args.master)
    return {"seconds": time.perf_counter() - start}


def case_load_direct(args: argparse.Namespace) -> dict[str, Any]:
    path = edges_file("powerlaw", args.load_rows)
    db = Database()
    db.define(EDGE)
    before = rss_now_mb()
    start, cpu = time.perf_counter(), tree_cpu_seconds()
    table = pq.read_table(path)
    with db.transaction() as tx:
        tx.insert("e", table)
    seconds, cpu = time.perf_counter() - start, tree_cpu_seconds() - cpu
    del table, tx
    gc.collect()
    return {"seconds": seconds, "cpu": cpu, "rows": pq.read_metadata(path).num_rows,
            "db_mb": rss_now_mb() - before, "peak_mb": peak_rss_mb() - before,
            "load": os.getloadavg()[0]}  # fmt: skip


def case_load_batches(args: argparse.Namespace) -> dict[str, Any]:
    """The direct load in 100,000-row batches of one transaction: a Spark load's shape
    without Spark (the database's own share of a Spark load's driver RSS)."""
    path = edges_file("powerlaw", args.load_rows)
    batches = pq.read_table(path).to_batches(max_chunksize=100_000)
    db = Database()
    db.define(EDGE)
    gc.collect()
    before = max(rss_now_mb(), peak_rss_mb())
    start = time.perf_counter()
    with db.transaction() as tx:
        for batch in batches:
            tx.insert("e", batch)
    return {"seconds": time.perf_counter() - start, "peak_mb": peak_rss_mb() - before}


def timed_spark_load(
    args: argparse.Namespace,
    frame_of: Callable[[Any, Path, Database], Any],
    deduplicate: bool = False,
) -> dict[str, Any]:
    """`load_frames` of the frame `frame_of(spark, path, db)` makes of the generated
    Parquet file, timed from the frame's making (the session already started)."""
    from datalog.io.sources.spark import load_frames

    path = edges_file("powerlaw", args.load_rows)
    spark = session(args.master)
    db = Database()
    db.define(EDGE)
    gc.collect()
    before = max(rss_now_mb(), peak_rss_mb())
    start, cpu = time.perf_counter(), tree_cpu_seconds()
    frame = frame_of(spark, path, db)
    counts = load_frames(db, {"e": frame}, deduplicate=deduplicate, progress=False)
    seconds, cpu = time.perf_counter() - start, tree_cpu_seconds() - cpu
    return {"seconds": seconds, "cpu": cpu, "rows": counts["e"],
            "peak_mb": peak_rss_mb() - before, "load": os.getloadavg()[0]}  # fmt: skip


def plain_scan(spark: Any, path: Path, db: Database) -> Any:
    from datalog.io.sources.spark import read_parquet

    return read_parquet(spark, path, db.checked.schema["e"])


def case_load_spark(args: argparse.Namespace) -> dict[str, Any]:
    """`load_frames` of `read_parquet`'s plain scan: loaded as its files' bytes (ADR 0079)."""
    return timed_spark_load(args, plain_scan)


def case_load_spark_dedup(args: argparse.Namespace) -> dict[str, Any]:
    return timed_spark_load(args, plain_scan, deduplicate=True)


def case_load_spark_frame(args: argparse.Namespace) -> dict[str, Any]:
    """`load_frames` of a frame the user made (`spark.read.parquet(...).select(...)`,
    not `read_parquet`): the JVM's row path, converted to Arrow by the executors
    (ADR 0042); `load_spark` loads a plain scan as its files' bytes (ADR 0079)."""

    def selected(spark: Any, path: Path, db: Database) -> Any:
        from pyspark.sql import functions as sf

        raw = spark.read.parquet(str(path))
        return raw.select(*[sf.col(c).alias(f"c{i}") for i, c in enumerate(raw.columns)])

    return timed_spark_load(args, selected)


def evaluation(args: argparse.Namespace, engine: str, local: bool = True) -> dict[str, Any]:
    kind, size, head = args.graph.split(":")
    path = edges_file(kind, int(size))
    text = PROGRAMS[head].format(source=source_of(path) if head == "reach" else "")
    arity = 1 if head == "reach" else 2
    if engine == "embedded":
        start, cpu = time.perf_counter(), tree_cpu_seconds()
        db = Database()
        db.define(text)
        with db.transaction() as tx:
            tx.insert("e", pq.read_table(path))
        answer = db.query_arrow(f"{head}({', '.join('xy'[:arity])})")
        seconds = time.perf_counter() - start
        cpu = tree_cpu_seconds() - cpu
        columns = [answer.column(i).to_numpy() for i in range(arity)]
    else:
        from datalog.io.sources.spark import read_parquet
        from datalog.io.spark.evaluate import evaluate
        from datalog.io.spark.transfer import arrow_batches
        from datalog.lang.checks import check_program
        from datalog.lang.parser import parse_program

        spark = session(args.master, args.spark_conf)
        start, cpu = time.perf_counter(), tree_cpu_seconds()
        checked = check_program(parse_program(text))
        frame = read_parquet(spark, path, checked.schema["e"])
        options = {} if local else {"local": False}  # a tree before ADR 0065 has no option
        result = evaluate(spark, checked, {"e": frame}, **options)[head]
        batches = [batch for _, batch in arrow_batches(result)]
        seconds = time.perf_counter() - start
        cpu = tree_cpu_seconds() - cpu
        table = pa.Table.from_batches(batches) if batches else None
        columns = [np.asarray(table.column(i)) if table else np.array([]) for i in range(arity)]
    order = np.lexsort(columns[::-1])
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(c[order]).tobytes() for c in columns))
    return {"seconds": seconds, "cpu": cpu, "tuples": len(columns[0]),
            "digest": digest.hexdigest(), "edges": pq.read_metadata(path).num_rows,
            "load": os.getloadavg()[0]}  # fmt: skip


def case_eval_spark(args: argparse.Namespace) -> dict[str, Any]:
    return evaluation(args, "spark")


def case_eval_spark_rounds(args: argparse.Namespace) -> dict[str, Any]:
    """Spark with every recursion run round by round (no local fixpoints, ADR 0065)."""
    return evaluation(args, "spark", local=False)


def case_eval_embedded(args: argparse.Namespace) -> dict[str, Any]:
    return evaluation(args, "embedded")


def case_run_spark(args: argparse.Namespace) -> dict[str, Any]:
    """`deltalog run --engine spark` on TC of the bench DAG from a fact file (the
    CLI's path: fact file read and checked by Spark, outputs written sorted), after
    session start; `run_embedded` is `deltalog run` on the same files."""
    return run_case(args, "spark")


def case_run_embedded(args: argparse.Namespace) -> dict[str, Any]:
    return run_case(args, "embedded")


def run_case(args: argparse.Namespace, engine: str) -> dict[str, Any]:
    from datalog.cli.commands import main as cli

    path = edges_file("dag", 1_000_000)
    facts = FOLDER / "dag-1000000-facts"
    if not (facts / "e.facts").exists():
        facts.mkdir(parents=True, exist_ok=True)
        table = pq.read_table(path)
        lines = np.char.add(np.char.add(table.column(0).to_numpy().astype(str), "\t"),
                            table.column(1).to_numpy().astype(str))  # fmt: skip
        (facts / "e.facts").write_text("\n".join(lines.tolist()) + "\n")
    program = FOLDER / "tc-run.dl"
    program.write_text(PROGRAMS["tc"].replace("\n", "\n.input e\n", 1) + ".output tc\n")
    out = FOLDER / f"run-output-{engine}"
    argv = ["run", str(program), "-F", str(facts), "-D", str(out)]
    if engine == "spark":
        session(args.master, args.spark_conf)
        argv += ["--engine", "spark"]
    start, cpu = time.perf_counter(), tree_cpu_seconds()
    code = cli(argv)
    seconds, cpu = time.perf_counter() - start, tree_cpu_seconds() - cpu
    written = (out / "tc.csv").read_bytes()
    return {"seconds": seconds, "cpu": cpu, "code": code, "tuples": written.count(b"\n"),
            "digest": hashlib.sha256(written).hexdigest(), "load": os.getloadavg()[0]}  # fmt: skip


def case_demo(args: argparse.Namespace) -> dict[str, Any]:
    from datalog.cli.commands import EXAMPLES
    from datalog.io.spark.run import run

    spark = session(args.master)
    start = time.perf_counter()
    out = FOLDER / "demo-output"
    run((EXAMPLES / "social.dl").read_text(), EXAMPLES / "facts", out, spark, io.StringIO())
    return {"seconds": time.perf_counter() - start}


CASES = {name[len("case_") :]: fn for name, fn in globals().items() if name.startswith("case_")}


# --- the driver ---------------------------------------------------------------------


def measure(name: str, args: argparse.Namespace, graph: str = "") -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.bench_spark", "--case", name, "--master",
               args.master, "--load-rows", str(args.load_rows), "--graph", graph,
               *[f"--spark-conf={item}" for item in args.spark_conf]]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                              check=False, timeout=args.timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        print(f"{name} {graph}: over {args.timeout} s, stopped", file=sys.stderr)
        return {"seconds": float("nan")}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        print(f"{name} {graph} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        return {"seconds": float("nan")}
    found: dict[str, Any] = json.loads(lines[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--load-rows", type=int, default=10_000_000)
    parser.add_argument("--quick", action="store_true", help="1M-row load, 1M-edge graphs only")
    parser.add_argument("--cases", default="startup,load,evaluate,demo")
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark option for the session of every case (repeatable)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds a case may run before it is stopped (NaN in the table)",
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--graph", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(CASES[args.case](args)))
        return
    if args.quick:
        args.load_rows = 1_000_000
    wanted = args.cases.split(",")
    print(f"master {args.master}; each row a fresh process\n")
    if "startup" in wanted:
        print_table([("session start + first job", measure("startup", args)["seconds"])],
                    ["what", "seconds"])  # fmt: skip
    if "load" in wanted:
        load_rows(args)
    if "evaluate" in wanted:
        evaluate_rows(args)
    if "demo" in wanted:
        demo = measure("demo", args)["seconds"]
        print_table([("social.dl (examples)", demo)], ["deltalog run --engine spark", "seconds"])


def load_rows(args: argparse.Namespace) -> None:
    direct = measure("load_direct", args)
    rows = [("direct (pyarrow + tx.insert)", direct["seconds"], 1.0, direct.get("peak_mb", 0))]
    for name, label in (("load_batches", "direct, in 100,000-row batches"),
                        ("load_spark", "spark load_frames (read_parquet: the files' bytes)"),
                        ("load_spark_frame", "spark load_frames (a frame: JVM rows)"),
                        ("load_spark_dedup", "spark load_frames, deduplicate")):  # fmt: skip
        found = measure(name, args)
        ratio = found["seconds"] / direct["seconds"]
        rows.append((label, found["seconds"], ratio, found.get("peak_mb", 0)))
    print(f"Load {args.load_rows:,} rows of Parquet; the relation takes "
          f"{direct.get('db_mb', 0):.0f} MB in the database\n")  # fmt: skip
    print_table(rows, ["path", "seconds", "x direct", "driver RSS growth MB"])


def evaluate_rows(args: argparse.Namespace) -> None:
    graphs = ["powerlaw:1000000:reach", "dag:1000000:tc"]
    if not args.quick:
        graphs.insert(1, "powerlaw:10000000:reach")
    rows = []
    for graph in graphs:
        embedded = measure("eval_embedded", args, graph)
        spark = measure("eval_spark", args, graph)
        same = "yes" if embedded.get("digest") == spark.get("digest") else "NO"
        kind, _, head = graph.split(":")
        label = f"{head} on {embedded.get('edges', 0):,} edges ({kind})"
        ratio = spark["seconds"] / embedded["seconds"]
        rows.append((label, embedded.get("tuples", 0), embedded["seconds"], spark["seconds"],
                     ratio, embedded.get("cpu", 0), spark.get("cpu", 0), same,
                     f"{embedded.get('load', 0):.1f} / {spark.get('load', 0):.1f}"))  # fmt: skip
    print_table(rows, ["program", "tuples", "embedded s", "spark s", "x embedded",
                       "embedded CPU s", "spark CPU s", "same answer", "load"])  # fmt: skip


if __name__ == "__main__":
    main()
