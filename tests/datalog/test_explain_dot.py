"""`explain(text, format="dot")`: the built dataflow as a valid Graphviz digraph."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from datalog.db.database import Database
from datalog.lang.errors import UnsupportedError

PROGRAM = """
.decl edge(src: number, dst: number)
.decl reach(src: number, dst: number)
.decl name(p: number, n: symbol)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""

_STRING = r'"(?:[^"\\]|\\.)*"'
_ID = rf"(?:[A-Za-z_][A-Za-z0-9_]*|{_STRING})"
_ATTRS = rf"\[(?:\s*[A-Za-z]+={_ID}|\s*[A-Za-z]+=[0-9.]+|,)*\s*\]"
_STATEMENTS = {
    "node": re.compile(rf"^(?!(?:graph|node|edge)\b)({_ID})\s*{_ATTRS};$"),
    "edge": re.compile(rf"^({_ID})\s*->\s*({_ID})(?:\s*{_ATTRS})?;$"),
    "attributes": re.compile(rf"^(?:graph|node|edge)\s*{_ATTRS};$"),
    "assignments": re.compile(rf"^(?:[a-z]+={_ID};\s*)+$"),
    "open": re.compile(r"^subgraph (cluster_[0-9]+) \{$"),
    "close": re.compile(r"^\}$"),
}


def _parse(dot: str) -> dict[str, list[tuple[str, ...]]]:
    """The statements of the (line-per-statement) DOT text that `datalog.plan.dot` writes,
    by kind; fails on any line that is not one, or on unbalanced braces."""
    lines = dot.strip().splitlines()
    header = re.match(rf"^digraph ({_STRING}) \{{$", lines[0])
    assert header is not None, lines[0]
    assert lines[-1] == "}"
    found: dict[str, list[tuple[str, ...]]] = {kind: [] for kind in _STATEMENTS}
    depth = 0
    for line in lines[1:-1]:
        kinds = [(k, m) for k, pattern in _STATEMENTS.items() if (m := pattern.match(line.strip()))]
        assert len(kinds) == 1, f"not one DOT statement: {line!r}"
        kind, match = kinds[0]
        depth += {"open": 1, "close": -1}.get(kind, 0)
        assert depth >= 0, "a brace closes nothing"
        found[kind].append(match.groups())
    assert depth == 0, "a subgraph is left open"
    return found


@pytest.fixture
def db() -> Database:
    database = Database()
    database.define(PROGRAM)
    database.insert("edge", [(1, 2), (2, 3)])
    return database


def test_a_recursive_query_is_a_cluster_with_feedback_and_its_edges_join_declared_nodes(
    db: Database,
) -> None:
    graph = _parse(db.explain("reach(x, y)", format="dot"))
    nodes = {name for (name,) in graph["node"]}
    assert graph["edge"] and all({a, b} <= nodes for a, b in graph["edge"])
    assert len(graph["open"]) == 1  # the one iteration scope
    dot = db.explain("reach(x, y)", format="dot")
    assert 'label="feedback"' in dot and "-> answer0;" in dot
    assert 'label="answer (x, y)"' in dot


@pytest.mark.parametrize(
    "query", ["reach(1, y), edge(y, z), !edge(z, 1)", "edge(x, y), edge(y, z), edge(z, x)"]
)
def test_every_stateful_operator_is_a_node_and_shared_arrangements_are_marked(
    db: Database, query: str
) -> None:
    text, dot = db.explain(query), db.explain(query, format="dot")
    graph = _parse(dot)
    operators = text.split("dataflow (the operators built, stateful ones):\n")[1].splitlines()
    scopes = [line for line in operators if line.strip().startswith("iterate")]
    assert len(graph["node"]) == len(operators) - len(scopes) + 1  # + the answer
    assert len(graph["open"]) == len(scopes)
    shared = re.search(r"^shared arrangements: (.*)$", text, re.M)
    assert shared is not None
    for arrangement in re.findall(r"\w+ by \[[0-9, ]*\]", shared.group(1)):  # `edge by [0]`
        assert f'label="{arrangement}\\nshared arrangement' in dot
    assert "shape=cylinder" in dot
    assert ("delta query (worst-case optimal)" in dot) == ("delta_query(" in text)


def test_a_shared_arrangement_says_how_many_other_queries_read_it(db: Database) -> None:
    assert "other quer" not in db.explain("reach(x, y)", format="dot")
    with db.subscribe("edge(x, y), edge(y, z)", lambda change: None):
        assert "read by 1 other query" in db.explain("reach(x, y)", format="dot")


def test_names_and_strings_in_labels_are_escaped(db: Database) -> None:
    dot = db.explain('name(p, "say \\"hi\\"")', format="dot")
    _parse(dot)
    assert dot.startswith('digraph "name(p, \\"say \\\\\\"hi\\\\\\"\\")" {')


def test_an_unknown_format_is_refused_and_changes_nothing(db: Database) -> None:
    before = db.explain("reach(x, y)")
    with pytest.raises(UnsupportedError, match="unknown explain format 'svg'"):
        db.explain("reach(x, y)", format="svg")
    assert db.explain("reach(x, y)") == before and db.live == {}
    assert db.query("reach(1, y)") == [(2,), (3,)]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_graphviz_renders_it(db: Database) -> None:
    for query in ("reach(1, y)", "reach(x, y), !edge(x, y)", 'name(p, "a\\"b")'):
        rendered = subprocess.run(
            ["dot", "-Tsvg"],
            input=db.explain(query, format="dot"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert rendered.returncode == 0, rendered.stderr
        assert "<svg" in rendered.stdout and "Warning" not in rendered.stderr
