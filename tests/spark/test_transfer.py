"""Arrow batches out of Spark, a partition at a time, and the progress of a load."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import pytest

from datalog.io.spark.transfer import LoadProgress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.mark.spark
@pytest.mark.parametrize("bridge", [True, False], ids=["jvm-arrow", "toArrow-fallback"])
def test_batches_hold_every_row_once_tagged_with_its_partition(
    spark: SparkSession, bridge: bool
) -> None:
    from pyspark.sql import functions as sf

    from datalog.io.spark.transfer import arrow_batches

    frame = spark.range(0, 2_500, numPartitions=3).select(
        sf.col("id").alias("c0"), sf.concat(sf.lit("s"), sf.col("id").cast("string")).alias("c1")
    )
    expected = {
        (row.p, row.c0, row.c1) for row in frame.withColumn("p", sf.spark_partition_id()).collect()
    }
    found, partitions = [], []
    for part, batch in arrow_batches(
        frame, batch_rows=400, bridge=bridge, partitions=partitions.append
    ):
        assert batch.schema.names == ["c0", "c1"]
        assert batch.num_rows <= 400
        found += [(part, *row.values()) for row in batch.to_pylist()]
    assert len(found) == 2_500
    assert set(found) == expected
    parts = [p for p, *_ in found]
    assert parts == sorted(parts)  # partition after partition, in order
    assert partitions == [3]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_progress_prints_a_line_every_interval_and_a_last_one() -> None:
    clock, out = Clock(), io.StringIO()
    progress = LoadProgress("edge", 4, out, terminal=False, every=10.0, clock=clock)
    for second, part in [(3, 0), (6, 0), (11, 1), (15, 2), (22, 3)]:
        clock.now = second
        progress.update(part, 1_000)
    clock.now = 25.0
    progress.finish()
    assert out.getvalue().splitlines() == [
        "spark load edge: 1/4 partitions, 3,000 rows, 273 rows/s",
        "spark load edge: 3/4 partitions, 5,000 rows, 227 rows/s",
        "spark load edge: 4/4 partitions, 5,000 rows, 200 rows/s",
    ]


def test_a_short_load_off_a_terminal_prints_nothing() -> None:
    clock, out = Clock(), io.StringIO()
    progress = LoadProgress("edge", 2, out, terminal=False, every=10.0, clock=clock)
    clock.now = 2.0
    progress.update(0, 10)
    progress.finish()
    assert out.getvalue() == ""


def test_on_a_terminal_progress_rewrites_one_line() -> None:
    clock, out = Clock(), io.StringIO()
    progress = LoadProgress("edge", 2, out, terminal=True, clock=clock)
    clock.now = 1.0
    progress.update(0, 10)
    clock.now = 2.0
    progress.finish()
    assert out.getvalue() == (
        "\rspark load edge: 0/2 partitions, 10 rows, 10 rows/s"
        "\rspark load edge: 2/2 partitions, 10 rows, 5 rows/s\n"
    )


@pytest.mark.spark
def test_an_estimate_derived_from_an_unknown_size_is_unknown(spark: SparkSession) -> None:
    from pyspark.sql import functions as sf

    from datalog.io.spark.transfer import estimated_bytes

    rows = spark.sparkContext.parallelize([(1, 2, "x"), (3, 4, "y")])
    frame = spark.createDataFrame(rows, "a long, b long, s string")  # no size known
    assert estimated_bytes(frame) is None
    # a projection scales Spark's default (unknown) size: still unknown, not huge
    assert estimated_bytes(frame.select(sf.col("a"))) is None
    assert estimated_bytes(frame.select((sf.col("a") + 1).alias("c0"))) is None
    assert estimated_bytes(spark.range(10)) == 80  # known: ten longs
