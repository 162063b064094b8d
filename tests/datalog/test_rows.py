"""Data in: every value fits its column exactly, or the transaction is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from datalog.db.change import Change
from datalog.db.database import Database
from datalog.lang.errors import TransactionError

PROGRAM = """
.decl e(src: number, dst: unsigned)
.decl f(x: float)
.decl s(x: symbol)
"""


@pytest.fixture
def db() -> Database:
    database = Database()
    database.define(PROGRAM)
    return database


@pytest.mark.parametrize(
    "rows",
    [
        pytest.param(np.array([[1, -1]]), id="negative-int64-into-unsigned"),
        pytest.param(np.array([[2**63, 1]], dtype=np.uint64), id="uint64-beyond-number"),
        pytest.param(pa.table({"src": [1], "dst": pa.array([-5])}), id="arrow-negative-unsigned"),
        pytest.param(np.array([[1e19, 1.0]]), id="float-beyond-number"),
        pytest.param([(1, -1)], id="python-negative-unsigned"),
        pytest.param([(2**63, 1)], id="python-beyond-number"),
    ],
)
def test_values_out_of_their_columns_range_are_refused(db: Database, rows: object) -> None:
    with pytest.raises(TransactionError, match=r"out of range|out of bounds|too large"):
        db.insert("e", rows)
    assert db.query("e(x, y)") == []


def test_the_extremes_of_each_range_are_kept_exactly(db: Database) -> None:
    db.insert("e", np.array([[-(2**63), 0], [2**63 - 1, 0]]))
    db.insert("e", [(0, 2**64 - 1)])
    assert sorted(db.query("e(x, y)")) == [(-(2**63), 0), (0, 2**64 - 1), (2**63 - 1, 0)]


@pytest.mark.parametrize("rows", [[(float("nan"),)], np.array([1.0, float("nan")])])
def test_nan_is_refused_as_a_value(db: Database, rows: object) -> None:
    with pytest.raises(TransactionError, match="NaN"):
        db.insert("f", rows)


def test_a_string_is_not_a_collection_of_rows(db: Database) -> None:
    with pytest.raises(TransactionError, match="not a string"):
        db.insert("s", "abc")
    db.insert("s", ["abc"])
    assert db.query("s(x)") == [("abc",)]


def test_pandas_frames_match_columns_by_name_or_by_position(db: Database) -> None:
    pd = pytest.importorskip("pandas")
    db.insert("e", pd.DataFrame({"dst": [3, 4], "src": [1, 2]}))  # by name, any order
    db.insert("e", pd.DataFrame([(5, 6)]))  # unnamed (a RangeIndex): by position
    assert sorted(db.query("e(x, y)")) == [(1, 3), (2, 4), (5, 6)]
    with pytest.raises(TransactionError, match=r"has columns \(src, dst\).*\(a, b\)"):
        db.insert("e", pd.DataFrame({"a": [7], "b": [8]}))  # was inserted by position


def test_pandas_frames_bring_symbols_and_nullable_or_arrow_backed_columns(db: Database) -> None:
    pd = pytest.importorskip("pandas")
    db.define(".decl person(name: symbol, age: number)")
    db.insert("person", pd.DataFrame({"age": [36, 41], "name": ["Ada", "Grace"]}))
    frame = pd.DataFrame({"name": ["Alan"], "age": [41]}).convert_dtypes(dtype_backend="pyarrow")
    db.insert("person", frame)
    db.insert("person", pd.DataFrame({"name": ["Edsger"], "age": pd.array([72], dtype="Int64")}))
    assert sorted(db.query("person(n, a)")) == [
        ("Ada", 36), ("Alan", 41), ("Edsger", 72), ("Grace", 41)]  # fmt: skip
    with pytest.raises(TransactionError, match="needs number values"):
        db.insert("person", pd.DataFrame({"name": ["Kurt"], "age": ["old"]}))
    assert len(db.query("person(n, a)")) == 4


def test_arrow_tables_match_columns_by_name_or_by_position(db: Database) -> None:
    db.insert("e", pa.table({"dst": [3], "src": [1], "note": ["extra columns are ignored"]}))
    db.insert("e", pa.record_batch({"c0": [5], "c1": [6]}))  # Deltalog's unnamed: by position
    db.insert("e", pa.table({"0": [7], "1": [8]}))  # pandas' unnamed, through Arrow
    assert sorted(db.query("e(x, y)")) == [(1, 3), (5, 6), (7, 8)]
    with pytest.raises(TransactionError, match="has 2 columns, but the rows have 3"):
        db.insert("e", pa.table({"c0": [7], "c1": [8], "c2": [9]}))
    with pytest.raises(TransactionError, match="src missing"):
        db.insert("e", pa.table({"source": [7], "dst": [8]}))


def test_polars_frames_match_columns_by_name_or_by_position(db: Database) -> None:
    pl = pytest.importorskip("polars")  # not a dependency: a 50 MB wheel
    db.insert("e", pl.DataFrame({"dst": [3, 4], "src": [1, 2]}))  # by name, any order
    db.insert("e", pl.DataFrame([(5, 6)], orient="row"))  # column_0, column_1: by position
    db.insert("s", pl.DataFrame({"x": ["a", "é"]}))
    assert sorted(db.query("e(x, y)")) == [(1, 3), (2, 4), (5, 6)]
    assert sorted(db.query("s(x)")) == [("a",), ("é",)]
    with pytest.raises(TransactionError, match="holds nulls"):
        db.insert("s", pl.DataFrame({"x": ["b", None]}))
    with pytest.raises(TransactionError, match="out of range"):
        db.insert("e", pl.DataFrame({"src": [1], "dst": [-1]}))
    assert len(db.query("e(x, y)")) == 3 and len(db.query("s(x)")) == 2


def test_arrow_string_columns_are_interned_without_python_strings(db: Database) -> None:
    table = pa.table({"x": pa.chunked_array([["a", "b\0"], ["a", "é"]])})
    db.insert("s", table)
    assert sorted(db.query("s(x)")) == [("a",), ("b\0",), ("é",)]
    with pytest.raises(TransactionError, match="nulls"):
        db.insert("s", pa.table({"x": ["c", None]}))
    with pytest.raises(TransactionError, match="needs number values, got strings"):
        db.insert("e", pa.table({"src": ["1"], "dst": [2]}))
    assert len(db.query("s(x)")) == 3


def test_answers_come_out_as_arrow_tables_and_changes_too(db: Database) -> None:
    db.insert("e", [(1, 2), (3, 4)])
    table = db.query_arrow("e(src, dst), src < 3")
    assert table.column_names == ["src", "dst"] and table.to_pylist() == [{"src": 1, "dst": 2}]
    db.insert("s", [("a",)])
    assert db.query_arrow("s(x)").column("x").to_pylist() == ["a"]
    seen = []
    with db.subscribe("e(x, y)", seen.append) as sub:
        db.insert("e", [(5, 6)])
        assert sub.active
    assert not sub.active and db.live == {}
    change = seen[-1].to_arrow(["x", "y"])
    assert change.to_pylist() == [{"x": 5, "y": 6, "diff": 1}]


def test_a_live_subscription_shows_its_current_answer_in_a_notebook(db: Database) -> None:
    sub = db.subscribe("e(src, dst)", lambda change: None)
    db.insert("e", [(1, 2), (3, 4)])
    page = sub._repr_html_()
    assert "<th>src</th><th>dst</th>" in page and "<td>3</td><td>4</td>" in page
    assert "2 rows" in page and sub.rows() == [(1, 2), (3, 4)]
    sub.close()
    assert sub.rows() == [] and repr(sub).endswith("(closed, 0 errors)>")


def test_changes_and_transactions_have_short_reprs(db: Database) -> None:
    big = Change([(i, "x" * 100) for i in range(5000)], [1] * 4999 + [-1], 3)
    assert len(repr(big)) < 300 and repr(big).endswith("... 4997 more]>")
    assert repr(Change([(5,), (3,)], [1, -1], 4)) == "<Change epoch 4: +1 -1 [(5,) +1, (3,) -1]>"
    assert repr(Change([], [], 2, True)) == "<Change snapshot epoch 2: +0 -0 []>"
    with db.transaction() as tx:
        tx.insert("e", [(1, 2), (3, 4)])
        assert repr(tx) == "<Transaction (open): 1 changes, 2 rows>"
    assert repr(tx) == "<Transaction (committed): 1 changes, 2 rows>"


def test_a_database_has_a_short_repr(tmp_path: Path) -> None:
    db = Database()
    db.define(".decl e(x: number)\n.decl r(x: number)\nr(x) :- e(x).")
    db.insert("e", [(i,) for i in range(10_000)])
    db.subscribe("r(x)", lambda change: None)
    assert repr(db) == f"<Database: epoch {db.epoch}, 2 relations, 1 live queries>"
    with Database(tmp_path) as durable:
        assert (
            repr(durable)
            == f"<Database at {tmp_path}: epoch {durable.epoch}, 0 relations, 0 live queries>"
        )
