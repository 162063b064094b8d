"""A Spark Structured Streaming source feeding a `Database`: one micro-batch, one epoch.

Layer: datalog (sources). Uses the public API of `datalog` (transactions) and
pyarrow; pyspark is imported only inside functions.

`stream_into(db, relation, frame)` starts `frame.writeStream.foreachBatch(...)`:
each micro-batch is converted to Arrow (`toArrow`) and committed as ONE
transaction, so subscribers see a micro-batch atomically. With `diff_column`,
rows whose diff is negative are retracted and the others inserted (in the same
transaction). Spark may re-run a micro-batch after a failure with the same
batch id; the sink remembers the ids it committed and skips repeats, so a
replay does not insert twice (for `set` relations a repeat is harmless anyway).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

    from datalog.database import Database


@dataclass
class BatchSink:
    """Commits each micro-batch to `relation` of `db` as one transaction."""

    db: Database
    relation: str
    diff_column: str | None = None
    epochs: dict[int, int] = field(default_factory=dict)  # Spark batch id -> Database epoch
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        with self.lock:
            if batch_id in self.epochs:
                return
            table = _to_arrow(batch)
            with self.db.transaction() as tx:
                if self.diff_column is None:
                    tx.insert(self.relation, table)
                else:
                    negative = pc.less(table.column(self.diff_column), 0)
                    rows = table.drop_columns([self.diff_column])
                    tx.insert(self.relation, rows.filter(pc.invert(negative)))
                    tx.retract(self.relation, rows.filter(negative))
            self.epochs[batch_id] = self.db.epoch


def _to_arrow(frame: DataFrame) -> pa.Table:
    table: pa.Table = frame.toArrow()  # Spark >= 4
    return table


def stream_into(
    db: Database,
    relation: str,
    frame: DataFrame,
    *,
    diff_column: str | None = None,
    trigger_seconds: float | None = None,
    checkpoint: str | None = None,
) -> tuple[StreamingQuery, BatchSink]:
    """Start feeding the streaming `frame` into `relation`; returns the running
    query (`stop()`, `processAllAvailable()`) and the sink (its `epochs`)."""
    db.checked.schema.require(relation)
    sink = BatchSink(db, relation, diff_column)
    writer = frame.writeStream.foreachBatch(sink)
    if trigger_seconds is not None:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", checkpoint)
    return writer.start(), sink
