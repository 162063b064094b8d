"""A Spark Structured Streaming source feeding a `Database`: one micro-batch, one epoch,
exactly once.

Layer: datalog (sources). Uses the public API of `datalog` (define, query,
transactions) and pyarrow; pyspark is imported only inside functions.

`stream_into(db, relation, frame)` starts `frame.writeStream.foreachBatch(...)`:
each micro-batch is converted to Arrow (`toArrow`, no pandas) and committed as
ONE transaction, so subscribers see a micro-batch atomically. With
`diff_column`, rows whose diff is negative are retracted and the others inserted
(in the same transaction).

Exactly once (ADR 0042). Spark logs a micro-batch's offsets before running it
and marks it done in its checkpoint after the sink returns; a process that dies
in between re-runs the same batch id, with the same rows, when the query is
restarted. So the transaction that applies a batch also records it, in the
relation `spark_stream.batch(sink, query, batch)` (one row per sink: the
Spark query id and the last batch id applied). It is the same commit record in
the database's log, so the batch and its mark are durable together or not at
all, and a snapshot keeps the mark like any relation. A sink skips a batch id
at or below its sink's mark for the same query; a new query (a new checkpoint
directory) starts over. An empty micro-batch commits nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

    from datalog.db.database import Database

MARKS = "spark_stream.batch"
MARKS_DECLARATION = f".decl {MARKS}(sink: symbol, query: symbol, batch: number)\n"
QUERY_ID = "sql.streaming.queryId"  # the local property Spark sets for a query's jobs


@dataclass
class BatchSink:
    """Commits each micro-batch to `relation` of `db` as one transaction, with its
    mark; `name` tells apart sinks feeding one database (default: the relation)."""

    db: Database
    relation: str
    diff_column: str | None = None
    name: str = ""
    on_commit: Callable[[int, int], None] | None = None  # (batch id, epoch), after commit
    epochs: dict[int, int] = field(default_factory=dict)  # Spark batch id -> Database epoch
    skipped: list[int] = field(default_factory=list)  # batch ids applied before
    mark: tuple[str, int] | None = None  # (query id, batch id) of the last batch applied
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.name = self.name or self.relation
        if MARKS not in self.db.checked.schema:
            self.db.define(MARKS_DECLARATION)
        found = self.db.query(f"{MARKS}({_quoted(self.name)}, q, b)")
        self.mark = max(found, key=lambda row: row[1]) if found else None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        query = batch.sparkSession.sparkContext.getLocalProperty(QUERY_ID) or ""
        with self.lock:
            if self.applied(query, batch_id):
                self.skipped.append(batch_id)
                return
            table = _to_arrow(batch)
            if table.num_rows == 0:
                return
            with self.db.transaction() as tx:
                if self.diff_column is None:
                    tx.insert(self.relation, table)
                else:
                    negative = pc.less(table.column(self.diff_column), 0)
                    rows = table.drop_columns([self.diff_column])
                    tx.insert(self.relation, rows.filter(pc.invert(negative)))
                    tx.retract(self.relation, rows.filter(negative))
                if self.mark is not None:
                    tx.retract(MARKS, [(self.name, *self.mark)])
                tx.insert(MARKS, [(self.name, query, batch_id)])
            self.mark = (query, batch_id)
            self.epochs[batch_id] = epoch = self.db.epoch
        if self.on_commit is not None:
            self.on_commit(batch_id, epoch)

    def applied(self, query: str, batch_id: int) -> bool:
        """Whether this batch of this query was committed already."""
        return self.mark is not None and self.mark[0] == query and batch_id <= self.mark[1]


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


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
    name: str = "",
    on_commit: Callable[[int, int], None] | None = None,
) -> tuple[StreamingQuery, BatchSink]:
    """Start feeding the streaming `frame` into `relation`; returns the running
    query (`stop()`, `processAllAvailable()`) and the sink (its `epochs`). With a
    `checkpoint` directory and a durable `db`, a restarted query applies every
    micro-batch exactly once (see the module doc); `name` tells apart several
    streams into one database (default: the relation)."""
    db.checked.schema.require(relation)
    sink = BatchSink(db, relation, diff_column, name, on_commit)
    writer = frame.writeStream.foreachBatch(sink)
    if trigger_seconds is not None:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", checkpoint)
    return writer.start(), sink
