"""Spark DataFrames to Arrow on the driver, one partition at a time, without pandas.

Layer: datalog (Spark back end). Imports pyarrow; pyspark only inside functions.

`arrow_batches(frame)` yields the frame's rows as Arrow record batches, tagged
with the partition they come from (told by where each partition's stream starts,
not by a column: ADR 0074). The executors convert rows to Arrow inside
the JVM (`Dataset.toArrowBatchRdd`, the conversion `toArrow` uses) and the
driver fetches one partition at a time (`toLocalIterator`, the next partition
computed while this one is consumed), so the Python driver holds a batch at a
time and the JVM driver at most two partitions. No Python worker runs and
pandas is never imported: PySpark's public `mapInArrow` goes through
`pandas_udf` (pandas required, and a warning with pandas 3), and `toArrow`
collects the whole frame at once.

PySpark has no public Arrow iterator (nor a `mapInArrow` without pandas:
`map_in_arrow`), so this module crosses PySpark's bridge to
the JVM (`DataFrame._jdf`, the `RDD` wrapper, the
framed-bytes serializer; `files` does too, for a scan's files and their bytes);
`tests/spark/test_transfer.py` and `tests/spark/test_files.py` pin it. Where the
bridge is missing (Spark Connect, another Spark) it falls back to `toArrow`,
which is correct but holds the whole frame.

A plain Parquet scan (`datalog.io.spark.files`) comes as its files' bytes, decoded
by pyarrow here, so its rows never become JVM rows either (ADR 0079).

A task's answer can stay as the Arrow IPC blobs the task made (`blob_task`,
`arrow_task`): `decoded` gives the frame of its rows, which `arrow_batches` reads
as the blobs themselves, so the rows never cross the JVM one by one (ADR 0074).

`LoadProgress` reports a long transfer (rows, partitions, rows per second): a
line updated in place on a terminal, else a plain line every `every` seconds
and a last one, so a log shows it too.
"""

from __future__ import annotations

import sys
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa

from datalog.io.spark.files import parquet_scan, scan_batches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

PART = "__deltalog_partition"  # the column that tags each row with its partition
BLOB = "__deltalog_batch"  # the column of a task's answer, an Arrow batch per row
# frames `decoded` made: the frame of their blobs and the batches' schema
_BLOBS: weakref.WeakKeyDictionary[Any, tuple[Any, pa.Schema]] = weakref.WeakKeyDictionary()
# frames made from the driver's Arrow batches (`held`): those batches, a partition each
_HELD: weakref.WeakKeyDictionary[Any, list[pa.RecordBatch]] = weakref.WeakKeyDictionary()


def arrow_batches(
    frame: DataFrame,
    *,
    batch_rows: int = 100_000,
    bridge: bool = True,
    partitions: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """`(partition index, batch)` for every Arrow batch of `frame`, partition by
    partition; `batch_rows` rows per batch at most (100,000: 10,000 batches cost
    4x more per row, 1,000,000 no less; ADR 0042). `partitions` is told how many
    partitions there are, once the plan is made (asking the frame itself would plan
    and run its shuffles a second time). `bridge=False` takes the public fallback."""
    from pyspark.sql import functions as sf

    if frame in _HELD:  # sent from here: the batches it was made of
        if partitions is not None:
            partitions(len(_HELD[frame]))
        yield from enumerate(_HELD[frame])
        return
    held = _BLOBS.get(frame)
    if held is not None:  # a task's answer kept as its Arrow blobs: read them as they are
        blobs, schema = held
        for part, batch in arrow_batches(blobs, bridge=bridge, partitions=partitions):
            for blob in batch.column(0).to_pylist():
                yield part, pa.ipc.read_record_batch(pa.py_buffer(blob), schema)
        return
    scan = parquet_scan(frame) if bridge else None
    files = (
        scan_batches(frame, scan, batch_rows=batch_rows, partitions=partitions) if scan else None
    )
    if files is not None:  # a plain Parquet scan: its files' bytes, decoded here (ADR 0079)
        yield from files
        return
    bridged = _bridged(frame, batch_rows, partitions or _ignore) if bridge else None
    if bridged is not None:
        yield from bridged
        return
    table = frame.withColumn(PART, sf.spark_partition_id()).toArrow()
    if partitions is not None:
        partitions(len(set(table.column(PART).to_pylist())))
    for batch in table.to_batches(max_chunksize=batch_rows):
        if batch.num_rows:
            part = batch.column(batch.num_columns - 1)[0].as_py()
            yield (
                part,
                pa.RecordBatch.from_arrays(batch.columns[:-1], names=batch.schema.names[:-1]),
            )


def held(frame: DataFrame, batches: list[pa.RecordBatch]) -> DataFrame:
    """`frame`, made by Spark from the driver's `batches` (a partition each), which
    the driver keeps as long as the frame lives: `arrow_batches` and `held_batches`
    read them without a job (ADR 0079)."""
    _HELD[frame] = batches
    return frame


def held_batches(frame: DataFrame) -> list[pa.RecordBatch] | None:
    """The batches `frame` was made of (`held`), if it was."""
    return _HELD.get(frame)


def arrow_collect(frame: DataFrame, *, batch_rows: int = 100_000) -> list[pa.RecordBatch]:
    """Every Arrow batch of `frame`, fetched by ONE job (`arrow_batches` runs a job per
    partition): for a frame known to be small, such as one under a limit."""
    rdd = _arrow_rdd(frame, batch_rows, _ignore)
    if rdd is None:
        return frame.toArrow().to_batches(max_chunksize=batch_rows)
    blobs, schema = rdd
    return [pa.ipc.read_record_batch(pa.py_buffer(blob), schema) for blob in blobs.collect()]


def map_in_arrow(frame: DataFrame, task: Any, schema: StructType | None = None) -> DataFrame | None:
    """`frame.mapInArrow(task, schema or frame.schema)` without `pandas_udf`, which
    imports and version-checks pandas (a warning with pandas 3): the Arrow-iterator
    UDF is built directly and handed to the same JVM method (ADR 0065). None without
    the bridge."""
    from pyspark.sql import DataFrame
    from pyspark.sql.udf import UserDefinedFunction
    from pyspark.util import PythonEvalType

    udf = UserDefinedFunction(
        task,
        schema or frame.schema,
        "map_in_arrow",
        evalType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF,
    )
    column: Any = udf(*[frame[c] for c in frame.columns])
    jdf: Any = getattr(frame, "_jdf", None)  # absent on Spark Connect
    if jdf is None:
        return None
    jcolumn = getattr(column, "_jc")  # noqa: B009 (PySpark's bridge, see the module)
    return DataFrame(jdf.mapInArrow(jcolumn, False, None), frame.sparkSession)


def arrow_task(frame: DataFrame, task: Any, *, batch_rows: int = 100_000) -> DataFrame | None:
    """The frame of IPC blobs (one binary column, `BLOB`, an Arrow batch a row) that
    ONE Python task yields when `task` runs over every Arrow batch of `frame` (an
    iterator in, record batches out), or None without the bridge; `decoded` reads
    it. The batches cross as `arrow_batches` fetches them (converted by the JVM,
    several partitions at once), not as `mapInArrow` feeds a task (row by row
    through a Python runner: 12.5 s against 5.7 s for 10M rows, ADR 0070)."""
    found = _arrow_rdd(frame, batch_rows, _ignore)
    if found is None:
        return None
    blobs, arrow = found
    encoded = blobs.coalesce(1).mapPartitions(partial(_encoded, task, arrow))
    return frame.sparkSession.createDataFrame(encoded, f"{BLOB} binary", verifySchema=False)


def blob_task(frame: DataFrame, task: Any) -> DataFrame | None:
    """`map_in_arrow(frame, task)` with the task's batches as IPC blobs (the frame of
    one binary column `decoded` reads), or None without the bridge: a task's answer
    then crosses the JVM as a few opaque values instead of row by row (ADR 0074)."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    blobs = StructType([StructField(BLOB, BinaryType())])
    return map_in_arrow(frame, partial(_blob_batches, task), blobs)


def decoded(blobs: DataFrame, schema: StructType) -> DataFrame:
    """The frame of `schema` whose Arrow batches are the IPC blobs of `blobs` (one
    binary column; checkpoint it first, so that the tasks that made it do not run
    again), cached: a Spark plan that reads it decodes the blobs once (a
    `map_in_arrow`), and `arrow_batches` reads the blobs themselves, no row
    converted by the JVM (ADR 0074)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)
    frame = map_in_arrow(blobs, partial(_decoded, arrow), schema)
    if frame is None:  # no bridge (the blobs could not have been made)
        raise RuntimeError("Arrow blobs without PySpark's JVM bridge")
    frame = frame.cache()
    _BLOBS[frame] = (blobs, arrow)
    return frame


def _encoded(task: Any, schema: pa.Schema, blobs: Iterator[bytes]) -> Iterator[tuple[bytes]]:
    """Inside the task: the IPC blobs of `task`'s batches, from those of `blobs`."""
    batches = (pa.ipc.read_record_batch(pa.py_buffer(blob), schema) for blob in blobs)
    for batch in task(batches):
        yield (batch.serialize().to_pybytes(),)


def _blob_batches(task: Any, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Inside a task: each of `task`'s batches as a one-row batch of its IPC blob."""
    for batch in task(batches):
        blob = pa.array([batch.serialize().to_pybytes()], pa.binary())
        yield pa.RecordBatch.from_arrays([blob], names=[BLOB])


def _decoded(schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The record batches the blobs of `batches` (one binary column) encode."""
    for batch in batches:
        for blob in batch.column(0).to_pylist():
            yield pa.ipc.read_record_batch(pa.py_buffer(blob), schema)


def estimated_bytes(frame: DataFrame) -> int | None:
    """Spark's estimate of `frame`'s size in bytes (the optimizer's statistics: no
    job runs), or None when Spark has none (a frame of Python rows or of an RDD is
    given `spark.sql.defaultSizeInBytes`, and a plan over one gets that scaled by its
    projections: 1/256 of it or more counts as none) or there is no bridge. For files
    it is their size scaled to the columns read: good for choosing a plan."""
    jdf: Any = getattr(frame, "_jdf", None)  # absent on Spark Connect
    if jdf is None:
        return None
    size = int(str(jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    unknown = frame.sparkSession.conf.get("spark.sql.defaultSizeInBytes", None)
    return None if size >= (int(unknown) if unknown else (1 << 63) - 1) >> 8 else size


def _ignore(count: int) -> None:
    pass


def _bridged(
    frame: DataFrame, batch_rows: int, partitions: Callable[[int], None]
) -> Iterator[tuple[int, pa.RecordBatch]] | None:
    """The batches through the JVM's Arrow conversion, each with its partition's index
    (told by where a partition's stream starts, not by a column of every row), or
    None without the bridge."""
    rdd = _arrow_rdd(frame, batch_rows, partitions, _partition_starts())
    if rdd is None:
        return None
    blobs, schema = rdd
    return _numbered(blobs.toLocalIterator(prefetchPartitions=True), schema)


def _numbered(items: Iterator[Any], schema: pa.Schema) -> Iterator[tuple[int, pa.RecordBatch]]:
    part = -1
    for item in items:
        if item is _STARTS:
            part += 1
        else:
            yield part, pa.ipc.read_record_batch(pa.py_buffer(item), schema)


_STARTS = object()  # where a partition's items start, in a local iterator's stream


def _partition_starts() -> Any:
    """A `NoOpSerializer` whose stream of each partition (`toLocalIterator` reads
    one per partition, empty ones too) begins with `_STARTS`."""
    from pyspark.serializers import NoOpSerializer

    class PartitionStarts(NoOpSerializer):
        def load_stream(self, stream: Any) -> Iterator[Any]:
            yield _STARTS
            yield from super().load_stream(stream)

    return PartitionStarts()


def _arrow_rdd(
    frame: DataFrame,
    batch_rows: int,
    partitions: Callable[[int], None],
    serializer: Any = None,
) -> tuple[Any, pa.Schema] | None:
    """The RDD of `frame`'s Arrow batches (IPC bytes, converted by the JVM; read with
    `serializer`, by default as they are) and their schema, or None without the
    bridge."""
    from py4j.protocol import Py4JError, Py4JJavaError
    from pyspark.rdd import RDD
    from pyspark.serializers import NoOpSerializer
    from pyspark.sql.pandas.types import to_arrow_schema

    jdf: Any = getattr(frame, "_jdf", None)  # absent on Spark Connect
    if jdf is None:
        return None
    schema = to_arrow_schema(frame.schema, timezone="UTC", prefers_large_types=False)
    try:
        jrdd = jdf.toArrowBatchRdd(batch_rows, "UTC", True, False).toJavaRDD()
    except Py4JJavaError:  # the query failed: the same error either way
        raise
    except Py4JError:  # no such method on this Spark
        return None
    partitions(jrdd.getNumPartitions())
    context = frame.sparkSession.sparkContext
    return RDD(jrdd, context, serializer or NoOpSerializer()), schema


@dataclass
class LoadProgress:
    """Progress of one transfer: `update` after each batch, `finish` at the end."""

    relation: str
    partitions: int = 0  # set once known (`arrow_batches(partitions=...)`)
    stream: IO[str] = field(default_factory=lambda: sys.stderr)
    terminal: bool | None = None  # None: whether `stream` is a TTY
    every: float = 10.0  # seconds between two lines off a terminal
    clock: Callable[[], float] = time.monotonic
    rows: int = 0
    done: int = 0  # partitions finished
    started: float = field(init=False)
    shown: float = field(init=False)
    part: int | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.terminal is None:
            self.terminal = self.stream.isatty()
        self.started = self.shown = self.clock()

    def known(self, partitions: int) -> None:
        """How many partitions the transfer has."""
        self.partitions = partitions

    def update(self, part: int, rows: int) -> None:
        """`rows` more rows arrived, from partition `part`."""
        if part != self.part:
            self.done += self.part is not None
            self.part = part
        self.rows += rows
        now = self.clock()
        if self.terminal and now - self.shown >= 0.2:
            self.shown = now
            print(f"\r{self.line(now)}", end="", file=self.stream, flush=True)
        elif not self.terminal and now - self.shown >= self.every:
            self.shown = now
            print(self.line(now), file=self.stream, flush=True)

    def finish(self) -> None:
        """The last line: always on a terminal, elsewhere if any line was shown."""
        self.done = self.partitions  # empty partitions send no batch
        now = self.clock()
        if self.terminal:
            print(f"\r{self.line(now)}", file=self.stream, flush=True)
        elif self.shown > self.started:
            print(self.line(now), file=self.stream, flush=True)

    def line(self, now: float) -> str:
        rate = self.rows / max(now - self.started, 1e-9)
        return (
            f"spark load {self.relation}: {self.done}/{self.partitions} partitions, "
            f"{self.rows:,} rows, {rate:,.0f} rows/s"
        )
