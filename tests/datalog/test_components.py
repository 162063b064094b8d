"""Soufflé components (`.comp`, `.init`, `.override`): parsing, expansion, and every
way in: the Python API across definitions, live queries, `deltalog run` and the repl.

The golden catalogue (`golden/programs/components_*.dl`) checks whole programs
against the reference evaluator and Soufflé's own outputs; the error texts are in
`golden/semantic/component_*.dl` and `golden/syntax/`.
"""

from __future__ import annotations

import io
import random
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datalog.cli.commands import main
from datalog.db.database import Database
from datalog.eval import reference
from datalog.lang import ast
from datalog.lang.checks import check_program
from datalog.lang.errors import DatalogError, DatalogErrors, DatalogSyntaxError, UnknownNameError
from datalog.lang.parser import parse_program
from datalog.lang.passes.instantiate_components import instantiate_components
from datalog.lang.pretty import format_program
from tests.datalog.answers import Accumulated

GOLDEN = Path(__file__).parent / "golden" / "programs"

GRAPH = """\
.comp Graph<N> {
    .decl edge(x: N, y: N)
    .decl reach(x: N, y: N)
    reach(x, y) :- edge(x, y).
    reach(x, z) :- reach(x, y), edge(y, z).
}
"""


def expanded(text: str) -> ast.Program:
    return instantiate_components(parse_program(text))


def test_the_parser_builds_components_instances_and_overrides() -> None:
    program = parse_program(
        ".comp Sub<T, U> : Base<T>, Other {\n  .override r\n  .init inner = Leaf<U>\n}\n"
        ".init s = Sub<number, a.T>"
    )
    (sub,) = program.components
    assert (sub.name, sub.params) == ("Sub", ("T", "U"))
    assert sub.bases == (ast.ComponentType("Base", ("T",)), ast.ComponentType("Other"))
    assert sub.body.overrides == (ast.Override("r"),)
    assert sub.body.instances == (ast.Instance("inner", ast.ComponentType("Leaf", ("U",))),)
    assert program.instances == (ast.Instance("s", ast.ComponentType("Sub", ("number", "a.T"))),)
    assert sub.span.line == 1 and program.instances[0].span.line == 5


def test_an_instance_qualifies_what_it_declares_and_nothing_else() -> None:
    program = expanded(
        ".decl out(x: number)\n"
        ".comp C {\n  .type Id <: number\n  .decl r(x: Id)\n  .output r\n"
        "  r(1).\n  out(x) :- r(x), !r(x + 1).\n}\n.init c = C"
    )
    assert [t.name for t in program.types] == ["c.Id"]
    assert [(d.name, d.columns[0].type) for d in program.decls] == [
        ("out", "number"),
        ("c.r", "c.Id"),
    ]
    assert [d.relation for d in program.directives] == ["c.r"]
    fact, rule = program.rules
    assert fact.head.name == "c.r" and rule.head.name == "out"
    assert [type(lit).__name__ for lit in rule.body] == ["Atom", "Negation"]
    assert rule.body[0].name == "c.r" and rule.body[1].atom.name == "c.r"  # type: ignore[union-attr]
    assert program.instances == ()


def test_nested_instances_give_qualified_chains() -> None:
    program = expanded(
        ".comp Leaf { .decl r(x: number) }\n"
        ".comp Mid { .init leaf = Leaf\n  .decl s(x: number)\n  s(x) :- leaf.r(x). }\n"
        ".init top = Mid"
    )
    assert sorted(d.name for d in program.decls) == ["top.leaf.r", "top.s"]
    (rule,) = program.rules
    assert (rule.head.name, rule.body[0].name) == ("top.s", "top.leaf.r")  # type: ignore[union-attr]


def test_type_parameters_are_replaced_in_columns_types_and_component_names() -> None:
    program = expanded(
        ".comp Impl { .decl r(x: number) }\n"
        ".comp Holder<T, C> {\n  .type Big <: T\n  .decl v(x: T, y: Big)\n  .init c = C\n}\n"
        ".init h = Holder<float, Impl>"
    )
    assert [(t.name, t.bases) for t in program.types] == [("h.Big", ("float",))]
    columns = {d.name: [c.type for c in d.columns] for d in program.decls}
    assert columns == {"h.c.r": ["number"], "h.v": ["float", "h.Big"]}


def test_an_override_drops_only_the_inherited_rules_of_its_relation() -> None:
    program = expanded(
        ".comp Base {\n  .decl r(x: number) overridable\n  .decl s(x: number)\n"
        "  r(1). s(1).\n}\n.comp Sub : Base {\n  .override r\n  r(2).\n}\n.init sub = Sub"
    )
    facts = sorted((rule.head.name, rule.head.args[0].value) for rule in program.rules)  # type: ignore[union-attr]
    assert facts == [("sub.r", 2), ("sub.s", 1)]


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("components_*.dl")), ids=lambda p: p.stem)
def test_components_survive_the_pretty_printer(path: Path) -> None:
    program = parse_program(path.read_text())
    text = format_program(program)
    assert parse_program(text) == program
    assert check_program(parse_program(text)).rules == check_program(program).rules


@given(st.data())
def test_a_component_program_missing_a_character_fails_clearly(data: st.DataObject) -> None:
    text = (GOLDEN / "components_type_parameters.dl").read_text()
    cut = data.draw(st.integers(0, len(text) - 1))
    try:
        check_program(parse_program(text[:cut] + text[cut + 1 :]))
    except DatalogSyntaxError as error:
        assert error.line >= 1 and "__ANON" not in error.message
        assert not re.search(r"\b_[A-Z]+\b", error.message), error.message  # no terminal names
    except DatalogErrors as errors:
        assert all(error.line >= 1 for error in errors.errors)
    except DatalogError as error:
        assert error.line >= 1


def test_a_component_of_one_definition_is_instantiated_by_a_later_one() -> None:
    db = Database()
    db.define(GRAPH)
    db.define('.init roads = Graph<symbol>\nroads.edge("a", "b"). roads.edge("b", "c").')
    db.define(".init rails = Graph<number>\nrails.edge(1, 2).")
    assert db.query('roads.reach("a", y)') == [("b",), ("c",)]
    assert db.query("rails.reach(x, y)") == [(1, 2)]
    with db.transaction() as tx:
        tx.insert("rails.edge", [(2, 3)])
    assert sorted(db.query("rails.reach(1, y)")) == [(2,), (3,)]
    assert str(db.why("rails.reach(1, 3)")).splitlines()[0].endswith("[line 5]")


def test_an_error_in_an_earlier_component_quotes_that_text() -> None:
    db = Database()
    db.define(".decl seen(x: number)\n" + GRAPH.replace("edge(y, z)", "edge(y, z), seen(z)"))
    db.define(".init numbers = Graph<number>\nnumbers.edge(1, 2).")
    with pytest.raises(DatalogError) as caught:
        db.define("// symbols do not fit `seen`\n.init words = Graph<symbol>")
    text = caught.value.format()
    assert "variable `z` is used as symbol and as number (column 1 of `seen`)" in text
    assert "at line 6, column 50" in text
    assert "reach(x, z) :- reach(x, y), edge(y, z), seen(z)." in text


def test_a_rejected_definition_changes_nothing() -> None:
    db = Database()
    db.define(GRAPH + ".init g = Graph<number>\ng.edge(1, 2).")
    before = (db.program, db.checked.schema.relations.keys(), db.epoch)
    for bad in (
        ".init h = Graph<number>\n.init h = Graph<symbol>",  # one name twice
        ".init g = Graph<number>",  # a name an earlier definition took
        ".init h = Grahp<number>\nh.edge(5, 6).",
        ".comp Bad : Bad { }",
        ".init h = Graph<number>\nh.edge(1, 2).\nr(x) :- h.edge(x, _).",  # r is undeclared
    ):
        with pytest.raises(DatalogError):
            db.define(bad)
        assert (db.program, db.checked.schema.relations.keys(), db.epoch) == before
    db.define(".init h = Graph<number>\nh.edge(5, 6).")  # `h` was never taken
    assert db.query("h.reach(x, y)") == [(5, 6)]
    assert db.query("g.reach(x, y)") == [(1, 2)]


def test_a_later_instance_that_adds_rules_to_an_outer_relation_updates_live_queries() -> None:
    db = Database()
    db.define(".decl r(x: number)\nr(0).\n.comp Step { r(x + 1) :- r(x), x < 3. }")
    seen = Accumulated()
    db.subscribe("r(x)", seen)
    epoch = db.epoch
    db.define(".init step = Step")
    assert seen.rows() == {(0,), (1,), (2,), (3,)}
    assert db.epoch == epoch + 1  # the new rules are an epoch of their own
    db.define(".comp Five { r(5). }\n.init five = Five")
    assert seen.rows() == {(0,), (1,), (2,), (3,), (5,)}


def test_instances_survive_a_restart_of_a_durable_database(tmp_path: Path) -> None:
    db = Database(tmp_path)
    db.define(".comp C { .decl r(x: number) r(1). r(2). }")
    db.define(".init a = C")
    with db.transaction() as tx:
        tx.retract("a.r", [(1,)])
    db.define(".decl other(x: number)")  # re-expands `a`: its retracted fact stays out
    db.checkpoint()
    db.define(".init b = C")
    db.close()
    again = Database(tmp_path)
    assert (again.query("a.r(x)"), again.query("b.r(x)")) == ([(2,)], [(1,), (2,)])


def test_an_unknown_relation_of_an_instance_is_a_clear_query_error() -> None:
    db = Database()
    db.define(GRAPH + ".init g = Graph<number>")
    message = "unknown relation `g.reahc`; did you mean `g.reach`?"
    with pytest.raises(UnknownNameError, match=re.escape(message)):
        db.query("g.reahc(1, y)")


@pytest.mark.parametrize("seed", range(6))
def test_instances_answer_like_the_flat_program_and_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    edges = {(rng.randrange(8), rng.randrange(8)) for _ in range(rng.randrange(1, 16))}
    gone = set(rng.sample(sorted(edges), len(edges) // 3))
    flat = Database()
    flat.define(GRAPH.replace(".comp Graph<N> {", "").replace("}", "").replace("N", "number"))
    components = Database()
    components.define(GRAPH + ".init a = Graph<number>\n.init b = Graph<number>")
    for db, relations in ((flat, ["edge"]), (components, ["a.edge", "b.edge"])):
        for relation in relations:
            with db.transaction() as tx:
                tx.insert(relation, sorted(edges))
            with db.transaction() as tx:
                tx.retract(relation, sorted(gone))
    expected = sorted(flat.query("reach(x, y)"))
    assert sorted(components.query("a.reach(x, y)")) == expected, f"seed {seed}"
    assert sorted(components.query("b.reach(0, y)")) == [r[1:] for r in expected if r[0] == 0]
    checked = check_program(parse_program(GRAPH + ".init a = Graph<number>"))
    answer = reference.evaluate(checked, {"a.edge": edges - gone})
    assert sorted(answer["a.reach"]) == expected


PROGRAM = """\
.comp Graph<N> {
    .decl edge(x: N, y: N)
    .input edge
    .decl reach(x: N, y: N)
    .output reach
    reach(x, y) :- edge(x, y).
    reach(x, z) :- reach(x, y), edge(y, z).
}
.init roads = Graph<symbol>
.init rails = Graph<number>
.printsize rails.reach
"""


def test_run_reads_and_writes_the_fact_files_of_instances(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.dl").write_text(PROGRAM)
    (tmp_path / "roads.edge.facts").write_text("a\tb\nb\tc\n")
    (tmp_path / "rails.edge.facts").write_text("1\t2\n")
    code = main(["run", str(tmp_path / "p.dl"), "-F", str(tmp_path), "-D", str(tmp_path)])
    out, err = capsys.readouterr()
    assert (code, out, err) == (0, "rails.reach\t1\n", "")
    assert (tmp_path / "roads.reach.csv").read_text() == "a\tb\na\tc\nb\tc\n"
    assert (tmp_path / "rails.reach.csv").read_text() == "1\t2\n"


def test_the_repl_collects_a_component_until_its_braces_close(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [
        ".comp Graph {",
        "  .decl edge(x: number, y: number)  // a brace in a comment: {",
        '  .decl name(x: number, s: symbol)  name(1, "}").',
        "  .decl reach(x: number, y: number)",
        "  reach(x, y) :- edge(x, y).",
        "}",
        ".init g = Graph",
        ":insert g.edge (1, 2) (2, 3)",
        "?- g.reach(1, y), g.name(1, s)",
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(line + "\n" for line in lines)))
    assert main(["repl"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert 'y = 2, s = "}"\n(1 row)' in out
