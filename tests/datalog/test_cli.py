"""The `deltalog` command: `run` like `souffle -F -D`, the repl on piped stdin, the demo."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

import datalog
from datalog.cli.commands import main
from datalog.cli.repl import parse_rows
from datalog.lang.errors import DatalogError

PROGRAM = """\
.decl edge(x: number, y: number)
.input edge
.decl node(n: symbol, w: float)
.input node(filename="nodes.csv", delimiter=",")
.decl reach(x: number, y: number)
.output reach
.printsize reach
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
.decl heavy(n: symbol)
.output heavy(delimiter=",")
heavy(n) :- node(n, w), w > 1.0.
.decl degree(x: number, d: number)
.output degree
degree(x, d) :- edge(x, _), d = count : { edge(x, _) }.
"""


def _run(
    argv: list[str], capsys: pytest.CaptureFixture[str], stdin: str | None = None
) -> tuple[int, str, str]:
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        code = main(argv)
    finally:
        sys.stdin = saved
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "facts").mkdir()
    (tmp_path / "p.dl").write_text(PROGRAM)
    (tmp_path / "facts/edge.facts").write_text("1\t2\n2\t3\n3\t1\n10\t2\n")
    (tmp_path / "facts/nodes.csv").write_text("a,0.5\nb,1.5\nc c,2\n")
    return tmp_path


def test_run_writes_sorted_outputs_and_prints_sizes(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = project / "out"
    argv = ["run", str(project / "p.dl"), "-F", str(project / "facts"), "-D", str(out_dir)]
    code, out, err = _run(argv, capsys)
    assert (code, err) == (0, "")
    assert out == "reach\t12\n"
    reach = [f"{x}\t{y}" for x in (1, 2, 3, 10) for y in (1, 2, 3)]
    assert (out_dir / "reach.csv").read_text().splitlines() == reach
    assert (out_dir / "heavy.csv").read_text() == "b\nc c\n"
    assert (out_dir / "degree.csv").read_text() == "1\t1\n2\t1\n3\t1\n10\t1\n"


def test_run_with_output_dash_prints_to_stdout(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", str(project / "p.dl"), "-F", str(project / "facts"), "-D", "-"]
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert "---------------\nheavy\n===============\nb\nc c\n===============\n" in out
    assert out.endswith("reach\t12\n")
    assert not (project / "reach.csv").exists()


def test_run_defaults_to_the_current_directory(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project / "facts")
    code, _, err = _run(["run", "../p.dl"], capsys)
    assert (code, err) == (0, "")
    assert (project / "facts/reach.csv").read_text().startswith("1\t1\n")


def test_run_stops_at_a_missing_fact_file_unless_allowed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "facts/nodes.csv").unlink()
    argv = ["run", str(project / "p.dl"), "-F", str(project / "facts"), "-D", "-"]
    code, out, err = _run(argv, capsys)
    assert (code, out) == (1, "")
    assert "no fact file for `.input node`" in err and "nodes.csv" in err
    code, out, err = _run([*argv, "--allow-missing-inputs"], capsys)
    assert code == 0 and out.endswith("reach\t12\n")
    assert "heavy\n===============\n===============" in out  # `node` started empty


def test_a_bad_program_exits_1_with_every_error_and_a_caret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = ".decl edge(x: number, y: number)\nr(x) :- edg(x, y).\nq(y) :- edge(1, 2).\n"
    (tmp_path / "bad.dl").write_text(bad)
    code, out, err = _run(["run", str(tmp_path / "bad.dl"), "-D", str(tmp_path)], capsys)
    assert (code, out) == (1, "")
    assert "unknown relation `edg`; did you mean `edge`?" in err
    assert "line 3" in err  # the second, independent error is reported too
    lines = err.splitlines()
    source = lines.index("    r(x) :- edg(x, y).")
    assert lines[source + 1].strip().startswith("^")


def test_a_bad_fact_file_exits_1_naming_the_line(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "facts/edge.facts").write_text("1\t2\n2\tthree\n")
    argv = ["run", str(project / "p.dl"), "-F", str(project / "facts"), "-D", "-"]
    code, out, err = _run(argv, capsys)
    assert (code, out) == (1, "")
    assert "edge.facts, line 2, column 2" in err


def test_a_missing_program_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["run", str(tmp_path / "none.dl")], capsys)
    assert code == 1
    assert "cannot read" in err


REPL_INPUT = """\
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :-
    reach(x, y), edge(y, z).
:watch reach(1, y)
:insert edge (1, 2) (2, 3)
?- reach(x, y)
:query reach(x, y), x > 1
?- edg(1, y)
:retract edge (2, 3)
edge(3, 4).
:unwatch
:insert edge (2, 3)
?- reach(1, 3)
:explain reach(1, y)
:passes reach(1, y)
:stats
:help
:quit
?- reach(x, y)
"""


def test_repl_on_piped_stdin(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["repl"], capsys, stdin=REPL_INPUT)
    assert code == 0
    assert "deltalog>" not in out  # no prompts when not a TTY
    # watching takes no epoch (ADR 0041): the snapshot is of the current epoch, 3
    assert "[watch 1] reach(1, y) at epoch 3: 0 rows\n" in out
    assert "[watch 1] epoch 4:\n  + (2)\n  + (3)\n" in out
    assert "x = 1, y = 2\nx = 1, y = 3\nx = 2, y = 3\n(3 rows)\n" in out
    assert "x = 2, y = 3\n(1 row)\n" in out
    assert "[watch 1] epoch 5:\n  - (3)\n" in out  # the retraction, seen by the watch
    assert "stopped watch 1" in out
    assert "\ntrue\n" in out
    assert "shared arrangements" in out
    assert "-- after pass 1: magic sets --" in out and "-- after pass 7: lowering --" in out
    assert ":watch QUERY" in out
    assert out.count("rows)") == 1  # input after :quit is not read
    assert "unknown relation `edg`; did you mean `edge`?" in err
    assert err.count("error:") == 1


def test_repl_continues_after_errors(capsys: pytest.CaptureFixture[str]) -> None:
    text = ":frobnicate\n.decl e(x: number)\ne(1.\n:insert e (1) (\n:insert e (2)\n?- e(x)\n"
    code, out, err = _run(["repl"], capsys, stdin=text)
    assert code == 0
    assert "unknown command `:frobnicate`" in err
    assert "not closed" in err
    assert err.count("error:") == 3
    assert out.endswith("x = 2\n(1 row)\n")


def test_repl_asof_answers_queries_and_why_as_of_an_epoch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = (
        ".decl edge(x: number, y: number)\n.decl reach(x: number, y: number)\n"
        "reach(x, y) :- edge(x, y).  reach(x, z) :- reach(x, y), edge(y, z).\n"
        ":insert edge (1, 2) (2, 3)\n:retract edge (2, 3)\n"
        ":asof 3 reach(1, y)\n:asof 3 ?- reach(1, 3)\n:asof 3 :why reach(1, 3)\n"
        ":asof 4 reach(1, y)\n:asof 9 reach(1, y)\n:asof 0 reach(1, y)\n"
        ":asof x reach(1, y)\n:asof 3 :stats\n:asof 3\n"
    )
    code, out, err = _run(["repl"], capsys, stdin=text)
    assert code == 0
    assert "inserted 2 rows at epoch 3\nretracted 1 row at epoch 4\n" in out
    assert "y = 2\ny = 3\n(2 rows)\ntrue\nreach(1, 3)  <- reach(x, z)" in out
    assert "    edge(1, 2)  (base fact)\n  edge(2, 3)  (base fact)\ny = 2\n(1 row)\n" in out
    assert "epoch 9 has not happened yet: the current epoch is 4" in err
    assert "the oldest readable epoch is 1" in err
    assert err.count("usage: `:asof EPOCH QUERY`") == 2
    assert "`:asof` takes a query or `:why FACT`" in err


def test_repl_reports_what_a_change_actually_changed(capsys: pytest.CaptureFixture[str]) -> None:
    """Retracting an absent fact said "retracted 1 row": under set semantics it
    changes nothing, and inserting a present one neither."""
    text = (
        ".decl e(x: number)\n.decl m(x: number) multiset\n"
        ".decl l(k: number, v: symbol) last_write_wins\n"
        ":insert e (1) (2)\n:insert e (1) (3)\n:retract e (9)\n:retract e (1) (9)\n"
        ':insert m (1) (1)\n:insert l (1, "a")\n:insert l (1, "b")\n'
    )
    code, out, err = _run(["repl"], capsys, stdin=text)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "inserted 2 rows at epoch 2",
        "inserted 1 row (1 already present) at epoch 3",
        "retracted 0 rows (1 absent) at epoch 4",
        "retracted 1 row (1 absent) at epoch 5",
        "inserted 2 rows at epoch 6",  # a multiset counts every row
        "inserted 1 row at epoch 7",
        "inserted 1 row, replacing 1 row at epoch 8",  # last_write_wins
    ]


def test_repl_rows_with_an_underscored_number_say_so() -> None:
    with pytest.raises(DatalogError, match=r"`1_000` is not a number: a number cannot contain"):
        parse_rows("(1_000)")


def test_rows_parse_like_datalog_constants() -> None:
    assert parse_rows('(1, "a b") (-2, "q\\"uote") 3 4.5') == [
        (1, "a b"),
        (-2, 'q"uote'),
        (3,),
        (4.5,),
    ]


def test_demo_exits_0_and_shows_a_retraction(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["demo"], capsys)
    assert (code, err) == (0, "")
    retraction = out.index("retract follows")
    assert "   - (" in out[retraction:]
    assert "epoch" in out and "shared arrangements" in out


def test_console_entry_point_prints_the_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "datalog.cli", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"deltalog {datalog.__version__}"


def test_unreadable_programs_and_unwritable_outputs_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "p.dl"
    program.write_text(".decl e(x: number)\n.output e\ne(1).\n")
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the output directory should go
    code, _, err = _run(["run", str(program), "-D", str(blocked / "out")], capsys)
    assert code == 1 and err.startswith("error:") and "Traceback" not in err
    binary = tmp_path / "bad.dl"
    binary.write_bytes(b".decl e(x: number)\n\xff\xfe\n")
    code, _, err = _run(["run", str(binary), "-D", "-"], capsys)
    assert code == 1 and "is not UTF-8 text (at byte 19)" in err


def test_bad_arguments_to_the_api_are_datalog_errors() -> None:
    from datalog import Database
    from datalog.lang.errors import DatalogSyntaxError, UnsupportedError

    db = Database()
    db.define(".decl e(x: number)")
    with pytest.raises(DatalogSyntaxError, match="must be a string"):
        db.query(5)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedError, match="unknown plan 'fast'"):
        db.query("e(x)", plan="fast")  # type: ignore[arg-type]
    with pytest.raises(DatalogSyntaxError, match="nested too deeply"):
        db.query("e(x), x = " + "-" * 20_000 + "1")


FUNCTOR_PROGRAM = """\
.functor slug(s: symbol): symbol
.functor twice(x: number): number
.decl name(p: number, s: symbol)
.decl handle(p: number, h: symbol, t: number)
.output handle(IO=stdout)
handle(p, @slug(s), @twice(p)) :- name(p, s).
name(1, "Ada Lovelace").
name(2, "Alan Turing").
"""


@pytest.mark.parametrize(
    "source",
    [
        "import numpy as np\nfrom datalog import vectorized\n\n"
        "def slug(s):\n    return s.lower().replace(' ', '-')\n\n"
        "twice = vectorized(lambda x: np.asarray(x) * 2)\n",
        "def _slug(s):\n    return s.lower().replace(' ', '-')\n\n"
        "FUNCTORS = {'slug': _slug, 'twice': lambda x: 2 * x}\n",
    ],
    ids=["public-functions", "FUNCTORS-mapping"],
)
def test_run_binds_functors_from_a_python_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str
) -> None:
    (tmp_path / "p.dl").write_text(FUNCTOR_PROGRAM)
    (tmp_path / "fns.py").write_text(source)
    argv = ["run", str(tmp_path / "p.dl"), "--functors", str(tmp_path / "fns.py")]
    code, out, err = _run([*argv, "-D", str(tmp_path)], capsys)
    assert code == 0, err
    assert "1\tada-lovelace\t2" in out and "2\talan-turing\t4" in out


def test_run_reports_a_functor_file_that_fails_or_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.dl").write_text(FUNCTOR_PROGRAM)
    (tmp_path / "bad.py").write_text("raise RuntimeError('no luck')\n")
    for functors, message in [("bad.py", "no luck"), ("absent.py", "not a Python file")]:
        argv = ["run", str(tmp_path / "p.dl"), "--functors", str(tmp_path / functors)]
        code, _, err = _run(argv, capsys)
        assert code == 1 and message in err and "Traceback" not in err
    code, _, err = _run(["run", str(tmp_path / "p.dl")], capsys)  # none given
    assert code == 1 and "not bound to a Python function" in err


def test_repl_why_prints_the_proof_tree(capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        ".decl edge(x: number, y: number)\n.decl reach(x: number, y: number)\n"
        "reach(x, y) :- edge(x, y).\nreach(x, z) :- reach(x, y), edge(y, z).\n"
        ":insert edge (1, 2) (2, 3)\n:why reach(1, 3)\n:why reach(3, 1)\n:why\n:help\n"
    )
    code, out, err = _run(["repl"], capsys, stdin=text)
    assert code == 0
    assert (
        "reach(1, 3)  <- reach(x, z) :- reach(x, y), edge(y, z).  [line 1]\n"
        "  reach(1, 2)  <- reach(x, y) :- edge(x, y).  [line 1]\n"
        "    edge(1, 2)  (base fact)\n"
        "  edge(2, 3)  (base fact)\n"
    ) in out
    assert ":why FACT" in out
    assert "`reach(3, 1)` does not hold" in err and "a fact is missing" in err


def test_repl_redefine_replaces_rules_and_watches_see_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = (
        ".decl edge(x: number, y: number)\n.decl reach(x: number, y: number)\n"
        "reach(x, y) :- edge(x, y).\nreach(x, z) :- reach(x, y), edge(y, z).\n"
        ":insert edge (1, 2) (2, 3)\n:watch reach(1, y)\n"
        ":redefine reach reach(x, y) :- edge(x, y).\n"
        ":redefine reach reach(x, y) :- edge(y, x). edge(5, 6).\n"
        ":redefine\n:redefine reach\n?- reach(x, y)\n:help\n"
    )
    code, out, err = _run(["repl"], capsys, stdin=text)
    assert code == 0
    # (watching takes no epoch: ADR 0041)
    assert "[watch 1] epoch 5:\n  - (3)\nredefined `reach` at epoch 5\n" in out
    assert "is a fact" in err and "usage: :redefine REL RULES" in err
    assert err.count("error:") == 2
    # no rules at all: reach is empty (its facts would stay)
    assert "[watch 1] epoch 6:\n  - (2)\nredefined `reach` at epoch 6\n(0 rows)\n" in out
    assert ":redefine REL RULES" in out


EXPLAINED = """\
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
edge(1, 2). edge(2, 3).
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""


def test_explain_prints_the_plan_the_database_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.dl").write_text(EXPLAINED)
    db = datalog.Database()
    db.define(EXPLAINED)
    program = str(tmp_path / "p.dl")
    code, out, err = _run(["explain", program, "reach(1, y)"], capsys)
    assert (code, err, out) == (0, "", db.explain("reach(1, y)") + "\n")
    code, out, _ = _run(["explain", program, "reach(1, y)", "--passes"], capsys)
    assert code == 0 and out == db.explain("reach(1, y)", passes=True) + "\n"
    assert "-- after pass 6: order joins --" in out
    code, out, _ = _run(["explain", program, "reach(x, y)", "--format", "dot"], capsys)
    assert code == 0 and out.startswith('digraph "reach(x, y)" {')
    code, out, _ = _run(["explain", program, "reach(x, y)", "--plan", "binary"], capsys)
    assert code == 0 and out == db.explain("reach(x, y)", plan="binary") + "\n"
    assert "delta query" not in out


def test_explain_loads_the_fact_files_it_is_given(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["explain", str(project / "p.dl"), "reach(x, y)", "-F", str(project / "facts")]
    code, out, err = _run(argv, capsys)
    assert (code, err) == (0, "")
    assert "rule reach(x, z) :- reach(x, y), edge(y, z)." in out
    code, _, err = _run(["explain", str(project / "p.dl"), "reach(x, y)", "-F", "nowhere"], capsys)
    assert code == 1 and "no fact file for `.input edge`" in err


def test_explain_reports_a_bad_program_or_query_with_its_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.dl").write_text(EXPLAINED)
    (tmp_path / "bad.dl").write_text(".decl edge(x: number, y: number)\nr(x) :- edg(x, y).\n")
    code, out, err = _run(["explain", str(tmp_path / "bad.dl"), "edge(x, y)"], capsys)
    assert (code, out) == (1, "")
    assert f"in {tmp_path / 'bad.dl'}:" in err and "unknown relation `edg`" in err
    assert "line 2, column 9" in err and "    r(x) :- edg(x, y)." in err
    code, out, err = _run(["explain", str(tmp_path / "p.dl"), "reach(1, y"], capsys)
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0] == "in the query:" and "line 1, column 11" in err
    assert lines[-2:] == ["    reach(1, y", "              ^"]
    code, _, err = _run(["explain", str(tmp_path / "p.dl"), "rech(1, y)"], capsys)
    assert code == 1 and "did you mean `reach`?" in err
    code, _, err = _run(["explain", str(tmp_path / "none.dl"), "reach(1, y)"], capsys)
    assert code == 1 and "cannot read" in err
    argv = ["explain", str(tmp_path / "p.dl"), "reach(1, y)", "--passes", "--format", "dot"]
    code, out, err = _run(argv, capsys)
    assert (code, out) == (2, "") and "--passes prints text" in err


def test_repl_stats_say_how_the_last_big_commit_reached_a_live_query() -> None:
    """`:stats` shows what `stats()` records of adaptive commits (docs/adr/0053)."""
    from datalog import Database
    from datalog.cli.display import stats_summary

    db = Database()
    db.define(".decl e(x: number, y: number)\n.decl r(x: number, y: number)\nr(x, y) :- e(x, y).")
    db.insert("e", [(i, i + 1) for i in range(150)])
    db.subscribe("r(x, y)", lambda change: None)
    db.insert("e", [(i, i + 1) for i in range(150, 650)])
    lines = stats_summary(db.stats())
    assert (
        "  last big commit, epoch 4: recomputed from the new base (500 rows changed, "
        "base 150 rows): not measured yet: change >= 0.005x the base" in lines
    )
