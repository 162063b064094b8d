"""The process floor of `deltalog run`: what a run holds before any evaluation (ADR 0084).

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_floor [--runs 5] [--trees DIR ...] [--steps]`.

Generates CSPA's inputs (20,000 variables, `bench.bench_analysis.prepare`), its hub-shaped
variant and the small CRDT workload (2,000 operations), plus `floor.dl`: CSPA's program
printing only its base relation `assign` (a run that loads and counts, evaluates no rule).
Each tree of `--trees` (default: this checkout) runs each case as a whole process, the
trees alternating run by run, its modules from that tree (`PYTHONPATH`); a row gives the
median peak resident set (GNU time's `%M`, `bench_analysis.GNU_TIME`) and CPU seconds.
With `--steps`, one process per tree also reports its resident set and peak after each
step of a run (interpreter, numpy, the database's modules, the program parsed and checked,
the facts loaded, the outputs read), read from `/proc/self/status`.
Compile the trees' bytecode first (`python -m compileall`), as an install would.
Figures are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.bench_analysis import GNU_TIME, prepare
from bench.common import format_table

ROOT = Path(__file__).resolve().parents[1]
CASES = {"floor": ("cspa", 20_000), "cspa": ("cspa", 20_000), "cspa-hub": ("cspa-hub", 20_000)}
CASES["crdt"] = ("crdt", 2_000)
# A child reporting its resident set after each step of `deltalog run`'s work.
STEPS = """
import json, os, sys
def status():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return [round(int(fields[k].split()[0]) / 1024, 1) for k in ("VmRSS", "VmHWM")]
found = [("interpreter", status())]
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy
found.append(("numpy", status()))
from datalog.db.database import Database
from datalog.io.sources.csv import load_inputs, read_outputs
db = Database()
found.append(("database's modules", status()))
db.define(open(sys.argv[1], encoding="utf-8").read())
found.append(("program parsed and checked", status()))
load_inputs(db, sys.argv[2], progress=False)
found.append(("facts loaded", status()))
read_outputs(db)
found.append(("outputs read", status()))
print(json.dumps(found))
"""


def inputs(folder: Path) -> dict[str, Path]:
    """Each case's program, its facts in `facts/` beside it."""
    programs = {}
    for case, (workload, size) in CASES.items():
        place = folder / case
        place.mkdir()
        program = prepare(workload, size, place)
        if case == "floor":  # the base relation only: nothing to evaluate
            text = program.read_text(encoding="utf-8").replace(".printsize valueAlias", "")
            program = place / "floor.dl"
            program.write_text(text + ".printsize assign\n", encoding="utf-8")
        programs[case] = program
    return programs


def run_once(tree: Path, program: Path) -> tuple[float, float]:
    """Peak resident MiB and CPU seconds of `deltalog run program -F facts` on `tree`."""
    command = [sys.executable, "-m", "datalog.cli.commands", "run", program.name, "-F", "facts"]
    assert GNU_TIME is not None, "GNU time (/usr/bin/time) is needed for peaks"
    done = subprocess.run(
        [GNU_TIME, "-f", "%M %U %S", *command],
        cwd=program.parent,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    peak, user, system = done.stderr.split()[-3:]
    return int(peak) / 1024, float(user) + float(system)


def steps(tree: Path, program: Path) -> list[tuple[str, list[float]]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", STEPS, program.name, "facts"],
        cwd=program.parent,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [(name, values) for name, values in json.loads(done.stdout.splitlines()[-1])]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--trees", type=Path, nargs="+", default=[ROOT])
    parser.add_argument("--steps", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="deltalog-floor-") as folder:
        programs = inputs(Path(folder))
        rows = []
        for case, program in programs.items():
            found: dict[Path, list[tuple[float, float]]] = {tree: [] for tree in args.trees}
            for i in range(args.runs):  # the trees alternate, first one then the other
                for tree in args.trees if i % 2 == 0 else args.trees[::-1]:
                    found[tree].append(run_once(tree, program))
            for tree, runs in found.items():
                peak = statistics.median(p for p, _ in runs)
                cpu = statistics.median(c for _, c in runs)
                rows.append([case, tree.name, f"{peak:.1f}", f"{cpu:.2f}"])
        print(format_table(rows, ["case", "tree", "peak MiB", "CPU s"]))
        print(f"load average {os.getloadavg()[0]:.1f}")
        if args.steps:
            for tree in args.trees:
                table = steps(tree, programs["floor"])
                print(f"\n{tree.name}: resident and peak MiB after each step (floor.dl)")
                print(format_table([[n, *v] for n, v in table], ["step", "resident", "peak"]))


if __name__ == "__main__":
    main()
