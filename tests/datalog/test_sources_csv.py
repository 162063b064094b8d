"""Soufflé-compatible fact files: options, types, sorted output, and bad files.

A bad file raises `FactFileError` naming the file, line and column, and nothing
of any input is inserted.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from datalog.db.database import Database
from datalog.io.sources import csv as facts
from datalog.io.sources.csv import FactFileError, load_inputs, write_outputs
from datalog.lang.errors import DatalogError

PROGRAM = """
.decl edge(x: number, y: number)
.decl person(name: symbol, score: float, id: unsigned)
.input edge
.input person(IO=file, filename="people.csv", delimiter=",", headers=true)
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
.output reach
.output person(filename="out/people.txt", delimiter="|")
"""


def _db(program: str = PROGRAM) -> Database:
    db = Database()
    db.define(program)
    return db


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def facts_dir(tmp_path: Path) -> Path:
    _write(tmp_path, "edge.facts", "1\t2\n2\t3\n\n3\t10\n")
    _write(
        tmp_path, "people.csv", "name,score,id\nzoe,1.5,7\nAda Lovelace,-2,18446744073709551615\n"
    )
    return tmp_path


def test_inputs_are_read_with_their_options_and_types(facts_dir: Path) -> None:
    db = _db()
    assert load_inputs(db, facts_dir, progress=False) == {"edge": 3, "person": 2}
    assert sorted(db.query("edge(x, y)")) == [(1, 2), (2, 3), (3, 10)]
    assert sorted(db.query("person(n, s, i)")) == [
        ("Ada Lovelace", -2.0, 2**64 - 1),
        ("zoe", 1.5, 7),
    ]


def test_outputs_are_sorted_numerically_and_honour_their_options(
    facts_dir: Path, tmp_path: Path
) -> None:
    db = _db()
    load_inputs(db, facts_dir, progress=False)
    out = tmp_path / "results"
    written = write_outputs(db, out)
    assert written == [out / "reach.csv", out / "out/people.txt"]
    reach = (out / "reach.csv").read_text(encoding="utf-8").splitlines()
    assert reach == ["1\t2", "1\t3", "1\t10", "2\t3", "2\t10", "3\t10"]  # 10 after 3
    people = (out / "out/people.txt").read_text(encoding="utf-8").splitlines()
    assert people == ["Ada Lovelace|-2|18446744073709551615", "zoe|1.5|7"]


def test_symbols_keep_spaces_quotes_and_commas_under_tab_delimiters(tmp_path: Path) -> None:
    db = _db('.decl s(a: symbol, b: symbol)\n.input s\n.output s(filename="s.tsv")')
    _write(tmp_path, "s.facts", 'say "hi", please\t\n  x  \ty\n')
    load_inputs(db, tmp_path, progress=False)
    assert sorted(db.query("s(a, b)")) == [("  x  ", "y"), ('say "hi", please', "")]
    write_outputs(db, tmp_path)
    assert (tmp_path / "s.tsv").read_text() == '  x  \ty\nsay "hi", please\t\n'


def test_output_dash_prints_soufflé_framing(tmp_path: Path) -> None:
    db = _db(".decl r(x: float)\n.output r\nr(2.0). r(0.25).")
    stream = io.StringIO()
    assert write_outputs(db, "-", stream) == []
    assert stream.getvalue() == "---------------\nr\n===============\n0.25\n2\n===============\n"


def test_a_multi_character_delimiter_is_read_by_the_strict_scan(tmp_path: Path) -> None:
    db = _db('.decl e(x: number, y: number)\n.input e(delimiter="::")')
    _write(tmp_path, "e.facts", "1::2\n+3::-4\n")
    load_inputs(db, tmp_path, progress=False)
    assert sorted(db.query("e(x, y)")) == [(1, 2), (3, -4)]


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("1\t2\n2\tx\n", 2, 2, "`x` is not a number in column `y` of `edge`"),
        ("1\t2\n\n3\t4\t5\n", 3, 0, "`edge` has 2 columns, but this line has 3"),
        ("1\n", 1, 0, "`edge` has 2 columns, but this line has 1"),
        ("9223372036854775808\t1\n", 1, 1, "out of range for number"),
        ("1\t\n", 1, 2, "`` is not a number"),
    ],
)
def test_a_bad_fact_file_names_file_line_and_column_and_loads_nothing(
    facts_dir: Path, text: str, line: int, column: int, message: str
) -> None:
    db = _db()
    path = _write(facts_dir, "edge.facts", text)
    with pytest.raises(FactFileError) as caught:
        load_inputs(db, facts_dir, progress=False)
    error = caught.value
    assert isinstance(error, DatalogError)
    assert (error.path, error.line, error.column) == (str(path), line, column)
    assert message in error.message
    rendered = error.format()
    assert f"{path}, line {line}" in rendered
    assert "^" in rendered.splitlines()[-1]
    assert db.query("edge(x, y)") == []
    assert db.query("person(n, s, i)") == []  # the good file was not loaded either


def test_the_caret_points_at_the_bad_field(tmp_path: Path) -> None:
    db = _db(".decl t(a: symbol, b: number)\n.input t")
    _write(tmp_path, "t.facts", "ok\t1\nlonger name\t12x\n")
    with pytest.raises(FactFileError) as caught:
        load_inputs(db, tmp_path, progress=False)
    source, caret = caught.value.format().splitlines()[-2:]
    assert source.strip() == "longer name\t12x"
    assert caret.index("^") == source.index("12x")


def test_a_missing_file_is_an_error_naming_it_and_loads_nothing(tmp_path: Path) -> None:
    db = _db()
    _write(tmp_path, "people.csv", "name,score,id\nzoe,1.5,7\n")  # edge.facts is missing
    with pytest.raises(FactFileError) as caught:
        load_inputs(db, tmp_path, progress=False)
    assert "no fact file for `.input edge`" in caught.value.format()
    assert str(tmp_path / "edge.facts") in caught.value.format()
    assert db.query("person(n, s, i)") == []  # nothing of any input went in


def test_a_missing_file_is_an_empty_relation_with_a_warning_when_allowed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = _db()
    assert load_inputs(db, tmp_path, progress=False, allow_missing=True)["edge"] == 0
    assert db.query("edge(x, y)") == []
    assert "no fact file" in caplog.text and "edge" in caplog.text


def test_bytes_that_are_not_utf8_are_read_as_replacement_characters(tmp_path: Path) -> None:
    db = _db(".decl s(x: symbol, n: number)\n.input s")
    (tmp_path / "s.facts").write_bytes(b"ok\t1\nbad\xff\xfe\t2\n")
    load_inputs(db, tmp_path, progress=False)
    assert sorted(db.query("s(x, n)")) == [("bad\ufffd\ufffd", 2), ("ok", 1)]


def test_a_nullary_relation_that_holds_is_written_as_parentheses(tmp_path: Path) -> None:
    db = _db(".decl yes()\n.decl no()\n.output yes\n.output no\nyes().")
    write_outputs(db, tmp_path)
    assert (tmp_path / "yes.csv").read_text() == "()\n"
    assert (tmp_path / "no.csv").read_text() == ""


def test_large_loads_are_chunked_with_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(facts, "CHUNK_ROWS", 4)
    monkeypatch.setattr(facts, "PROGRESS_ROWS", 5)
    db = _db(".decl n(x: number)\n.input n")
    _write(tmp_path, "n.facts", "".join(f"{i}\n" for i in range(10)))
    load_inputs(db, tmp_path, progress=True)
    assert sorted(db.query("n(x)")) == [(i,) for i in range(10)]
    err = capsys.readouterr().err
    assert err.count("\r") == 3  # chunks of 4, 4 and 2 rows
    assert err.endswith("\rloading n: 10 / 10 rows\n")


def test_no_progress_when_not_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _db(".decl n(x: number)\n.input n")
    _write(tmp_path, "n.facts", "1\n")
    load_inputs(db, tmp_path, progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("text", ["1_000", "1_0.5", "2e1_0"])
def test_a_float_that_souffle_would_not_read_is_a_bad_line(tmp_path: Path, text: str) -> None:
    """Python's float() reads `1_000` as 1000.0; Soufflé's reader stops at `_`."""
    db = _db(".decl f(x: float)\n.input f")
    _write(tmp_path, "f.facts", f"1.25\n{text}\n")
    with pytest.raises(FactFileError, match="is not a float") as caught:
        load_inputs(db, tmp_path, progress=False)
    assert caught.value.line == 2
    assert db.query("f(x)") == []


def test_fact_columns_keep_their_order_whatever_the_declared_names(tmp_path: Path) -> None:
    """Rows match named columns by name: the loader names them as declared (a
    relation declared with columns `c1, c0` got its columns swapped by `c0, c1`)."""
    db = _db(".decl e(c1: number, c0: number)\n.input e")
    _write(tmp_path, "e.facts", "1\t2\n")
    load_inputs(db, tmp_path, progress=False)
    assert db.query("e(a, b)") == [(1, 2)]
