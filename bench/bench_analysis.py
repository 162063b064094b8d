"""Program-analysis workloads next to Soufflé (or DuckDB): CSPA-style points-to, CRDT.

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_analysis [--cspa 20000] [--crdt 2000] [--crdt-input PATH]
[--tc 1000000] [--edges 1000000] [--runs 3] [--only cspa cspa-all cspa-hub crdt tc
triangles reach] [--timeout 600] [--traced]`.

The CRDT workload's input is generated (a stand-in typing session) unless
`--crdt-input` (or `$DELTALOG_CRDT_INPUT`) names the real one: dynamic-datalog's
`problems/crdt/input.zip` (github.com/frankmcsherry/dynamic-datalog), or a directory
holding it or its unzipped `insert.txt` and `remove.txt`; `--crdt N` then takes its
first N inserts and the removes of their identifiers.

Each workload's facts are generated (`bench.analysis_data`, seeded) into a temporary
directory as Soufflé's `-F` layout, with the program as a `.dl` file; every system
then runs as a whole process (medians of `--runs` interleaved runs), its peak
resident set read by GNU time (`/usr/bin/time`; wait4 if absent, see `GNU_TIME`):
- `deltalog run` (the CLI: start-up, reading the fact files, evaluation, `.printsize`);
- `deltalog API`: the same in Python (`Database`, `load_inputs`, `query_columns` of
  the printed relation), timed inside: import, load and evaluation apart; with
  `--traced`, also the evaluation's own peak of traced memory (tracemalloc, numpy's
  arrays included: what the evaluation adds to the process's floor; its times are
  then slower);
- Soufflé's interpreter, `-j1`, when `$DELTALOG_SOUFFLE` names its binary (it builds
  from source with cmake, bison and flex; it is kept out of the repository);
- `start-up`: `deltalog --version`, the fixed cost of any CLI run (the issue's goal is
  `deltalog run` within 1.2x of the API plus start-up, here the API script's whole
  process: `run / API` on the CLI's row; the `tc` workload, a transitive closure of
  about `--tc` pairs, is that comparison);
- DuckDB (CSPA only, when Soufflé is not given): the same rules evaluated semi-naively
  by SQL statements, one round at a time, until nothing is new.
Every system's printed size must agree (the row says `MISMATCH` otherwise).
Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.analysis_data import CRDT, CSPA, crdt_facts, crdt_input_facts, cspa_facts, write_facts
from bench.common import format_table
from bench.generators import dag_for_closure, power_law_graph

MARK = "RESULT "
# Set (by `--traced`) for the API child: it reports the evaluation's own peak of traced
# memory (`tracemalloc`, numpy's arrays included), apart from the process's floor of
# interpreter, modules and facts that peak RSS counts too (ADR 0072).
TRACED = "DELTALOG_BENCH_TRACED"
# A child's peak resident set (wait4's `ru_maxrss`) counts the memory of the process
# it was forked from up to its `exec`: run straight from this one (which holds the
# generated facts), every system read at least this process's size (95 MiB at 1M
# edges), above Soufflé's own peak. GNU time, in between, is a small parent.
GNU_TIME = shutil.which("time", path="/usr/bin:/bin")
# The relation compared; `cspa-all` prints CSPA's three relations of one recursive group
# (valueAlias last), which one evaluation serves (ADR 0061).
PRINTED = {
    "cspa": "valueAlias",
    "cspa-all": "valueAlias",
    "cspa-hub": "valueAlias",
    "crdt": "result",
    "tc": "tc",
    "triangles": "tri",
    "reach": "reach",
}
TC = """
.decl edge(x: number, y: number)
.input edge
.decl tc(x: number, y: number)
tc(x, y) :- edge(x, y).
tc(x, z) :- tc(x, y), edge(y, z).
"""
# Each undirected edge once as (min, max): every triangle counted once.
TRIANGLES = """
.decl edge(x: number, y: number)
.input edge
.decl tri(x: number, y: number, z: number)
tri(x, y, z) :- edge(x, y), edge(y, z), edge(x, z).
"""
REACH = """
.decl edge(x: number, y: number)
.input edge
.decl source(x: number)
.input source
.decl reach(x: number)
reach(x) :- source(x).
reach(y) :- reach(x), edge(x, y).
"""


def _program(workload: str) -> str:
    """The program with only the relation compared printed (Soufflé computes every
    relation anyway; Deltalog computes what the printed one needs)."""
    text = {"crdt": CRDT, "tc": TC, "triangles": TRIANGLES, "reach": REACH}.get(workload, CSPA)
    if workload == "cspa-all":
        return text
    kept = f".printsize {PRINTED[workload]}"
    lines = [line for line in text.splitlines() if not line.startswith(".printsize")]
    return "\n".join([*lines, kept, ""])


def prepare(workload: str, size: int, directory: Path, crdt_input: Path | None = None) -> Path:
    """Facts and program of `workload` at `size` in `directory` (the CRDT's real input
    from `crdt_input`, when given); the program's path."""
    if workload == "crdt" and crdt_input is not None:
        facts = crdt_input_facts(crdt_input, size)
    elif workload == "tc":  # a random DAG whose closure has about `size` pairs
        src, dst = dag_for_closure(size, seed=0)
        facts = {"edge": np.stack([src, dst], 1)}
    elif workload in ("triangles", "reach"):  # a power-law graph of `size` edges
        src, dst = power_law_graph(size, seed=0, directed=workload == "reach")
        facts = {"edge": np.stack([src, dst], 1)}
        if workload == "reach":  # from the biggest hub: it reaches the most
            facts["source"] = np.array([[np.bincount(src).argmax()]])
    else:
        hub = workload == "cspa-hub"
        facts = crdt_facts(size) if workload == "crdt" else cspa_facts(size, hub=hub)
    write_facts(facts, directory / "facts")
    program = directory / f"{workload}.dl"
    program.write_text(_program(workload), encoding="utf-8")
    return program


# -- children ------------------------------------------------------------------------


def api_child(program: Path) -> dict[str, Any]:
    """The Python API in this process: import, load and evaluation timed apart."""
    start = time.perf_counter()
    from datalog import Database
    from datalog.io.sources.csv import load_inputs

    imported = time.perf_counter()
    db = Database()
    db.define(program.read_text(encoding="utf-8"))
    load_inputs(db, program.parent / "facts")
    loaded = time.perf_counter()
    queries = []
    for directive in [d for d in db.checked.directives if d.kind == "printsize"]:
        arity = db.checked.schema.require(directive.relation).arity
        queries.append(f"{directive.relation}({', '.join(f'x{i}' for i in range(arity))})")
    traced = bool(os.environ.get(TRACED))
    if traced:  # (numpy reports its arrays to tracemalloc)
        tracemalloc.start()
    size = db.query_many(queries)[-1].size  # (the last printed is the one compared)
    done = time.perf_counter()
    found = {
        "size": size,
        "import_s": imported - start,
        "load_s": loaded - imported,
        "eval_s": done - loaded,
    }
    if traced:
        found["traced_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return found


def duckdb_child(program: Path) -> dict[str, Any]:
    """CSPA's rules, semi-naively, in DuckDB SQL (see the module)."""
    import duckdb

    con = duckdb.connect()
    facts = program.parent / "facts"
    for name in ("assign", "dereference"):
        path = facts / f"{name}.facts"
        con.execute(
            f"create table {name} as select column0 as a, column1 as b from "
            f"read_csv('{path}', delim='\t', header=false, columns={{'column0': 'BIGINT', "
            "'column1': 'BIGINT'})"
        )
    rules = {  # relation -> select statements over vf, ma, va (full) and d_* (new)
        "vf": [
            "select a, b from assign",
            "select a, a from assign",
            "select b, b from assign",
            "select s.a, m.b from assign s join d_ma m on s.b = m.a",
            "select x.a, y.b from d_vf x join vf y on x.b = y.a",
            "select x.a, y.b from vf x join d_vf y on x.b = y.a",
        ],
        "ma": [
            "select b, b from assign",
            "select a, a from assign",
            "select d1.b, d2.b from dereference d1 join d_va v on d1.a = v.a "
            "join dereference d2 on v.b = d2.a",
        ],
        "va": [
            "select x.b, y.b from d_vf x join vf y on x.a = y.a",
            "select x.b, y.b from vf x join d_vf y on x.a = y.a",
            "select x.b, y.b from d_vf x join ma m on x.a = m.a join vf y on m.b = y.a",
            "select x.b, y.b from vf x join d_ma m on x.a = m.a join vf y on m.b = y.a",
            "select x.b, y.b from vf x join ma m on x.a = m.a join d_vf y on m.b = y.a",
        ],
    }
    for rel in rules:
        con.execute(f"create table {rel} (a BIGINT, b BIGINT)")
        con.execute(f"create table d_{rel} (a BIGINT, b BIGINT)")
    rounds = 0
    while True:
        rounds += 1
        for rel, selects in rules.items():
            body = " union ".join(selects)
            con.execute(
                f"create or replace table n_{rel} as select * from ({body}) as t(a, b) "
                f"except select a, b from {rel}"
            )
        news = 0
        for rel in rules:
            con.execute(f"insert into {rel} select * from n_{rel}")
            con.execute(f"create or replace table d_{rel} as select * from n_{rel}")
            news += con.execute(f"select count(*) from n_{rel}").fetchone()[0]  # type: ignore[index]
        if not news:
            break
    size = con.execute("select count(*) from va").fetchone()[0]  # type: ignore[index]
    return {"size": int(size), "rounds": rounds}


# -- the driver ----------------------------------------------------------------------


def _command(system: str, program: Path, out: Path) -> list[str]:
    facts = str(program.parent / "facts")
    if system == "deltalog run":
        cli = [sys.executable, "-m", "datalog.cli", "run", str(program)]
        return [*cli, "-F", facts, "-D", str(out)]
    if system == "souffle":
        binary = os.environ["DELTALOG_SOUFFLE"]
        return [binary, "-j1", "-F", facts, "-D", str(out), str(program)]
    if system == "start-up":
        return [sys.executable, "-m", "datalog.cli", "--version"]
    child = "api" if system == "deltalog API" else "duckdb"
    return [sys.executable, "-m", "bench.bench_analysis", "--child", child, str(program)]


def measure(system: str, program: Path, timeout: float) -> dict[str, Any]:
    """One whole process: wall seconds, peak MiB, the printed size (and child figures)."""
    out = program.parent / "out"
    out.mkdir(exist_ok=True)
    cmd, report = _command(system, program, out), program.parent / "peak.txt"
    if GNU_TIME:  # its child starts from a small process: see `GNU_TIME`
        cmd = [GNU_TIME, "-f", "%M", "-o", str(report), *cmd]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    status = "ok"
    while True:
        pid, code, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > timeout:
            status = "timeout"
            os.killpg(proc.pid, signal.SIGKILL)
            _, code, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.01)
    wall = time.monotonic() - start
    text = proc.stdout.read() if proc.stdout else ""
    peak_kb = usage.ru_maxrss
    if GNU_TIME and report.exists():
        peak_kb = int(report.read_text().split()[-1])
    result: dict[str, Any] = {"status": status, "wall_s": wall, "peak_mb": peak_kb / 1024}
    if status == "ok" and os.waitstatus_to_exitcode(code):
        result["status"] = f"failed ({os.waitstatus_to_exitcode(code)})"
    for line in text.splitlines():
        if line.startswith(MARK):
            result.update(json.loads(line[len(MARK) :]))
        elif "\t" in line and line.split("\t")[-1].strip().isdigit():
            result["size"] = int(line.split("\t")[-1])
    return result


def systems(workload: str) -> list[str]:
    ours = ["deltalog run", "deltalog API", "start-up"]
    if os.environ.get("DELTALOG_SOUFFLE"):
        return [*ours, "souffle"]
    return [*ours, "duckdb"] if workload.startswith("cspa") else ours


def _cli_ratio(found: dict[str, list[dict[str, Any]]]) -> str:
    """`deltalog run`'s wall time over the API script's (interpreter start-up, import,
    load and evaluation: the same work written in Python)."""
    walls = {
        system: [r["wall_s"] for r in found.get(system, []) if r["status"] == "ok"]
        for system in ("deltalog run", "deltalog API")
    }
    if not all(walls.values()):
        return ""
    ratio = statistics.median(walls["deltalog run"]) / statistics.median(walls["deltalog API"])
    return f"run / API {ratio:.2f}"


def run(
    workload: str, size: int, runs: int, timeout: float, crdt_input: Path | None = None
) -> list[list[object]]:
    directory = Path(tempfile.mkdtemp(prefix=f"deltalog-{workload}-"))
    try:
        program = prepare(workload, size, directory, crdt_input)
        found: dict[str, list[dict[str, Any]]] = {s: [] for s in systems(workload)}
        for _ in range(runs):  # interleaved: a busy moment hits every system alike
            for system in found:
                found[system].append(measure(system, program, timeout))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return _rows(workload, size, found)


def _rows(workload: str, size: int, found: dict[str, list[dict[str, Any]]]) -> list[list[object]]:
    sizes = {
        r.get("size")
        for system, results in found.items()
        for r in results
        if r["status"] == "ok" and system != "start-up"
    }
    agree = "" if len(sizes) == 1 else " MISMATCH"
    peer = found.get("souffle") or found.get("duckdb") or []
    base = [r for r in peer if r["status"] == "ok"]
    base_s = statistics.median(r["wall_s"] for r in base) if base else None
    base_mb = statistics.median(r["peak_mb"] for r in base) if base else None
    rows: list[list[object]] = []
    for system, results in found.items():
        ok = [r for r in results if r["status"] == "ok"]
        if not ok:
            rows.append([f"{workload} {size:,}", system, results[0]["status"], "", "", "", ""])
            continue
        wall = statistics.median(r["wall_s"] for r in ok)
        peak = statistics.median(r["peak_mb"] for r in ok)
        inside = ""
        if "eval_s" in ok[0]:
            parts = ("import_s", "load_s", "eval_s")
            inside = " / ".join(f"{statistics.median(r[p] for r in ok):.2f}" for p in parts)
            if "traced_mb" in ok[0]:
                inside += f" (eval traced {statistics.median(r['traced_mb'] for r in ok):.0f} MiB)"
        ratio = f"{wall / base_s:.1f}x / {peak / base_mb:.1f}x" if base_s and base_mb else ""
        if system == "deltalog run":
            ratio = " ".join(filter(None, [ratio, _cli_ratio(found)]))
        rows.append(
            [
                f"{workload} {size:,}",
                system,
                "" if system == "start-up" else f"{ok[0].get('size', '?'):,}{agree}",
                f"{wall:.2f}",
                f"{peak:,.0f}",
                inside,
                ratio,
            ]
        )
    return rows


HEAD = ["workload", "system", "printed size", "wall s", "peak MiB", "import/load/eval s", "vs peer"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cspa", type=int, default=20_000, help="variables of the program")
    parser.add_argument("--crdt", type=int, default=2_000, help="insert operations")
    parser.add_argument(
        "--crdt-input",
        type=Path,
        default=os.environ.get("DELTALOG_CRDT_INPUT") or None,
        help="dynamic-datalog's crdt input.zip (or its folder): the real input, not a stand-in",
    )
    parser.add_argument("--tc", type=int, default=1_000_000, help="closure pairs (about)")
    parser.add_argument("--edges", type=int, default=1_000_000, help="triangles/reach graph")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=list(PRINTED), default=list(PRINTED))
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument(
        "--traced",
        action="store_true",
        help="the API's evaluation traced (tracemalloc): its own peak, its times slower",
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.traced:  # (the API children inherit it)
        os.environ[TRACED] = "1"
    if args.child:
        kind, program = args.child
        found = api_child(Path(program)) if kind == "api" else duckdb_child(Path(program))
        print(MARK + json.dumps(found), flush=True)
        return 0
    rows: list[list[object]] = []
    for workload in args.only:
        sizes = {"crdt": args.crdt, "tc": args.tc, "triangles": args.edges, "reach": args.edges}
        size = sizes.get(workload, args.cspa)
        real = args.crdt_input if workload == "crdt" else None
        rows += run(workload, size, args.runs, args.timeout, real)
    print(format_table(rows, HEAD))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
