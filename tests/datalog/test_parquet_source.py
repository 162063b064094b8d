"""`insert_parquet`: a Parquet file's rows, read one row group at a time, equal the
rows of the same table inserted from Arrow, and bad files change nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalog import Database, TransactionError
from datalog.io.sources.parquet import insert_parquet

PROGRAM = ".decl e(a: number, b: number)\n.decl p(name: symbol, age: number, w: float)\n"


def fresh() -> Database:
    db = Database()
    db.define(PROGRAM)
    return db


def test_numbers_in_many_row_groups_equal_the_table_inserted_at_once(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    table = pa.table(
        {"a": rng.integers(0, 50, 5000), "b": rng.integers(-5, 5, 5000).astype(np.int32)}
    )
    pq.write_table(table, tmp_path / "e.parquet", row_group_size=700)
    db, reference = fresh(), fresh()
    epoch = insert_parquet(db, "e", tmp_path / "e.parquet")
    reference.insert("e", table)
    assert epoch == db.epoch
    assert sorted(db.query("e(a, b)")) == sorted(reference.query("e(a, b)"))
    pairs = zip(table["a"].to_pylist(), table["b"].to_pylist(), strict=True)
    assert len(db.query("e(a, b)")) == len(set(pairs))


def test_columns_are_matched_by_name_else_by_position(tmp_path: Path) -> None:
    by_name = pa.table({"b": [2, 3], "x": [0, 0], "a": [1, 1]})
    pq.write_table(by_name, tmp_path / "named.parquet")
    by_position = pa.table({"u": [7], "v": [8]})
    pq.write_table(by_position, tmp_path / "positional.parquet")
    db = fresh()
    insert_parquet(db, "e", tmp_path / "named.parquet")
    insert_parquet(db, "e", tmp_path / "positional.parquet")
    assert sorted(db.query("e(a, b)")) == [(1, 2), (1, 3), (7, 8)]


def test_symbols_and_floats_are_read_too(tmp_path: Path) -> None:
    table = pa.table({"name": ["ann", "bob", "ann"], "age": [30, 41, 30], "w": [1.5, 2.0, 1.5]})
    pq.write_table(table, tmp_path / "p.parquet", row_group_size=2)
    db = fresh()
    insert_parquet(db, "p", tmp_path / "p.parquet")
    assert sorted(db.query("p(n, a, w)")) == [("ann", 30, 1.5), ("bob", 41, 2.0)]


def test_a_null_or_a_wrong_value_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    db = fresh()
    db.insert("e", [(1, 1)])
    pq.write_table(pa.table({"a": [1, None], "b": [2, 3]}), tmp_path / "nulls.parquet")
    with pytest.raises(TransactionError, match="nulls"):
        insert_parquet(db, "e", tmp_path / "nulls.parquet")
    pq.write_table(pa.table({"a": [1.5], "b": [2]}), tmp_path / "float.parquet")
    with pytest.raises(TransactionError, match="number"):
        insert_parquet(db, "e", tmp_path / "float.parquet")
    pq.write_table(pa.table({"a": [1]}), tmp_path / "narrow.parquet")
    with pytest.raises(TransactionError, match="2 columns"):
        insert_parquet(db, "e", tmp_path / "narrow.parquet")
    assert db.query("e(a, b)") == [(1, 1)]
