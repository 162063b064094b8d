"""Writing `.output` files: whole columns against the row writer they replaced.

Layer: bench — may import anything public from deltalog packages.
Run: `python -m bench.bench_output [--rows 1000000] [--runs 3]`.

Each relation of `--rows` random rows is read once (`read_outputs`, as `deltalog
run` does) and then written to a file: `columns` is `write_outputs` (sorted by one
Arrow sort, formatted by column, `datalog.io.sources.text`), `rows` the writer
before it (`sorted(answer.rows())`, one Python tuple a line). Medians of `--runs`,
wall and CPU seconds of the writing alone; the two files must be byte-identical
(exit 1 otherwise). Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.common import format_table
from datalog import Database
from datalog.io.sources.csv import read_outputs, write_outputs, write_rows

SHAPES = {
    "edges (number, number)": ("a: number, b: number", ("number", "number")),
    "names (number, symbol)": ("a: number, s: symbol", ("number", "symbol")),
    "scores (symbol, float, unsigned)": (
        "s: symbol, f: float, u: unsigned",
        ("symbol", "float", "unsigned"),
    ),
}


def column(kind: str, rows: int, rng: np.random.Generator) -> object:
    if kind == "number":
        return rng.integers(-(10**9), 10**9, rows)
    if kind == "unsigned":
        return rng.integers(0, 2**63, rows, dtype=np.uint64)
    if kind == "float":
        return np.round(rng.normal(size=rows) * 1000, 3)
    words = np.array([f"name-{i}" for i in range(100_000)], dtype=object)
    return words[rng.integers(0, len(words), rows)]


def database(columns: str, kinds: tuple[str, ...], rows: int) -> Database:
    db = Database()
    db.define(f".decl r({columns})\n.output r\n")
    rng = np.random.default_rng(0)
    db.insert("r", [column(kind, rows, rng) for kind in kinds])
    return db


def timed(job: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    job()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    table, failed = [], 0
    with tempfile.TemporaryDirectory() as folder:
        for shape, (columns, kinds) in SHAPES.items():
            db = database(columns, kinds, args.rows)
            answers = read_outputs(db)
            by_rows = Path(folder) / "rows.csv"

            def rows(answers: dict = answers, by_rows: Path = by_rows) -> None:
                with by_rows.open("w", encoding="utf-8", newline="\n") as stream:
                    write_rows(stream, sorted(answers["r"].rows()))

            def columnar(db: Database = db, answers: dict = answers) -> None:
                write_outputs(db, folder, answers=answers)

            times: dict[str, list[tuple[float, float]]] = {"rows": [], "columns": []}
            for _ in range(args.runs):  # interleaved
                times["rows"].append(timed(rows))
                times["columns"].append(timed(columnar))
            same = by_rows.read_bytes() == (Path(folder) / "r.csv").read_bytes()
            failed |= not same
            for writer, found in times.items():
                wall = statistics.median(t[0] for t in found)
                cpu = statistics.median(t[1] for t in found)
                table.append([shape, writer, wall, cpu, "yes" if same else "NO"])
    print(f"### writing a {args.rows:,}-row `.output` relation\n")
    print(format_table(table, ["relation", "writer", "wall s", "cpu s", "identical"]))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
