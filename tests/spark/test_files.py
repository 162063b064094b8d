"""A plain Parquet scan loads as its files' bytes decoded by pyarrow (ADR 0079), with
the rows Spark's own reading gives, and every other frame takes the row path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalog import Database
from datalog.io.spark import transfer
from datalog.io.spark.files import (
    ParquetScan,
    byte_string,
    file_columns,
    parquet_scan,
    scan_batches,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

DECLS = ".decl edge(x: number, y: number, w: float, s: symbol)\n"


def edge_files(folder: Path, nulls: bool = True) -> Path:
    """Three files of several row groups, `x` written as int32 in one of them (Spark
    widens it), empty symbols and (with `nulls`) NULLs."""
    folder.mkdir()
    for i in range(3):
        rows = range(i * 1_000, i * 1_000 + 700 + i)
        x = pa.array(list(rows), pa.int32() if i == 1 else pa.int64())
        table = pa.table(
            {
                "x": x,
                "y": [r % 17 if r % 50 or not nulls else None for r in rows],
                "w": [r / 8 for r in rows],
                "s": [f"s{r % 9}" if r % 7 else "" for r in rows],
            }
        )
        pq.write_table(table, folder / f"part-{i}.parquet", row_group_size=256)
    return folder


def rows(batches: Iterator[tuple[int, pa.RecordBatch]]) -> list[tuple[Any, ...]]:
    found = []
    for _, batch in batches:
        assert batch.schema.names == ["c0", "c1", "c2", "c3"]
        assert batch.schema.types == [pa.int64(), pa.int64(), pa.float64(), pa.string()]
        found += [tuple(row.values()) for row in batch.to_pylist()]
    return sorted(found, key=repr)


def spark_rows(frame: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in frame.collect()), key=repr)


def read(spark: SparkSession, path: Path) -> DataFrame:
    from datalog.io.sources.spark import read_parquet

    db = Database()
    db.define(DECLS)
    return read_parquet(spark, path, db.checked.schema["edge"])


def test_a_plain_scan_gives_the_rows_spark_reads(spark: SparkSession, tmp_path: Path) -> None:
    frame = read(spark, edge_files(tmp_path / "edges"))
    scan = parquet_scan(frame)
    assert scan is not None
    assert len(scan.files) == 3 and scan.columns == ("x", "y", "w", "s")
    counted: list[int] = []
    found = scan_batches(frame, scan, batch_rows=100, partitions=counted.append)
    assert found is not None  # taken: small local files
    assert rows(found) == spark_rows(frame)
    assert len(counted) == 1 and counted[0] >= 1


def test_arrow_batches_and_a_load_take_the_files_path(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datalog.io.sources.spark import load_paths

    folder = edge_files(tmp_path / "edges", nulls=False)  # a load refuses NULLs
    taken: list[bool] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        found = scan_batches(*args, **kwargs)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(transfer, "scan_batches", spy)
    frame = read(spark, folder)
    assert rows(transfer.arrow_batches(frame)) == spark_rows(frame)
    db, plain = Database(), Database()
    for each in (db, plain):
        each.define(DECLS)
    counts = load_paths(db, spark, {"edge": folder}, progress=False)
    with plain.transaction() as tx:
        for file in sorted(folder.iterdir()):
            table = pq.read_table(file)
            tx.insert("edge", table.set_column(0, "x", table.column("x").cast(pa.int64())))
    assert taken == [True, True]
    assert counts == {"edge": 2_103}
    query = "edge(a, b, c, d)"
    assert sorted(db.query(query), key=repr) == sorted(plain.query(query), key=repr)


def test_frames_that_are_not_plain_scans_take_the_row_path(
    spark: SparkSession, tmp_path: Path
) -> None:
    from pyspark.sql import functions as sf

    from datalog.io.sources.spark import read_parquet

    frame = read(spark, edge_files(tmp_path / "edges"))
    derived = frame.where(sf.col("c0") > 1_500)
    assert parquet_scan(derived) is None
    assert rows(transfer.arrow_batches(derived)) == spark_rows(derived)
    # a column whose cast is not exact: numbers read from strings
    pq.write_table(pa.table({"x": ["1", "2", "x"]}), tmp_path / "text.parquet")
    db = Database()
    db.define(".decl n(x: number)\n.decl p(x: number, k: number)\n")
    texts = read_parquet(spark, tmp_path / "text.parquet", db.checked.schema["n"])
    assert parquet_scan(texts) is None
    assert [b.column(0).to_pylist() for _, b in transfer.arrow_batches(texts)] == [[1, 2, None]]
    # partition columns: values from directory names, which the files do not hold
    for k in (1, 2):
        (tmp_path / "parts" / f"k={k}").mkdir(parents=True)
        pq.write_table(pa.table({"x": [k * 10]}), tmp_path / "parts" / f"k={k}" / "a.parquet")
    parts = read_parquet(spark, tmp_path / "parts", db.checked.schema["p"])
    assert parquet_scan(parts) is None
    found = {tuple(row.values()) for _, b in transfer.arrow_batches(parts) for row in b.to_pylist()}
    assert found == {(10, 1), (20, 2)}


def test_a_file_larger_than_a_read_partition_takes_the_row_path(
    spark: SparkSession, tmp_path: Path
) -> None:
    frame = read(spark, edge_files(tmp_path / "edges"))
    scan = parquet_scan(frame)
    assert scan is not None
    key = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(key)
    spark.conf.set(key, "1k")  # each file is larger than that
    try:
        assert scan_batches(frame, scan) is None
        assert rows(transfer.arrow_batches(frame)) == spark_rows(frame)
    finally:
        spark.conf.set(key, before or "128m")


def test_byte_strings_read_as_spark_writes_them() -> None:
    assert byte_string("134217728b") == 134_217_728
    assert byte_string("128m") == byte_string("128MB") == 128 << 20
    assert byte_string("1g") == 1 << 30 and byte_string("4096") == 4096
    with pytest.raises(ValueError, match="not a size"):
        byte_string("lots")


def cased_files(folder: Path) -> Path:
    """Two files whose first column is named `x` in one and `X` in the other."""
    folder.mkdir()
    for i, name in enumerate(("x", "X")):
        rows = range(i * 100, i * 100 + 50)
        table = pa.table(
            {name: list(rows), "y": [r % 7 for r in rows], "w": [r / 4 for r in rows],
             "s": [f"s{r}" for r in rows]}
        )  # fmt: skip
        pq.write_table(table, folder / f"part-{i}.parquet")
    return folder


@pytest.mark.parametrize("case_sensitive", ["false", "true"])
def test_columns_match_a_files_names_as_spark_matches_them(
    spark: SparkSession, tmp_path: Path, case_sensitive: str
) -> None:
    """Case ignored (Spark's default), `X` reads as `x`; case-sensitive, as NULL."""
    key = "spark.sql.caseSensitive"
    before = spark.conf.get(key)
    spark.conf.set(key, case_sensitive)
    try:
        frame = read(spark, cased_files(tmp_path / "edges"))
        scan = parquet_scan(frame)
        assert scan is not None
        found = scan_batches(frame, scan)
        assert found is not None
        got = rows(found)
        assert got == spark_rows(frame)
        assert sum(row[0] is None for row in got) == (50 if case_sensitive == "true" else 0)
    finally:
        spark.conf.set(key, before or "false")


def test_a_name_several_columns_match_ignoring_case_is_an_error() -> None:
    scan = ParquetScan(files=("f",), columns=("x", "y"), types=(pa.int64(),) * 2,
                       names=("c0", "c1"))  # fmt: skip
    assert file_columns(["X", "y"], scan, "f") == ["X", "y"]
    assert file_columns(["y"], scan, "f") == [None, "y"]
    with pytest.raises(ValueError, match=r"f: columns \['x', 'X'\] all match `x`"):
        file_columns(["x", "X", "y"], scan, "f")
    sensitive = ParquetScan(scan.files, scan.columns, scan.types, scan.names, True)
    assert file_columns(["x", "X", "y"], sensitive, "f") == ["x", "y"]
    assert file_columns(["X", "y"], sensitive, "f") == [None, "y"]
