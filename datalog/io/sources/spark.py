"""Spark as the data pipeline: read CSV, Parquet and the LDBC SNB layout, normalize
rows into relations, partition them, and stream the partitions into a `Database`.

Layer: datalog (sources). Uses the public API of `datalog` (Database,
transactions, the schema) and pyarrow; pyspark is imported only inside
functions, so `import datalog` never loads Spark.

Every frame this module returns has positional columns `c0, c1, ...` typed as
the relation declares them (number -> long, float -> double, symbol ->
string). Symbols stay strings: the Database interns them when rows are
inserted.

LDBC SNB naming (the CSV layout of the Interactive datagen, `|`-separated with
a header; files `<name>_<i>_<j>.csv` of one name are one relation):

- an entity file `person_*_*.csv` with header `id|firstName|...` becomes one
  binary attribute per non-id column, `person.firstName(id: number, value)`;
  the list columns `language` and `email` (`;`-separated) give one fact per
  element, and empty values give no fact;
- an edge file `person_knows_person_*_*.csv` (header `Person.id|Person.id|...`)
  becomes `person_knows_person(src: number, dst: number)`, and each further
  column an edge attribute `person_knows_person.creationDate(src, dst, value)`;
- ids and the columns in `NUMBER_COLUMNS` are numbers (the sample's dates are
  epoch milliseconds), every other column a symbol.

Loading (`load_frames`, `load_ldbc`): each relation streams into the database
as Arrow record batches converted by the executors' JVMs and fetched one
partition at a time (`datalog.io.spark.transfer`), so the driver never holds more
than a couple of partitions; nothing goes through pandas or Python rows, and no
Python worker runs. A plain Parquet scan (`read_parquet`, not derived further)
comes as its files' bytes, read by the executors and decoded by pyarrow on the
driver (`datalog.io.spark.files`, ADR 0079). Duplicates are dropped in Spark only when asked
(`deduplicate=True`: hash-partitioned by the first column, then `distinct`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from datalog.io.sources.csv import FactFileError
from datalog.lang.ast import ColumnType
from datalog.lang.schema import RelationInfo

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from datalog.db.database import Database
    from datalog.io.sources.csv import FactFile

SPARK_TYPES: dict[str, str] = {
    "number": "long",
    "unsigned": "decimal(20,0)",
    "float": "double",
    "symbol": "string",
}
NUMBER_COLUMNS = frozenset(
    {"creationDate", "birthday", "length", "classYear", "workFrom", "joinDate"}
)
LIST_COLUMNS = frozenset({"language", "email"})


@dataclass(frozen=True)
class Relation:
    """A normalized relation: its frame (`c0, c1, ...`) and its column types."""

    name: str
    frame: DataFrame
    types: tuple[ColumnType, ...]
    columns: tuple[str, ...]

    def declaration(self) -> str:
        cols = ", ".join(f"{c}: {t}" for c, t in zip(self.columns, self.types, strict=True))
        return f".decl {self.name}({cols})"


# --- reading ------------------------------------------------------------------------


def typed(frame: DataFrame, types: Iterable[ColumnType]) -> DataFrame:
    """`frame`'s columns, by position, cast to `types` and named `c0, c1, ...`."""
    from pyspark.sql import functions as sf

    kinds = list(types)
    return frame.select(
        *[
            sf.col(f"`{name}`").cast(SPARK_TYPES[kind]).alias(f"c{i}")
            for i, (name, kind) in enumerate(zip(frame.columns, kinds, strict=True))
        ]
    )


def read_csv(
    spark: SparkSession,
    paths: str | Path | list[str],
    info: RelationInfo,
    *,
    delimiter: str = "\t",
    header: bool = False,
) -> DataFrame:
    """Delimited text without quoting (Soufflé's fact files), typed by `info`.

    Lines are split by Spark (`split` on the delimiter, so an empty field is an
    empty symbol, never NULL); empty lines are skipped; with `header`, lines
    equal to the first line of the first file are dropped. A line with the
    wrong number of fields or a value that is not of its column's type raises
    `FactFileError` (one extra Spark job checks the file)."""
    read = _ReadText(spark, paths, info, delimiter, header)
    return _checked([read])[0]


def read_fact_files(spark: SparkSession, files: Iterable[FactFile]) -> dict[str, DataFrame]:
    """The files of `.input` directives by relation, as `read_fact_file` reads each,
    checked by ONE Spark job for all of them (a job costs about as much as a small
    file's whole reading)."""
    reads = [_ReadText(spark, str(f.path), f.relation, f.delimiter, f.headers) for f in files]
    return {read.info.name: frame for read, frame in zip(reads, _checked(reads), strict=True)}


def driver_fact_files(spark: SparkSession, files: Iterable[FactFile]) -> dict[str, DataFrame]:
    """The files of `.input` directives by relation, read HERE by the embedded
    engine's reader (`datalog.io.sources.csv.read_facts`: the values, errors and
    line numbers of `deltalog run`) and sent to Spark as Arrow (`arrow_frame`): each
    file parsed once and no Spark job (`read_fact_files` parses a file in its check's
    job and again in every plan that reads it; ADR 0079). For files the driver sees,
    such as `deltalog run`'s fact directory; the driver holds them while it sends them."""
    from datalog.io.sources.csv import read_facts

    frames: dict[str, DataFrame] = {}
    for file in files:
        frame = arrow_frame(spark, read_facts(file), file.relation.types)
        name = file.relation.name
        frames[name] = frames[name].union(frame) if name in frames else frame
    return frames


def arrow_frame(spark: SparkSession, table: pa.Table, types: Iterable[ColumnType]) -> DataFrame:
    """`table` as a frame of columns `c0, c1, ...` of `types`, sent from the driver as
    Arrow (PySpark's Arrow path of `createDataFrame`, no pandas) in one batch per
    core of the session (`defaultParallelism` partitions; PySpark's own batches of
    10,000 rows would make a partition of each). The driver keeps the batches while
    the frame lives, so reading them back to the driver runs no job
    (`transfer.held`)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (
        DecimalType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    from datalog.io.spark.transfer import held

    kinds = list(types)
    spark_type = {"number": LongType(), "unsigned": DecimalType(20, 0), "float": DoubleType()}
    schema = StructType(
        [StructField(f"c{i}", spark_type.get(t, StringType())) for i, t in enumerate(kinds)]
    )
    table = table.rename_columns([f"c{i}" for i in range(len(kinds))])
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key, None)
    parts = max(1, spark.sparkContext.defaultParallelism)
    rows = max(1, -(-table.num_rows // parts))
    spark.conf.set(key, str(rows))
    try:
        frame = spark.createDataFrame(table, schema)
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
    arrow = to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)
    return held(frame, table.cast(arrow).to_batches(max_chunksize=rows))


@dataclass
class _ReadText:
    """One delimited text relation as parsed by Spark, before its check."""

    spark: SparkSession
    paths: str | Path | list[str]
    info: RelationInfo
    delimiter: str
    header: bool

    def __post_init__(self) -> None:
        from pyspark.sql import functions as sf

        paths = self.paths
        self.files = [str(p) for p in paths] if isinstance(paths, list) else [str(paths)]
        lines = self.spark.read.text(self.files).where(sf.col("value") != "")
        if self.header:
            lines = lines.where(sf.col("value") != _first_line(self.files[0]))
        parts = sf.split(sf.col("value"), re.escape(self.delimiter), -1)
        types = self.info.types
        columns = [parts[i].cast(SPARK_TYPES[t]).alias(f"c{i}") for i, t in enumerate(types)]
        self.frame = lines.select("value", sf.size(parts).alias("n"), *columns)
        valid = sf.col("n") == self.info.arity
        for i in range(self.info.arity):
            valid = valid & sf.col(f"c{i}").isNotNull()
        self.bad = self.frame.where(~valid).select("value")

    def error(self, line: str) -> FactFileError:
        info = self.info
        message = f"a line of `{info.name}` does not have {info.arity} values of types {info.types}"
        return FactFileError(message, self.files[0], text=line)


def _checked(reads: list[_ReadText]) -> list[DataFrame]:
    """The frames of `reads`, once ONE job found no bad line in any of them (else
    `FactFileError` for the first read with one, at its least bad line): an aggregate,
    planned statically (adaptive execution would run its two stages as two jobs)."""
    from pyspark.sql import functions as sf

    from datalog.io.spark.session import static_plan

    if reads:
        bad = [read.bad.select(sf.lit(i).alias("read"), "value") for i, read in enumerate(reads)]
        union = bad[0]
        for frame in bad[1:]:
            union = union.union(frame)
        with static_plan(union.sparkSession):
            first = union.agg(sf.min(sf.struct("read", "value")).alias("bad")).first()
        if first is not None and first.bad is not None:
            raise reads[first.bad.read].error(first.bad.value)
    return [read.frame.drop("value", "n") for read in reads]


def _first_line(path: str | Path) -> str:
    with Path(path).open(encoding="utf-8") as stream:
        return stream.readline().rstrip("\r\n")


def read_fact_file(spark: SparkSession, file: FactFile) -> DataFrame:
    """The file an `.input` directive names, as `datalog.io.sources.csv` reads it."""
    return read_csv(
        spark, str(file.path), file.relation, delimiter=file.delimiter, header=file.headers
    )


def read_parquet(spark: SparkSession, path: str | Path, info: RelationInfo) -> DataFrame:
    """A Parquet file or directory; its columns by position, cast to `info`'s types.
    Loaded as the files' bytes, decoded on the driver, when it is a plain scan
    (`datalog.io.spark.files`, ADR 0079)."""
    from datalog.io.spark.files import scanned

    raw = spark.read.parquet(str(path))
    return scanned(typed(raw, info.types), raw)


# --- LDBC SNB ---------------------------------------------------------------------------


def ldbc_files(root: str | Path) -> dict[str, list[Path]]:
    """Relation base name (`person`, `person_knows_person`) -> its CSV files."""
    found: dict[str, list[Path]] = {}
    for path in sorted(Path(root).rglob("*_*_*.csv")):
        parts = path.stem.split("_")
        if len(parts) in (3, 5) and parts[-1].isdigit() and parts[-2].isdigit():
            found.setdefault("_".join(parts[:-2]), []).append(path)
    return found


def ldbc_relations(
    spark: SparkSession, root: str | Path, files: Iterable[str] | None = None
) -> dict[str, Relation]:
    """Every relation and attribute of an LDBC SNB CSV directory (see the module doc),
    or only those of the file names `files` (`person`, `person_knows_person`)."""
    relations: dict[str, Relation] = {}
    wanted = None if files is None else set(files)
    for name, paths in ldbc_files(root).items():
        if wanted is not None and name not in wanted:
            continue
        header = _first_line(paths[0]).split("|")
        raw = spark.read.options(sep="|", header="true", quote="", nullValue="").csv(
            [str(p) for p in paths]
        )
        raw = raw.toDF(*[f"_{i}" for i in range(len(header))])
        split = _edge_relations if "_" in name else _entity_attributes
        for relation in split(name, header, raw):
            relations[relation.name] = relation
    return relations


def _number(column: str) -> bool:
    return column == "id" or column.endswith(".id") or column in NUMBER_COLUMNS


def _value_type(column: str) -> ColumnType:
    return "number" if _number(column) else "symbol"


def _entity_attributes(name: str, header: list[str], raw: DataFrame) -> Iterator[Relation]:
    from pyspark.sql import functions as sf

    for i, column in enumerate(header[1:], start=1):
        value = sf.col(f"_{i}")
        if column in LIST_COLUMNS:
            value = sf.explode(sf.split(value, ";"))
        kind = _value_type(column)
        frame = raw.select(sf.col("_0").alias("c0"), value.alias("c1"))
        frame = typed(frame.where("c1 IS NOT NULL AND c1 != ''"), ("number", kind))
        yield Relation(f"{name}.{column}", frame, ("number", kind), ("id", "value"))


def _edge_relations(name: str, header: list[str], raw: DataFrame) -> Iterator[Relation]:
    frame = typed(raw.select("_0", "_1"), ("number", "number"))
    yield Relation(name, frame, ("number", "number"), ("src", "dst"))
    for i, column in enumerate(header[2:], start=2):
        kind = _value_type(column)
        values = raw.select("_0", "_1", f"_{i}").where(f"_{i} IS NOT NULL AND _{i} != ''")
        types: tuple[ColumnType, ...] = ("number", "number", kind)
        yield Relation(f"{name}.{column}", typed(values, types), types, ("src", "dst", "value"))


def ldbc_declarations(relations: Mapping[str, Relation]) -> str:
    """The `.decl` lines for `relations`, to `define` before loading them."""
    return "\n".join(r.declaration() for r in relations.values()) + "\n"


# --- into a Database ------------------------------------------------------------------


def partitioned(frame: DataFrame, partitions: int) -> DataFrame:
    """`frame` without duplicates, hash-partitioned by its first column (equal rows
    share their first column, so `distinct` needs no second shuffle)."""
    return frame.repartition(partitions, frame.columns[0]).distinct()


def load_frames(
    db: Database,
    frames: Mapping[str, DataFrame],
    *,
    deduplicate: bool = False,
    partitions: int | None = None,
    progress: bool = True,
    stream: IO[str] | None = None,
) -> dict[str, int]:
    """Insert each frame into the declared relation of its name, in ONE transaction.

    Each frame streams in as Arrow batches, one partition at a time
    (`datalog.io.spark.transfer`). By default a frame keeps its partitioning and its
    duplicates (the database drops them; a `multiset` relation counts them, as a
    direct insert of the same rows does); `deduplicate=True` drops them in Spark
    first, hash-partitioned by the first column into `partitions` (default: the
    session's shuffle partitions), which pays only when duplicates are many
    (docs/benchmarks.md). With `progress`, a long load is reported on `stream`
    (default stderr): a live line on a terminal, else a line every 10 seconds.

    Returns the number of rows transferred per relation."""
    from datalog.io.spark.transfer import LoadProgress, arrow_batches

    out = stream or sys.stderr
    counts: dict[str, int] = {}
    with db.transaction() as tx:
        for name, frame in frames.items():
            db.checked.schema.require(name)
            if deduplicate:
                shuffle = frame.sparkSession.conf.get("spark.sql.shuffle.partitions")
                frame = partitioned(frame, partitions or int(shuffle or 8))
            elif partitions is not None:
                frame = frame.repartition(partitions)
            report = LoadProgress(name, stream=out)
            counts[name] = 0
            for part, batch in arrow_batches(frame, partitions=report.known):
                tx.insert(name, batch)
                counts[name] += batch.num_rows
                if progress:
                    report.update(part, batch.num_rows)
            if progress:
                report.finish()
    return counts


def load_paths(
    db: Database, spark: SparkSession, paths: Mapping[str, str | Path], *, progress: bool = True
) -> dict[str, int]:
    """Load `{relation: path}` into the declared relations, in one transaction: a
    `.csv` file is comma-separated, a `.facts` or `.tsv` file tab-separated
    (Soufflé's fact files), anything else is read as Parquet (a file or a directory)."""
    frames = {}
    for name, path in paths.items():
        info = db.checked.schema.require(name)
        suffix = Path(path).suffix
        if suffix in (".csv", ".facts", ".tsv"):
            frames[name] = read_csv(spark, path, info, delimiter="," if suffix == ".csv" else "\t")
        else:
            frames[name] = read_parquet(spark, path, info)
    return load_frames(db, frames, progress=progress)


def load_ldbc(
    db: Database,
    spark: SparkSession,
    root: str | Path,
    *,
    files: Iterable[str] | None = None,
    deduplicate: bool = False,
    partitions: int | None = None,
    progress: bool = True,
) -> dict[str, int]:
    """Declare (unless declared) and load every LDBC relation under `root` (or
    those of the file names `files`); the options are `load_frames`'."""
    relations = ldbc_relations(spark, root, files)
    missing = {n: r for n, r in relations.items() if n not in db.checked.schema}
    if missing:
        db.define(ldbc_declarations(missing))
    frames = {n: r.frame for n, r in relations.items()}
    return load_frames(
        db, frames, deduplicate=deduplicate, partitions=partitions, progress=progress
    )
