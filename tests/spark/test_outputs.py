"""`run --engine spark` writes the embedded engine's files, whether the driver sorts
an output itself (fetched as Arrow, under `spark.deltalog.driverSortBytes`) or Spark
sorts it (over that limit), and a local fixpoint's answer reads the same as Arrow
blobs and through a Spark plan (ADR 0074)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
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


def test_run_reads_each_fact_file_once_on_the_driver_without_a_job(
    spark: SparkSession, tmp_path: Path
) -> None:
    from datalog.io.sources.csv import FactFile
    from datalog.io.sources.spark import driver_fact_files
    from datalog.io.spark.transfer import arrow_batches

    schema = check_program(parse_program(PROGRAM + ".decl u(x: unsigned)\n")).schema
    folder = facts(tmp_path / "facts")
    (folder / "u.facts").write_text("18446744073709551615\n0\n")
    files = [FactFile(schema[n], folder / f"{n}.facts") for n in ("e", "name", "w", "u")]
    tracker = spark.sparkContext.statusTracker()
    before = max(tracker.getJobIdsForGroup(None), default=-1)
    frames = driver_fact_files(spark, files)
    sent = [batch for _, batch in arrow_batches(frames["e"])]  # read back as it was sent
    assert max(tracker.getJobIdsForGroup(None), default=-1) == before  # nothing ran on Spark
    columns = pa.Table.from_batches(sent).to_pydict().values()
    assert sorted(zip(*columns, strict=True)) == sorted(EDGES)
    for name in ("e", "name", "w"):
        (folder / f"{name}.facts").write_text("garbage\n")  # read already: not again
    found = {n: sorted(tuple(row) for row in f.collect()) for n, f in frames.items()}
    assert found["e"] == sorted(EDGES) and found["name"] == sorted(NAMES)
    assert found["w"] == sorted(WEIGHTS)
    assert [int(x) for (x,) in found["u"]] == [0, 2**64 - 1]
    assert frames["e"].rdd.getNumPartitions() == spark.sparkContext.defaultParallelism


def test_a_bad_fact_file_is_reported_as_deltalog_run_reports_it(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "p.dl"
    program.write_text(PROGRAM)
    folder = facts(tmp_path / "facts")
    (folder / "e.facts").write_text("1\t2\n\n3\tx\n")
    assert main(["run", str(program), "-F", str(folder), "-D", str(tmp_path / "a")]) == 1
    embedded = capsys.readouterr().err
    engine = ["--engine", "spark", "--spark-master", "local[2]"]  # the running session
    assert main(["run", str(program), "-F", str(folder), "-D", str(tmp_path / "b"), *engine]) == 1
    assert capsys.readouterr().err == embedded
    assert "line 3, column 2" in embedded
