"""`.output` written by whole columns (`datalog.io.sources.text`), twinned with the row
writer it replaced: `sorted(answer.rows())` written one tuple at a time.

The two must give the same bytes on every relation: symbols (with delimiters,
quotes, newlines and non-ASCII in them), numbers at both ends of int64, unsigned
above 2**63, floats of every layout `repr` has (`1e-08`, `1e+16`, `-0`, `inf`),
and ties in the first columns that later columns break. NaN is the one exception
(Python's sort has no place for it): it sorts after every number.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datalog import Database
from datalog.db.change import Answer
from datalog.io.sources import csv
from datalog.io.sources.csv import write_outputs, write_rows
from datalog.io.sources.text import sorted_text
from tests.budget import examples

SYMBOLS = ["", "a", "b", "B", "a b", "a\tb", "x,y", '"q"', "line\nbreak", "é", "日本", "z" * 30]
NUMBERS = [-(2**63), -(2**31), -7, -1, 0, 1, 2, 10, 2**53 + 1, 2**63 - 1]
UNSIGNED = [0, 1, 9, 10, 2**32, 2**63, 2**64 - 1]
FLOATS = [
    0.0, -0.0, 1.0, -1.0, 0.5, 1e-08, 1e-5, 0.0001, 1e15, 1e16, -1e16, 123456789012345.6,
    1739367877130.134, 2.0**53, 1e22, 5e-324, 1.7976931348623157e308, float("inf"),
    float("-inf"), 0.1 + 0.2, -2.5,
]  # fmt: skip
POOLS: dict[str, tuple[np.dtype, list[object]]] = {
    "symbol": (np.dtype(object), SYMBOLS),
    "number": (np.dtype(np.int64), NUMBERS),
    "unsigned": (np.dtype(np.uint64), UNSIGNED),
    "float": (np.dtype(np.float64), FLOATS),
}


def row_writer(answer: Answer, delimiter: str) -> str:
    """The writer before: Python tuples, sorted, one line each."""
    out = io.StringIO()
    write_rows(out, sorted(answer.rows()), delimiter)
    return out.getvalue()


def column_writer(answer: Answer, delimiter: str, chunk_rows: int = 1 << 20) -> str:
    columns = list(answer.columns.values())
    return "".join(sorted_text(columns, answer.size, delimiter, chunk_rows))


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    kinds = draw(st.lists(st.sampled_from(sorted(POOLS)), min_size=1, max_size=4))
    size = draw(st.integers(0, 40))
    columns = {}
    for i, kind in enumerate(kinds):
        dtype, pool = POOLS[kind]
        values = draw(st.lists(st.sampled_from(pool), min_size=size, max_size=size))
        columns[f"x{i}"] = np.array(values, dtype=dtype)
    return Answer(columns, size)


@settings(max_examples=examples(300), deadline=None)
@given(answers(), st.sampled_from(["\t", ",", "|"]), st.integers(1, 7))
def test_the_column_writer_is_the_row_writer(
    answer: Answer, delimiter: str, chunk_rows: int
) -> None:
    assert column_writer(answer, delimiter, chunk_rows) == row_writer(answer, delimiter)


def test_a_large_random_relation_is_written_as_the_rows_were() -> None:
    rng = np.random.default_rng(25)
    size = 20_000
    words = np.array([f"w{i}" for i in rng.integers(0, 300, 2_000)], dtype=object)
    columns = {
        "a": rng.integers(-50, 50, size),
        "b": words[rng.integers(0, len(words), size)],
        "c": np.round(rng.normal(size=size) * 10.0 ** rng.integers(-12, 20, size), 3),
        "d": rng.integers(0, 2**64 - 1, size, dtype=np.uint64),
    }
    answer = Answer(columns, size)
    assert column_writer(answer, "\t", 4_096) == row_writer(answer, "\t")


def test_nullary_relations() -> None:
    assert column_writer(Answer({}, 1), "\t") == row_writer(Answer({}, 1), "\t") == "()\n"
    assert column_writer(Answer({}, 0), "\t") == row_writer(Answer({}, 0), "\t") == ""


def test_nan_sorts_after_every_number() -> None:
    column = np.array([float("nan"), 2.0, -float("inf"), 1.5])
    assert column_writer(Answer({"x": column}, 4), "\t") == "-inf\n1.5\n2\nnan\n"


def test_write_outputs_gives_the_row_writers_files(tmp_path: Path) -> None:
    """End to end: the files and the `-` framing, with headers and a delimiter."""
    db = Database()
    db.define(
        ".decl r(a: number, s: symbol, f: float, u: unsigned)\n"
        ".output r\n"
        '.output r(filename="r2.csv", delimiter=",", headers=true)\n'
        ".decl z()\n.output z\nz().\n"
    )
    rng = np.random.default_rng(7)
    pools = [NUMBERS, SYMBOLS, FLOATS, UNSIGNED]
    picks = [rng.integers(0, len(pool), 500) for pool in pools]
    picked = zip(*picks, strict=True)
    rows = [tuple(pool[i] for pool, i in zip(pools, row, strict=True)) for row in picked]
    db.insert("r", rows)
    write_outputs(db, tmp_path)
    answer = db.query_many(["r(a, s, f, u)"])[0]
    assert (tmp_path / "r.csv").read_text(encoding="utf-8") == row_writer(answer, "\t")
    expected = "a,s,f,u\n" + row_writer(answer, ",")
    assert (tmp_path / "r2.csv").read_text(encoding="utf-8") == expected
    assert (tmp_path / "z.csv").read_text() == "()\n"
    printed = io.StringIO()
    write_outputs(db, "-", printed)
    framed = f"---------------\nr\n===============\n{row_writer(answer, chr(9))}"
    assert framed in printed.getvalue()


@pytest.mark.parametrize("kind", sorted(POOLS))
def test_each_kind_of_column_alone(kind: str) -> None:
    dtype, pool = POOLS[kind]
    answer = Answer({"x": np.array(pool[::-1] + pool, dtype=dtype)}, 2 * len(pool))
    assert column_writer(answer, "\t", 5) == row_writer(answer, "\t")


def test_an_answer_is_written_alike_by_rows_and_by_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """`write_rows` writes an answer below `COLUMNS_FROM` rows from its sorted tuples,
    and from it on by columns: the same text either way."""
    rng = np.random.default_rng(5)
    size = 3_000
    answer = Answer(
        {
            "s": np.array([SYMBOLS[i] for i in rng.integers(0, len(SYMBOLS), size)], dtype=object),
            "n": rng.integers(-50, 50, size),
        },
        size,
    )
    by_rows = io.StringIO()
    write_rows(by_rows, answer, ",")
    monkeypatch.setattr(csv, "COLUMNS_FROM", 0)
    by_columns = io.StringIO()
    write_rows(by_columns, answer, ",")
    assert by_rows.getvalue() == by_columns.getvalue() == row_writer(answer, ",")
