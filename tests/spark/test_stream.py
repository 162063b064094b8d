"""Structured Streaming into a Database: one micro-batch, one epoch, exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from datalog import Database
from datalog.io.sources.spark_stream import MARKS, BatchSink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.spark
def test_each_micro_batch_commits_one_epoch(spark: SparkSession, tmp_path: Path) -> None:
    from datalog.io.sources.spark_stream import stream_into

    db = Database()
    db.define(".decl edge(x: number, y: number)\n.decl reach(x: number, y: number)\n"
              "reach(x, y) :- edge(x, y).\nreach(x, z) :- reach(x, y), edge(y, z).\n")  # fmt: skip
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "1.csv").write_text("1,2,1\n2,3,1\n")
    frame = spark.readStream.schema("x long, y long, d long").option("maxFilesPerTrigger", 1)
    query, sink = stream_into(
        db, "edge", frame.csv(str(inbox)), diff_column="d", checkpoint=str(tmp_path / "chk")
    )
    try:
        query.processAllAvailable()
        assert sorted(db.query("reach(1, y)")) == [(2,), (3,)]
        (inbox / "2.csv").write_text("3,4,1\n2,3,-1\n")
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(db.query("reach(x, y)")) == [(1, 2), (3, 4)]
    assert len(sink.epochs) == 2
    assert sorted(sink.epochs.values()) == list(range(db.epoch - 1, db.epoch + 1))


def write_inbox(inbox: Path) -> None:
    """Three files, one micro-batch each, in this order (distinct modification times):
    the retraction of (3, 4) in the last one leaves it present if batch 1 applied twice
    (the relation is a multiset)."""
    inbox.mkdir()
    for n, text in enumerate(["1,2,1\n2,3,1\n", "3,4,1\n", "3,4,-1\n"]):
        path = inbox / f"{n}.csv"
        path.write_text(text)
        os.utime(path, (1_700_000_000 + 10 * n, 1_700_000_000 + 10 * n))


def killed_child(tmp_path: Path, kill_after: int) -> subprocess.CompletedProcess[str]:
    args = [str(tmp_path / p) for p in ("db", "in", "chk")]
    command = [sys.executable, "-m", "tests.spark.stream_child", *args, str(kill_after)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.spark
@pytest.mark.slow
def test_a_process_killed_between_commit_and_checkpoint_applies_each_batch_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    from tests.spark.stream_child import stream

    write_inbox(tmp_path / "in")
    killed = killed_child(tmp_path, 1)
    assert killed.returncode == -9, killed.stderr[-3000:]
    with Database(tmp_path / "db") as db:  # batch 1 is committed, Spark does not know it
        assert sorted(db.query("edge(x, y)")) == [(1, 2), (2, 3), (3, 4)]
        assert [row[2] for row in db.query(f"{MARKS}(s, q, b)")] == [1]
    where = [str(tmp_path / p) for p in ("db", "in", "chk")]
    report = stream(spark, *where)  # the query restarted from its checkpoint
    assert report["skipped"] == [1]  # Spark ran batch 1 again; it was not applied again
    assert report["applied"] == [2]
    assert report["edges"] == [(1, 2), (2, 3)]  # (3, 4) inserted once, retracted once
    assert report["marks"] == [("edge", report["query"], 2)]


class Batch:
    """Stands for a micro-batch DataFrame: its rows and the query's id."""

    def __init__(self, rows: list[tuple[int, int]], query: str) -> None:
        self.rows, self.query = rows, query
        self.sparkSession = self
        self.sparkContext = self

    def getLocalProperty(self, key: str) -> str:  # noqa: N802 (PySpark's name)
        return self.query

    def toArrow(self) -> pa.Table:  # noqa: N802 (PySpark's name)
        return pa.table({"x": [r[0] for r in self.rows], "y": [r[1] for r in self.rows]})


def test_a_reopened_sink_skips_the_batches_its_database_holds(tmp_path: Path) -> None:
    with Database(tmp_path / "db") as db:
        db.define(".decl edge(x: number, y: number) multiset\n")
        sink = BatchSink(db, "edge")
        sink(Batch([(1, 2)], "q1"), 0)  # type: ignore[arg-type]
        sink(Batch([(2, 3)], "q1"), 1)  # type: ignore[arg-type]
        epoch = db.epoch
    with Database(tmp_path / "db") as db:
        sink = BatchSink(db, "edge")
        assert sink.mark == ("q1", 1)
        sink(Batch([(1, 2)], "q1"), 0)  # type: ignore[arg-type]
        sink(Batch([(2, 3)], "q1"), 1)  # type: ignore[arg-type]
        assert (db.epoch, sink.skipped) == (epoch, [0, 1])
        sink(Batch([(3, 4)], "q1"), 2)  # type: ignore[arg-type]
        assert sorted(db.query("edge(x, y)")) == [(1, 2), (2, 3), (3, 4)]
        assert db.query(f'{MARKS}("edge", q, b)') == [("q1", 2)]


def test_a_new_query_starts_over_and_sinks_keep_their_own_marks(tmp_path: Path) -> None:
    with Database(tmp_path / "db") as db:
        db.define(".decl edge(x: number, y: number)\n.decl other(x: number, y: number)\n")
        edges, others = BatchSink(db, "edge"), BatchSink(db, "other", name="o")
        edges(Batch([(1, 2)], "q1"), 0)  # type: ignore[arg-type]
        others(Batch([(5, 6)], "q9"), 0)  # type: ignore[arg-type]
        edges(Batch([(2, 3)], "q2"), 0)  # type: ignore[arg-type]  # a new checkpoint
        db.checkpoint()  # the marks survive a snapshot, as the rows do
    with Database(tmp_path / "db") as db:
        assert sorted(db.query(f"{MARKS}(s, q, b)")) == [("edge", "q2", 0), ("o", "q9", 0)]
        assert sorted(db.query("edge(x, y)")) == [(1, 2), (2, 3)]
        assert BatchSink(db, "other", name="o").mark == ("q9", 0)
