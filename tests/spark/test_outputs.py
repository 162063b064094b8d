"""`run --engine spark` writes the embedded engine's files, whether the driver sorts
an output itself (fetched as Arrow, under `spark.deltalog.driverSortBytes`) or Spark
sorts it (over that limit), and a local fixpoint's answer reads the same as Arrow
blobs and through a Spark plan (ADR 0074)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from datalog import Database
from datalog.cli.commands import main
from datalog.lang.checks import check_program
from datalog.lang.parser import parse_program

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

PROGRAM = """
.decl e(x: number, y: number)
.input e
.decl name(x: number, s: symbol)
.input name
.decl w(x: number, f: float)
.input w
.decl tc(x: number, y: number)
.output tc
tc(x, y) :- e(x, y).
tc(x, z) :- tc(x, y), e(y, z).
.decl named(s: symbol, t: symbol)
.output named
named(s, t) :- tc(x, y), name(x, s), name(y, t).
.decl heavy(x: number, f: float)
.output heavy
heavy(x, f) :- tc(x, y), w(y, f).
.decl none(x: number)
.output none
none(x) :- e(x, x).
"""
EDGES = [(i, i + 1) for i in range(30)] + [(i, 2 * i) for i in range(1, 15)] + [(29, 3)]
NAMES = [(i, f"n{i:02d}" if i % 3 else f"é{i}") for i in range(31)]
WEIGHTS = [(i, i / 4 - 2.0) for i in range(0, 31, 2)]


def facts(folder: Path) -> Path:
    folder.mkdir()
    for name, rows in (("e", EDGES), ("name", NAMES), ("w", WEIGHTS)):
        lines = ["\t".join(str(v) for v in row) for row in rows]
        (folder / f"{name}.facts").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.parametrize("limit", [None, "1"])  # the driver sorts / Spark sorts
def test_outputs_are_the_embedded_engines_whoever_sorts_them(
    spark: SparkSession, tmp_path: Path, limit: str | None
) -> None:
    from datalog.io.spark.run import SORT_KEY, run

    program = tmp_path / "p.dl"
    program.write_text(PROGRAM)
    folder = facts(tmp_path / "facts")
    assert main(["run", str(program), "-F", str(folder), "-D", str(tmp_path / "a")]) == 0
    if limit is not None:
        spark.conf.set(SORT_KEY, limit)
    try:
        run(PROGRAM, folder, tmp_path / "b", spark)
    finally:
        spark.conf.unset(SORT_KEY)
    written = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert written == ["heavy.csv", "named.csv", "none.csv", "tc.csv"]
    assert written == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in written:
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text(), name
    assert (tmp_path / "b" / "tc.csv").read_text().count("\n") > 400  # a real closure


def test_a_local_answer_reads_the_same_as_blobs_and_through_spark(spark: SparkSession) -> None:
    from pyspark.sql import functions as sf

    from datalog.io.spark.evaluate import evaluate
    from datalog.io.spark.transfer import arrow_batches

    text = ".decl e(x: number, y: number)\n.decl tc(x: number, y: number)\n"
    text += "tc(x, y) :- e(x, y).\ntc(x, z) :- tc(x, y), e(y, z).\n"
    frame = spark.createDataFrame(EDGES, "a long, b long")
    answer = evaluate(spark, check_program(parse_program(text)), {"e": frame})["tc"]
    blobs = {
        row
        for _, batch in arrow_batches(answer)
        for row in zip(*(c.to_pylist() for c in batch.columns), strict=True)
    }
    db = Database()
    db.define(text)
    with db.transaction() as tx:
        tx.insert("e", EDGES)
    expected = set(db.query("tc(x, y)"))
    assert blobs == expected
    # a Spark plan reads the decoded rows (a join and an aggregate over them)
    joined = answer.alias("a").join(answer.alias("b"), sf.col("a.c1") == sf.col("b.c0"))
    assert joined.count() == sum(1 for (_, y) in expected for (x, _) in expected if x == y)
    assert {tuple(r) for r in answer.collect()} == expected
