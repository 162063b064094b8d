"""Several queries answered by one evaluation (`Database.query_many`, ADR 0061), and
`deltalog run` reading every printed relation of a program through it: a recursive
group printed twice is computed once, not once per `.output` or `.printsize`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest

from datalog import Database
from datalog.cli.commands import main
from differential.engine import Engine

# `a` and `b` are one mutually recursive group; `s` and `t` read it.
PROGRAM = """\
.decl e(x: number, y: number)
.input e
.decl a(x: number, y: number)
.decl b(x: number, y: number)
.decl s(n: symbol)
.decl t()
a(x, y) :- e(x, y).
a(x, z) :- b(x, y), e(y, z).
b(x, y) :- a(x, y), x != y.
s(n) :- a(x, _), n = to_string(x).
t() :- a(1, 1).
"""
EDGES = [(1, 2), (2, 3), (3, 1), (3, 4), (7, 7)]


@contextmanager
def started() -> Iterator[list[str]]:
    """The names of the dataflows started (built and run over the current state)."""
    names: list[str] = []
    original = Engine.start

    def start(engine: Engine, dataflow: object) -> None:
        names.append(getattr(dataflow, "name", "?"))
        original(engine, dataflow)  # type: ignore[arg-type]

    with mock.patch.object(Engine, "start", start):
        yield names


def test_run_evaluates_a_recursive_group_once_for_all_its_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = PROGRAM + ".output a\n.output b\n.printsize a\n.printsize b\n"
    (tmp_path / "p.dl").write_text(program)
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts/e.facts").write_text("".join(f"{x}\t{y}\n" for x, y in EDGES))
    with started() as names:
        code = main(
            ["run", "-F", str(tmp_path / "facts"), "-D", str(tmp_path), str(tmp_path / "p.dl")]
        )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert len(names) == 1, names  # one per output and printsize (4) before ADR 0061
    db = Database()
    db.define(PROGRAM)
    db.insert("e", EDGES)
    for rel in ("a", "b"):
        expected = sorted(db.query(f"{rel}(x, y)"))
        assert expected  # the test reads something
        text = "".join(f"{x}\t{y}\n" for x, y in expected)
        assert (tmp_path / f"{rel}.csv").read_text() == text
    assert out.splitlines() == [f"a\t{len(db.query('a(x, y)'))}", f"b\t{len(db.query('b(x, y)'))}"]


QUERIES = ["a(x, y)", "b(1, y)", "s(n)", "t()", "a(x, x)", "b(x, y), !a(y, x)", "e(x, _)"]


def test_query_many_answers_as_each_query_does_in_one_evaluation() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("e", EDGES)
    with started() as names:
        answers = db.query_many(QUERIES)
    assert len(names) == 1
    for text, answer in zip(QUERIES, answers, strict=True):
        expected = db.query(text)
        assert sorted(answer.rows()) == sorted(expected), text
        assert answer.size == len(expected), text
    assert answers[3].rows() == [()] and answers[3].columns == {}  # t(): a(1, 1) holds
    assert answers[2].rows() and all(isinstance(n, str) for (n,) in answers[2].rows())
    assert list(answers[1].columns) == ["y"]


def test_query_many_reads_live_queries_and_computes_the_rest_once() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("e", EDGES)
    seen: list[object] = []
    db.subscribe("a(x, y)", seen.append)
    assert db.query_many(["a(4, 4)"])[0].size == 0
    db.insert("e", [(4, 1)])
    with started() as names:
        answers = db.query_many(["a(x, y)", "b(x, y)", "a(4, 4)"])
    assert len(names) == 1  # the live `a` is read as it stands
    assert sorted(answers[0].rows()) == sorted(db.query("a(x, y)"))
    assert sorted(answers[1].rows()) == sorted(db.query("b(x, y)"))
    assert answers[2].rows() == [()]  # 4 -> 1 -> 2 -> 3 -> 4 now
    with started() as names:
        assert db.query_many(["a(x, y)"])[0].size == len(db.query("a(x, y)"))
    assert names == []
