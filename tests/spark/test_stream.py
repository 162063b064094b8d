"""Structured Streaming into a Database: one micro-batch, one epoch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from datalog import Database

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_each_micro_batch_commits_one_epoch(spark: SparkSession, tmp_path: Path) -> None:
    from datalog.sources.spark_stream import stream_into

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
