"""A plain Parquet scan loaded as its files' bytes, decoded by pyarrow on the driver.

Layer: datalog (Spark back end). Imports pyarrow; pyspark only inside functions.

A frame that `read_parquet` made (`scanned`: the files' columns, cast exactly to the
relation's types, nothing else) is remembered with its scan (`ParquetScan`). To load
it, Spark lists its files (the Parquet relation's own file index, `inputFiles`),
packs them into partitions (`SparkContext.binaryFiles`, Spark's file-combining input
format) and its executors read their bytes; the driver fetches one partition's files
at a time (`toLocalIterator`, the next one read meanwhile) and decodes each with
pyarrow, a row group at a time (`scan_batches`). The rows never become JVM rows: the
row path (Parquet decoding, `UnsafeRow`s, code-generated row buffering, the Arrow
writers) cost 2.7x the CPU of a direct pyarrow insert (ADR 0079). It works wherever
Spark reads the files (the executors read them, through Hadoop's file systems), and
on a cluster it moves the files' compressed bytes, not Arrow.

Not taken (`scan_batches` returns None, and the frame goes the row path of
`datalog.io.spark.transfer`) when a file is larger than one of Spark's read
partitions (`spark.sql.files.maxPartitionBytes`): the driver then holds at most
two partitions of files (the one it decodes and the one read ahead), as Spark's
row path would split such a file. Also not for a frame derived from the scan (a
filter, a repartition: another frame object), for a scan with partition columns
(directory names Spark turns into values), for a column whose cast is not exact
(a string read as a number), nor without PySpark's JVM bridge. A file's columns match
the scan's as in Spark (ignoring case unless `spark.sql.caseSensitive`).
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# Spark types read as they are, or widened exactly, into each target Spark type
EXACT = {
    "bigint": {"bigint", "int", "smallint", "tinyint"},
    "double": {"double", "float"},
    "string": {"string"},
}
ARROW = {"bigint": pa.int64(), "double": pa.float64(), "string": pa.string()}


@dataclass(frozen=True)
class ParquetScan:
    """The files of a plain Parquet scan and how its columns become the frame's."""

    files: tuple[str, ...]  # as Spark lists them (URIs)
    columns: tuple[str, ...]  # the files' columns the frame reads, in order
    types: tuple[pa.DataType, ...]  # the Arrow type each is cast to
    names: tuple[str, ...]  # the frame's column names
    case_sensitive: bool = False  # `spark.sql.caseSensitive`: how a file's columns match


_SCANS: weakref.WeakKeyDictionary[Any, ParquetScan] = weakref.WeakKeyDictionary()


def scanned(frame: DataFrame, raw: DataFrame) -> DataFrame:
    """`frame` (`raw`'s columns by position, cast), remembered as a plain scan of
    `raw`'s Parquet files when every cast is exact and `raw` has no partition
    columns; returned as it is."""
    targets = [field.dataType.simpleString() for field in frame.schema.fields]
    sources = [field.dataType.simpleString() for field in raw.schema.fields]
    exact = len(targets) == len(sources) and all(
        source in EXACT.get(target, ()) for source, target in zip(sources, targets, strict=True)
    )
    if exact and not _partitioned(raw):
        _SCANS[frame] = ParquetScan(
            files=tuple(raw.inputFiles()),
            columns=tuple(raw.columns),
            types=tuple(ARROW[t] for t in targets),
            names=tuple(frame.columns),
            case_sensitive=_case_sensitive(raw),
        )
    return frame


def parquet_scan(frame: DataFrame) -> ParquetScan | None:
    """The scan `frame` was remembered as, if any."""
    return _SCANS.get(frame)


def scan_batches(
    frame: DataFrame,
    scan: ParquetScan,
    *,
    batch_rows: int = 100_000,
    partitions: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, pa.RecordBatch]] | None:
    """`(partition index, batch)` for every row of `scan`, its files read by Spark's
    executors and decoded here, or None when a file is larger than a read partition,
    its size cannot be told or its name is not a plain path (the caller takes the row
    path)."""
    from pyspark.rdd import RDD

    spark = frame.sparkSession
    limit = byte_string(spark.conf.get("spark.sql.files.maxPartitionBytes") or "128m")
    sizes = _sizes(frame, scan.files)
    plain = all(not set(f) & set(",%\\{}[]*?") for f in scan.files)
    if not scan.files or not plain or sizes is None or max(sizes) > limit:
        return None
    context: Any = spark.sparkContext
    jsc = getattr(context, "_jsc")  # noqa: B009 (PySpark's bridge, as in `transfer`)
    jrdd = jsc.binaryFiles(",".join(scan.files), context.defaultMinPartitions)
    if partitions is not None:
        partitions(jrdd.getNumPartitions())
    files = RDD(jrdd, context, _file_starts())
    return _decoded(files.toLocalIterator(prefetchPartitions=True), scan, batch_rows)


def byte_string(text: str) -> int:
    """A size as Spark's configuration writes it (`134217728b`, `128m`, `1g`)."""
    found = re.fullmatch(r"\s*(\d+)\s*([kmgtp]?)i?b?\s*", text.lower())
    if found is None:
        raise ValueError(f"not a size in bytes: {text!r}")
    return int(found.group(1)) << (10 * " kmgtp".index(found.group(2) or " "))


_STARTS = object()  # where a partition's files start, in a local iterator's stream


def _file_starts() -> Any:
    """`binaryFiles`' deserializer (path, bytes), whose stream of each partition
    (`toLocalIterator` reads one per partition, empty ones too) begins with `_STARTS`."""
    from pyspark.serializers import NoOpSerializer, PairDeserializer, UTF8Deserializer

    class FileStarts(PairDeserializer):
        def load_stream(self, stream: Any) -> Iterator[Any]:
            yield _STARTS
            yield from super().load_stream(stream)

    return FileStarts(UTF8Deserializer(), NoOpSerializer())


def _decoded(
    files: Iterator[Any], scan: ParquetScan, batch_rows: int
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """The batches of each file's bytes, a row group at a time, numbered by the
    partition whose stream brought them."""
    import pyarrow.parquet as pq

    part = -1
    for item in files:
        if item is _STARTS:
            part += 1
            continue
        reader = pq.ParquetFile(pa.BufferReader(pa.py_buffer(item[1])))
        sources = file_columns(reader.schema_arrow.names, scan, item[0])
        wanted = sorted({c for c in sources if c is not None})
        for batch in reader.iter_batches(batch_size=batch_rows, columns=wanted):
            yield part, _cast(batch, scan, sources)


def file_columns(present: Sequence[str], scan: ParquetScan, file: str) -> list[str | None]:
    """The column of a file each of the scan's columns reads (None: the file lacks
    it), matched as Spark's Parquet reader matches them: by exact name when
    `spark.sql.caseSensitive`, else ignoring case, where a name that several of the
    file's columns match is an error, as it is in Spark."""
    if scan.case_sensitive:
        return [column if column in present else None for column in scan.columns]
    folded: dict[str, list[str]] = {}
    for name in present:
        folded.setdefault(name.lower(), []).append(name)
    sources: list[str | None] = []
    for column in scan.columns:
        found = folded.get(column.lower(), [])
        if len(found) > 1:
            raise ValueError(
                f"{file}: columns {found} all match `{column}` when case is ignored "
                "(spark.sql.caseSensitive is false)"
            )
        sources.append(found[0] if found else None)
    return sources


def _cast(
    batch: pa.RecordBatch, scan: ParquetScan, sources: Sequence[str | None]
) -> pa.RecordBatch:
    """`batch`'s columns as the frame's: the file's column each reads (`sources`),
    cast exactly, renamed; a column the file lacks is NULL, as Spark reads it."""
    names = batch.schema.names
    arrays = [
        batch.column(names.index(source)).cast(kind)
        if source is not None
        else pa.nulls(batch.num_rows, kind)
        for source, kind in zip(sources, scan.types, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, names=list(scan.names))


def _case_sensitive(raw: DataFrame) -> bool:
    setting = raw.sparkSession.conf.get("spark.sql.caseSensitive") or "false"
    return setting.strip().lower() == "true"


def _sizes(frame: DataFrame, files: Sequence[str]) -> list[int] | None:
    """Each file's size in bytes: local files by `os.stat`, others through Hadoop's
    file system (the JVM bridge); None when one cannot be told."""
    from py4j.protocol import Py4JError

    try:
        return [_size(frame, f) for f in files]
    except (OSError, Py4JError, AttributeError):  # no such file, no bridge: the row path
        return None


def _size(frame: DataFrame, file: str) -> int:
    parsed = urlparse(file)
    if parsed.scheme in ("", "file"):
        return os.stat(unquote(parsed.path)).st_size
    context: Any = frame.sparkSession.sparkContext
    jvm, jsc = getattr(context, "_jvm"), getattr(context, "_jsc")  # noqa: B009 (the bridge)
    path = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(file))
    return int(path.getFileSystem(jsc.hadoopConfiguration()).getFileStatus(path).getLen())


def _partitioned(raw: DataFrame) -> bool:
    """Whether Spark reads `raw` with partition columns (values from directory names),
    which its files do not hold; True when the bridge cannot tell."""
    from py4j.protocol import Py4JError

    jdf: Any = getattr(raw, "_jdf", None)  # absent on Spark Connect
    try:
        relation = jdf.queryExecution().analyzed().relation()
        return bool(relation.partitionSchema().nonEmpty())
    except (Py4JError, AttributeError):  # no bridge, another plan: not a plain scan
        return True
