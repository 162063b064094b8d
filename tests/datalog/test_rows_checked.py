"""Rows are matched to the declaration by name when they have names, and every row
of every column is checked, wherever it stands, with the row named in the error."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from datalog import Change, Database
from datalog.lang.errors import TransactionError

PROGRAM = """
.decl person(id: number, name: symbol)
.decl s(x: symbol)
.decl n(x: number)
"""


@pytest.fixture
def db() -> Database:
    database = Database()
    database.define(PROGRAM)
    return database


@pytest.mark.parametrize(
    "rows",
    [
        pytest.param(pd.DataFrame({"id": [1], "nom": ["Ada"]}), id="pandas"),
        pytest.param(pa.table({"id": [1], "nom": ["Ada"]}), id="arrow"),
        pytest.param(pa.record_batch({"nom": ["Ada"], "id": [1]}), id="record-batch"),
        pytest.param({"id": [1], "nom": ["Ada"]}, id="dict"),
    ],
)
def test_named_columns_that_do_not_match_the_declaration_are_an_error(
    db: Database, rows: object
) -> None:
    """`nom` for `name` was inserted by position, silently."""
    with pytest.raises(TransactionError) as caught:
        db.insert("person", rows)
    message = caught.value.message
    assert "has columns (id, name)" in message and "nom" in message and "name missing" in message
    assert db.query("person(i, n)") == []


@pytest.mark.parametrize(
    "rows",
    [
        pytest.param(pd.DataFrame({"name": ["Ada"], "id": [1]}), id="pandas-any-order"),
        pytest.param(pa.table({"name": ["Ada"], "id": [1], "age": [36]}), id="arrow-extra"),
        pytest.param({"name": np.array(["Ada"]), "id": np.array([1])}, id="dict-any-order"),
        pytest.param(pd.DataFrame([(1, "Ada")]), id="pandas-range-index"),
        pytest.param(pa.table({"c0": [1], "c1": ["Ada"]}), id="deltalog-unnamed"),
        pytest.param(pa.table({"_1": [1], "_2": ["Ada"]}), id="spark-unnamed"),
        pytest.param(pa.table({"column_0": [1], "column_1": ["Ada"]}), id="polars-unnamed"),
        pytest.param([(1, "Ada")], id="tuples"),
        pytest.param({0: [1], 1: ["Ada"]}, id="dict-by-position"),
    ],
)
def test_named_columns_match_by_name_and_unnamed_ones_by_position(
    db: Database, rows: object
) -> None:
    db.insert("person", rows)
    assert db.query("person(i, n)") == [(1, "Ada")]


def test_a_column_named_twice_is_an_error(db: Database) -> None:
    table = pa.table([pa.array([1]), pa.array([2]), pa.array(["a"])], names=["id", "id", "name"])
    with pytest.raises(TransactionError, match="two columns `id`"):
        db.insert("person", table)


def test_a_non_string_after_row_1000_of_a_symbol_column_is_named(db: Database) -> None:
    """Only the first 1,000 rows were checked: then pyarrow raised ArrowTypeError."""
    rows = [("a",)] * 1001 + [(5,)]
    with pytest.raises(
        TransactionError, match=r"column 1 \(`x`, symbol\) of `s`.*row 1001 holds 5"
    ):
        db.insert("s", rows)
    mixed = np.array(["a"] * 2000 + [b"b"], dtype=object)
    with pytest.raises(TransactionError, match=r"row 2000 holds b'b'"):
        db.insert("s", [mixed])
    with pytest.raises(TransactionError, match=r"row 1500 holds None"):
        db.insert("s", [("a",)] * 1500 + [(None,)])
    frame = pd.DataFrame({"id": range(3), "name": ["a", "b", float("nan")]})
    with pytest.raises(TransactionError, match=r"`name`.*row 2 holds nan"):
        db.insert("person", frame)
    assert db.query("s(x)") == [] and len(db.symbols) == 0


@pytest.mark.parametrize(
    "rows",
    [
        pytest.param([("ok",), ("a\ud800b",)], id="tuples"),
        pytest.param(np.array(["ok", "\udfff"]), id="numpy-unicode"),
        pytest.param(pd.DataFrame({"x": pd.Series(["ok", "\ud83d"], dtype=object)}), id="pandas"),
    ],
)
def test_a_lone_surrogate_in_inserted_rows_is_refused_naming_the_row(
    db: Database, rows: object
) -> None:
    """It raised UnicodeEncodeError; it could never be logged or served as UTF-8."""
    with pytest.raises(TransactionError, match="row 1 holds a lone surrogate"):
        db.insert("s", rows)
    assert db.query("s(x)") == [] and len(db.symbols) == 0


def test_arrow_strings_that_are_not_utf8_are_refused_naming_the_row(db: Database) -> None:
    raw = pa.array([b"ok", b"also", b"\xed\xa0\x80"], pa.binary()).view(pa.string())
    with pytest.raises(TransactionError, match="row 2 is not valid UTF-8"):
        db.insert("s", pa.table({"x": raw}))
    assert db.query("s(x)") == []


def test_type_errors_in_number_columns_name_the_row(db: Database) -> None:
    with pytest.raises(TransactionError, match=r"row 3 holds 'x'"):
        db.insert("n", [(1,), (2,), (3,), ("x",)])
    with pytest.raises(TransactionError, match=r"row 2 holds 2.5"):
        db.insert("n", np.array([1.0, 2.0, 2.5]))
    with pytest.raises(TransactionError, match=r"row 1 is out of range|row 1 holds"):
        db.insert("n", [(1,), (2**70,)])
    with pytest.raises(TransactionError, match=r"row 1 is null"):
        db.insert("n", pa.table({"x": pa.array([1, None], pa.int64())}))
    assert db.query("n(x)") == []


def test_a_change_names_its_columns_after_the_query_variables(db: Database) -> None:
    """`Change.to_arrow()` named them c0, c1."""
    seen: list[Change] = []
    db.subscribe("person(who, label), who > 0", seen.append)
    db.insert("person", [(1, "Ada")])
    snapshot, change = seen
    assert snapshot.columns == change.columns == ("who", "label")
    assert change.to_arrow().column_names == ["who", "label", "diff"]
    assert change.to_arrow().to_pylist() == [{"who": 1, "label": "Ada", "diff": 1}]
    assert snapshot.to_arrow().column_names == ["who", "label", "diff"]
    assert change.to_arrow(["a", "b"]).column_names == ["a", "b", "diff"]
    paced: list[Change] = []
    db.subscribe("person(p, _)", paced.append, granularity={"epochs": 2})
    db.insert("person", [(2, "Grace")])
    db.insert("person", [(3, "Edsger")])
    assert [c.to_arrow().column_names for c in paced] == [["p", "diff"]] * len(paced)
    assert len(paced) >= 2
