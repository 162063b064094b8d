"""Spark as loader and as evaluator: load times into a Database, and scale-out
evaluation of transitive closure and triangles.

Layer: bench — may import anything public from deltalog packages and peers.
Prints a table; asserts nothing. Sizes are small enough for a two-core machine
in a few minutes; pass `--scale` to multiply the generated sizes.

- LDBC sample: `datalog.sources.spark.load_ldbc` (partitioned, Arrow
  streaming) vs a plain pyarrow load of the same files into the same relations.
- SNB-shaped network: persons with 7 attributes plus `knows`, ~1M rows at
  scale 1, written as Parquet, loaded by Spark vs by pyarrow.
- `datalog.spark.evaluate` of transitive closure on `dag_for_closure` and of
  triangles on an undirected `power_law_graph`.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from bench.common import DATA_DIR, print_table, timed
from bench.generators import dag_for_closure, power_law_graph
from datalog import Database

LDBC = DATA_DIR / "ldbc-snb" / "vanilla"
LDBC_FILES = ("person", "person_knows_person", "person_likes_post", "post")
ATTRIBUTES = ("firstName", "lastName", "gender", "birthday", "creationDate", "browserUsed", "city")
Row = tuple[str, str, float, str]


def pyarrow_ldbc(db: Database, files: tuple[str, ...]) -> None:
    """The same relations `load_ldbc` makes, read by pyarrow (no list splitting)."""
    from datalog.sources.spark import ldbc_files

    parse = pacsv.ParseOptions(delimiter="|", quote_char=False)
    with db.transaction() as tx:
        for name, paths in ldbc_files(LDBC).items():
            if name not in files:
                continue
            table = pa.concat_tables(pacsv.read_csv(p, parse_options=parse) for p in paths)
            if "_" in name:
                tx.insert(name, table.select([0, 1]))
                continue
            for i, column in enumerate(table.column_names[1:], start=1):
                if column not in ("email", "language"):
                    tx.insert(f"{name}.{column}", table.select([0, i]))


def ldbc_rows(spark: Any) -> list[Row]:
    from datalog.sources.spark import ldbc_declarations, ldbc_relations, load_ldbc

    spark_db = Database()
    _, spark_s = timed(lambda: load_ldbc(spark_db, spark, LDBC, files=LDBC_FILES, partitions=4))
    plain_db = Database()
    relations = ldbc_relations(spark, LDBC, LDBC_FILES)
    plain_db.define(ldbc_declarations(relations))
    _, plain_s = timed(lambda: pyarrow_ldbc(plain_db, LDBC_FILES))
    rows = sum(len(spark_db.query(f"{n}(a, b)")) for n in ("person_knows_person", "post.length"))
    label = f"LDBC sample {'+'.join(LDBC_FILES)}"
    return [(label, "spark load", spark_s, f"{rows} rows in 2 checked relations"),
            (label, "pyarrow load", plain_s, "")]  # fmt: skip


def snb_network(folder: Path, persons: int, seed: int = 0) -> int:
    """Parquet files `person.<attribute>` and `knows`; returns the total rows."""
    rng = np.random.default_rng(seed)
    ids = np.arange(persons, dtype=np.int64)
    total = 0
    for attribute in ATTRIBUTES:
        if attribute in ("birthday", "creationDate"):
            values = pa.array(rng.integers(0, 10**12, persons))
        else:
            values = pa.array([f"{attribute}{v}" for v in rng.integers(0, 1000, persons)])
        pq.write_table(pa.table({"id": ids, "value": values}), folder / f"person.{attribute}")
        total += persons
    src, dst = power_law_graph(3 * persons, persons, seed=seed)
    pq.write_table(pa.table({"src": src, "dst": dst}), folder / "knows")
    return total + len(src)


def snb_decls() -> str:
    lines = [".decl knows(src: number, dst: number)"]
    for attribute in ATTRIBUTES:
        kind = "number" if attribute in ("birthday", "creationDate") else "symbol"
        lines.append(f".decl person.{attribute}(id: number, value: {kind})")
    return "\n".join(lines)


def snb_rows(spark: Any, persons: int) -> list[Row]:
    from datalog.sources.spark import load_frames, read_parquet

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        total = snb_network(folder, persons)
        names = ["knows", *(f"person.{a}" for a in ATTRIBUTES)]
        spark_db = Database()
        spark_db.define(snb_decls())
        schema = spark_db.checked.schema
        frames = {n: read_parquet(spark, folder / n, schema[n]) for n in names}
        _, spark_s = timed(lambda: load_frames(spark_db, frames, partitions=4))
        plain_db = Database()
        plain_db.define(snb_decls())

        def plain() -> None:
            with plain_db.transaction() as tx:
                for name in names:
                    tx.insert(name, pq.read_table(folder / name))

        _, plain_s = timed(plain)
    label = f"SNB-shaped, {persons:,} persons, {total:,} rows"
    return [(label, "spark load", spark_s, ""), (label, "pyarrow load", plain_s, "")]


def evaluation_rows(spark: Any, scale: float) -> list[Row]:
    from datalog.checks import check_program
    from datalog.parser import parse_program
    from datalog.spark.evaluate import evaluate

    cases: list[tuple[str, str, Callable[[], tuple[np.ndarray, np.ndarray]]]] = [
        ("reach", "reach(x, y) :- e(x, y).\nreach(x, z) :- reach(x, y), e(y, z).",
         lambda: dag_for_closure(int(20_000 * scale))),
        ("tri", "tri(a, b, c) :- e(a, b), e(b, c), e(a, c).",
         lambda: power_law_graph(int(20_000 * scale), directed=False)),
    ]  # fmt: skip
    rows: list[Row] = []
    for head, rules, edges in cases:
        src, dst = edges()
        arity = 2 if head == "reach" else 3
        cols = ", ".join(f"c{i}: number" for i in range(arity))
        text = f".decl e(x: number, y: number)\n.decl {head}({cols})\n{rules}\n"
        checked = check_program(parse_program(text))
        frame = spark.createDataFrame(pa.table({"a": src, "b": dst}))

        def run(checked: Any = checked, frame: Any = frame, head: str = head) -> int:
            return int(evaluate(spark, checked, {"e": frame})[head].count())

        size, seconds = timed(run)
        rows.append(
            (f"{head} on {len(src):,} edges", "spark evaluate", seconds, f"{size:,} tuples")
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    from datalog.spark.session import local_session

    spark = local_session(args.master, shuffle_partitions=4, app="deltalog-bench")
    spark.range(1).count()  # start the JVM and the executors before timing
    rows: list[Row] = []
    if LDBC.is_dir():
        rows += ldbc_rows(spark)
    rows += snb_rows(spark, int(100_000 * args.scale))
    rows += evaluation_rows(spark, args.scale)
    print_table(rows, ["input", "path", "seconds", "note"])
    print("10M-edge closure/triangles: not run here (two cores; see --scale)")


if __name__ == "__main__":
    main()
