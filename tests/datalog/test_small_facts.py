"""Small fact files read without pyarrow (ADR 0067).

`facts_text.read_plain` reads a file of at most `Tuning.text_facts` bytes by Python's own
text handling where every line has a plain form; anything else goes to the reference
(pyarrow's CSV reader, then the strict scan). Twin tests: for generated files, plain
or odd (signs, spaces, `nan`, huge integers, lone `\\r`, a byte-order mark, bad
bytes, empty lines, headers), the columns it gives are the reference's, and a
database loaded by either tactic holds the same rows with the same symbol ids. A
`deltalog run` of small files loads no pyarrow.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog import Database, DatalogError
from datalog.eval.facts_text import read_plain
from datalog.io.sources.csv import FactFile, FactFileError, load_inputs, read_facts
from differential.tuning import TUNING, tuned
from tests.budget import examples
from tests.datalog.test_startup import loaded_after

TYPES = ("number", "unsigned", "float", "symbol")
REFERENCE = {"text_facts": 0, "integer_facts": 0, "python_symbols": 0}  # pyarrow always


def _plain(kind: str) -> st.SearchStrategy[str]:
    """Texts of the forms `read_plain` reads itself."""
    if kind == "number":
        return st.integers(-(2**63), 2**63 - 1).map(str)
    if kind == "unsigned":
        return st.integers(0, 2**64 - 1).map(str)
    if kind == "float":
        finite = st.floats(allow_nan=False, allow_infinity=False)
        return st.one_of(finite.map(repr), st.integers(-(10**6), 10**6).map(str))
    return st.text(st.characters(exclude_characters="\t\n\r\ufeff"), max_size=6)


ODD = st.sampled_from(
    ["+5", " 7", "8 ", "nan", "inf", "-inf", "1_000", "1e5", ".5", "5.", "-0", "007",
     str(2**63), str(-(2**63) - 1), str(2**64), "9" * 30, "", "x", "\ufeff3", "١٢"]
)  # fmt: skip


@st.composite
def files(
    draw: st.DrawFn, types: tuple[str, ...] = TYPES
) -> tuple[tuple[str, ...], bytes, bool, str]:
    """Column types, a file's bytes, whether it has a header line, its delimiter."""
    kinds = tuple(draw(st.lists(st.sampled_from(types), min_size=1, max_size=3)))
    delimiter = draw(st.sampled_from(["\t", ","]))
    odd = draw(st.booleans())
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        fields = [draw(st.one_of(_plain(k), ODD) if odd else _plain(k)) for k in kinds]
        fields = [f.replace(delimiter, "") for f in fields]
        lines.append(delimiter.join(fields))
        if odd and draw(st.booleans()):
            lines.append(draw(st.sampled_from(["", "\r", "1", "1\t2\t3\t4"])))
    ends = draw(st.sampled_from(["\n", "\r\n"] + (["\r"] if odd else [])))
    headers = draw(st.booleans())
    text = ends.join((["h"] if headers else []) + lines) + draw(st.sampled_from(["", ends]))
    data = text.encode("utf-8", "surrogatepass")
    if odd and draw(st.booleans()):
        data = draw(st.sampled_from([b"\xef\xbb\xbf", b"\xff", b""])) + data
    return kinds, data, headers, delimiter


def _program(kinds: tuple[str, ...], delimiter: str, headers: bool) -> str:
    columns = ", ".join(f"c{i}: {k}" for i, k in enumerate(kinds))
    options = f'filename="r.txt", delimiter="{delimiter}", headers={str(headers).lower()}'
    return f'.decl r({columns})\n.input r({options})\n.decl s(x: symbol)\ns("c").\n'


def _same(found: Any, expected: Any) -> bool:
    """Values equal, floats by their bits (so -0.0 and NaN are checked too)."""
    if isinstance(found, float) and isinstance(expected, float):
        return math.copysign(1, found) == math.copysign(1, expected) and (
            found == expected or (math.isnan(found) and math.isnan(expected))
        )
    return type(found) is type(expected) and found == expected


# Every file of integer columns by numpy (`facts_integers`), checked a few bytes at a time.
INTEGERS = {"text_facts": 0, "text_part": 5}
# Every small file by Python's reader, integers included (the routing before ADR 0084).
PYTHON = {"integers_by_numpy": False}
# The default: a small file of integer columns only by numpy, any other by Python's.
FIRST = {"text_part": 5}
TACTICS = pytest.mark.parametrize(
    "tactic", [PYTHON, INTEGERS, FIRST], ids=["python", "numpy", "integers-first"]
)


def _types(tactic: dict[str, int]) -> tuple[str, ...]:
    """The column types a tactic reads (mostly: one file in five has any type)."""
    return ("number", "unsigned", "number", "unsigned", "float") if tactic == INTEGERS else TYPES


@TACTICS
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_plain_file_reads_as_the_reference_reads_it(
    tmp_path_factory: pytest.TempPathFactory, tactic: dict[str, int], data: st.DataObject
) -> None:
    kinds, raw, headers, delimiter = data.draw(files(_types(tactic)))
    note(repr(raw))
    path = tmp_path_factory.mktemp("facts") / "r.txt"
    path.write_bytes(raw)
    db = Database()
    db.define(_program(kinds, delimiter, headers))
    info = db.checked.schema.require("r")
    with tuned(TUNING.but(**tactic)):
        found = read_plain(info, path, delimiter, headers)
    try:
        expected = read_facts(FactFile(info, path, delimiter, headers))
    except FactFileError:
        assert found is None  # a bad file is the reference's to name
        return
    if found is None:
        return
    for name in info.column_names:
        got, want = found[name].tolist(), expected.column(name).to_pylist()
        assert len(got) == len(want)
        assert all(_same(g, w) for g, w in zip(got, want, strict=True)), (name, got, want)


@TACTICS
@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_database_loads_the_same_rows_and_symbols_by_either_reader(
    tmp_path_factory: pytest.TempPathFactory, tactic: dict[str, int], data: st.DataObject
) -> None:
    kinds, raw, headers, delimiter = data.draw(files(_types(tactic)))
    note(repr(raw))
    folder = tmp_path_factory.mktemp("facts")
    (folder / "r.txt").write_bytes(raw)
    loaded = []
    for tuning in (TUNING.but(**tactic), TUNING.but(**REFERENCE)):
        db = Database()
        db.define(_program(kinds, delimiter, headers))
        with tuned(tuning):
            try:
                counts = load_inputs(db, folder, progress=False)
            except DatalogError as error:  # a bad file, or a value (NaN) no relation holds
                loaded.append(("error", str(error)))
                continue
            columns = db.query_columns(f"r({', '.join(f'x{i}' for i in range(len(kinds)))})")
        ids = db.symbols.to_list()  # the symbols' ids: interned in the same order
        rows = sorted(zip(*(np.asarray(c).tolist() for c in columns.values()), strict=True))
        loaded.append((counts, repr(rows), ids))
    assert loaded[0] == loaded[1]


def test_plain_small_files_are_read_without_pyarrow(tmp_path: Path) -> None:
    """The tactic is taken (the twins above compare something), and a whole `deltalog
    run` of small files, numbers and symbols, loads no pyarrow."""
    (tmp_path / "e.facts").write_text("1\t2\n2\t3\n\n3\t-4\n")
    (tmp_path / "n.facts").write_text("ada\t1.5\nbob\t2\n")
    program = tmp_path / "p.dl"
    program.write_text(
        ".decl e(x: number, y: number)\n.input e\n.decl n(s: symbol, f: float)\n.input n\n"
        ".decl r(x: number, y: number)\nr(x, y) :- e(x, y).\nr(x, z) :- r(x, y), e(y, z).\n"
        ".decl m(s: symbol)\nm(s) :- n(s, f), f > 1.6.\n.output r\n.output m\n.printsize r\n"
    )
    db = Database()
    db.define(program.read_text())
    edge = db.checked.schema.require("e")
    for tactic in (PYTHON, INTEGERS, FIRST):
        with tuned(TUNING.but(**tactic)):
            found = read_plain(edge, tmp_path / "e.facts", "\t", False)
        assert found is not None and found["y"].tolist() == [2, 3, -4]
    for threshold, pyarrow in ((TUNING.text_facts, False), (0, True)):
        code = (
            "from datalog.cli.commands import main\n"
            "from differential.tuning import TUNING, tuned\n"
            f"with tuned(TUNING.but(text_facts={threshold})):\n"
            f"    assert main(['run', {str(program)!r}, '-F', {str(tmp_path)!r}, "
            f"'-D', {str(tmp_path)!r}]) == 0"
        )
        assert ("pyarrow" in loaded_after(code)) is pyarrow
        assert (tmp_path / "r.csv").read_text().splitlines()[:2] == ["1\t-4", "1\t2"]
        assert (tmp_path / "m.csv").read_text() == "bob\n"


def test_a_small_file_of_integers_is_read_by_numpy_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tactic is taken: Python's reader held every line and field of CSPA's 250 KB
    file as a Python string (8 MiB at once, ADR 0084); without it, it reads them."""
    from datalog.eval import facts_text

    (tmp_path / "e.facts").write_text("1\t2\n2\t3\n")
    (tmp_path / "s.facts").write_text("a\t2\n")
    db = Database()
    db.define(".decl e(x: number, y: unsigned)\n.decl s(x: symbol, y: number)")
    edge, named = db.checked.schema.require("e"), db.checked.schema.require("s")
    python = []
    real = facts_text._read_small
    monkeypatch.setattr(facts_text, "_read_small", lambda *a: python.append(a[0].name) or real(*a))
    for tactic, expected in ((FIRST, ["s"]), (PYTHON, ["e", "s"])):
        python.clear()
        with tuned(TUNING.but(**tactic)):
            found = read_plain(edge, tmp_path / "e.facts", "\t", False)
            assert found is not None and found["y"].tolist() == [2, 3]
            assert found["y"].dtype == np.uint64
            assert read_plain(named, tmp_path / "s.facts", "\t", False) is not None
        assert python == expected
