"""Start-up: `from datalog import Database` loads what a database needs and no more.

pyarrow costs 50-90 ms to load: it is loaded when Arrow data comes in or goes out
(an Arrow or pandas insert, `query_arrow`, interning many strings, a large fact
file (ADR 0067), a snapshot), never by importing the API (ADR 0044). Nor are the
parser's lark (its first parse loads it) and the planner's passes and lowering with
the join kernels (the first query plans through them): opening a database needs
neither (ADR 0066)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    """Every module loaded after running `code` in a fresh interpreter."""
    program = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def loaded_after(code: str) -> set[str]:
    return {name.partition(".")[0] for name in modules_after(code)}


def test_importing_the_database_loads_no_pyarrow() -> None:
    assert "pyarrow" not in loaded_after("from datalog import Database")


def test_a_database_of_numbers_queried_as_columns_loads_no_pyarrow() -> None:
    code = (
        "from datalog import Database\n"
        "db = Database()\n"
        "db.define('.decl e(a: number, b: number)\\nr(b) :- e(1, b).\\n.decl r(b: number)')\n"
        "db.insert('e', [(1, 2), (1, 3)])\n"
        "assert sorted(db.query_columns('r(b)')['b'].tolist()) == [2, 3]"
    )
    assert "pyarrow" not in loaded_after(code)


def test_printsize_counts_columns_not_python_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`deltalog run` counts `.printsize` relations as columns (`query_columns`): a
    1M-pair closure no longer becomes a million Python tuples to be counted."""
    from datalog.cli.commands import main
    from datalog.db.database import Database

    program = (
        ".decl e(x: number, y: number)\n.decl p(s: symbol, x: number)\n.decl z()\n"
        'e(1, 2). e(2, 3). e(1, 2). p("a", 1). p("b", 1). z().\n'
        ".printsize e\n.printsize p\n.printsize z\n"
    )
    (tmp_path / "p.dl").write_text(program)

    def rows_of(self: Database, text: str, *args: object, **kwargs: object) -> object:
        assert text.startswith("z("), f"{text}: counted as Python rows"
        return real(self, text, *args, **kwargs)  # a nullary relation: `()` or nothing

    real = Database.query
    monkeypatch.setattr(Database, "query", rows_of)
    assert main(["run", str(tmp_path / "p.dl"), "-F", str(tmp_path), "-D", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == ["e\t2", "p\t2", "z\t1"]


def test_opening_a_database_loads_neither_the_parser_nor_the_lowering() -> None:
    loaded = modules_after("from datalog import Database\nDatabase()")
    deferred = {
        "lark",
        "_deltalog_lark_standalone",
        "joins",
        "datalog.plan.build",
        "datalog.plan.passes",
    }
    deferred.add("datalog.plan.dot")
    assert deferred & loaded == set()
    assert {"datalog.db.database", "datalog.plan.planner", "differential.engine"} <= loaded


def test_a_first_query_loads_the_parser_and_the_lowering() -> None:
    code = (
        "from datalog import Database\n"
        "db = Database()\n"
        "db.define('.decl e(a: number, b: number)\\ne(1, 2).')\n"
        "assert db.query('e(1, b)') == [(2,)]"
    )
    loaded = modules_after(code)
    assert {"datalog.lang.parser", "joins", "datalog.plan.build"} <= loaded
    # lark, or the stand-alone parser it made and the user's cache keeps (ADR 0084)
    assert {"lark", "_deltalog_lark_standalone"} & loaded


def test_a_run_that_writes_no_output_file_loads_no_arrow_compute(tmp_path: Path) -> None:
    """`.output` is formatted with pyarrow.compute (30 ms to load): a run that only
    counts (`.printsize`) does not load it."""
    (tmp_path / "e.facts").write_text("1\t2\n2\t3\n")
    program = tmp_path / "p.dl"
    program.write_text(".decl e(a: number, b: number)\n.input e\n.printsize e\n")
    run = ["run", str(program), "-F", str(tmp_path), "-D", str(tmp_path)]
    code = f"from datalog.cli.commands import main\nassert main({run!r}) == 0"
    assert "pyarrow.compute" not in modules_after(code)


def test_a_run_that_writes_a_small_output_file_loads_neither_arrow_compute_nor_pandas(
    tmp_path: Path,
) -> None:
    """A small `.output` is written from its sorted tuples: pyarrow's conversions
    import pandas when it is installed (0.1-0.4 s), which the column writer would pay
    before writing three lines."""
    (tmp_path / "e.facts").write_text("1\t2\n2\t3\n")
    program = tmp_path / "p.dl"
    program.write_text(".decl e(a: number, b: number)\n.input e\n.output e\n")
    run = ["run", str(program), "-F", str(tmp_path), "-D", str(tmp_path)]
    code = f"from datalog.cli.commands import main\nassert main({run!r}) == 0"
    assert {"pyarrow.compute", "pandas"} & modules_after(code) == set()
    assert (tmp_path / "e.csv").read_text() == "1\t2\n2\t3\n"


def test_a_run_loads_no_store_shutil_or_difflib(tmp_path: Path) -> None:
    """What a `deltalog run` does not use is not loaded (ADR 0084): the durable store's
    modules (with `shutil`, `json`'s snapshots, `fcntl`), `difflib` (names that are
    not found), OpenSSL (`hashlib`), and `shutil` for argparse's help width. The first
    run makes the stand-alone parser (lark loads `shutil` through `tempfile`)."""
    (tmp_path / "e.facts").write_text("1\t2\n2\t3\n")
    program = tmp_path / "p.dl"
    program.write_text(
        ".decl e(a: number, b: number)\n.input e\n.decl r(a: number)\nr(x) :- e(x, _).\n"
        ".printsize r\n"
    )
    run = ["run", str(program), "-F", str(tmp_path)]
    code = f"from datalog.cli.commands import main\nassert main({run!r}) == 0"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    modules_after(code, env)
    loaded = modules_after(code, env)
    store = {"datalog.storage.store", "datalog.storage.snapshots", "datalog.storage.layout"}
    assert (store | {"shutil", "difflib", "hashlib", "fcntl"}) & loaded == set()
    assert {"datalog.db.durable", "datalog.storage.records"} <= loaded
