"""A process that streams a directory of CSV files into a durable database, for
tests/spark/test_stream.py, which kills itself right after committing a batch
(before Spark checkpoints it); `stream` is also the restart, in the test's process.

    python -m tests.spark.stream_child DB INBOX CHECKPOINT KILL_AFTER_BATCH
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from datalog import Database
from datalog.io.sources.spark_stream import MARKS, stream_into
from datalog.io.spark.session import local_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROGRAM = ".decl edge(x: number, y: number) multiset\n"


def stream(
    spark: SparkSession, path: str, inbox: str, checkpoint: str, kill_after: int | None = None
) -> dict[str, Any]:
    """Stream `inbox` into the durable database at `path` until no file is left;
    what the sink applied and skipped, and what the database holds then."""
    with Database(path) as db:
        if "edge" not in db.checked.schema:
            db.define(PROGRAM)

        def committed(batch_id: int, epoch: int) -> None:
            if batch_id == kill_after:  # between the commit and Spark's checkpoint
                os.kill(os.getpid(), signal.SIGKILL)

        source = spark.readStream.schema("x long, y long, d long")
        frame = source.option("maxFilesPerTrigger", 1).csv(inbox)
        query, sink = stream_into(
            db, "edge", frame, diff_column="d", checkpoint=checkpoint, on_commit=committed
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        return {
            "edges": sorted(db.query("edge(x, y)")),
            "applied": sorted(sink.epochs),
            "skipped": sink.skipped,
            "marks": [tuple(row) for row in db.query(f"{MARKS}(s, q, b)")],
            "query": str(query.id),
        }


def main(argv: list[str]) -> None:
    path, inbox, checkpoint, kill_after = argv
    spark = local_session("local[1]", shuffle_partitions=1, app="deltalog-stream-child")
    stream(spark, path, inbox, checkpoint, int(kill_after))
    spark.stop()  # not reached when it kills itself


if __name__ == "__main__":
    main(sys.argv[1:])
