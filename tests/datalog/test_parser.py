"""The parser builds the expected AST for each construct, and reports every
syntax problem as a DatalogSyntaxError with a plain-words message."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import lark
import pytest
from hypothesis import given
from hypothesis import strategies as st

from datalog.lang import ast, grammar, standalone
from datalog.lang.errors import DatalogSyntaxError
from datalog.lang.parser import parse_program, parse_query
from datalog.lang.pretty import format_program
from datalog.lang.syntax_errors import BODY_ERRORS, STATEMENT_ERRORS

x, y, z = ast.Var("x"), ast.Var("y"), ast.Var("z")


def num(value: int) -> ast.Const:
    return ast.Const(value, "number")


def only_rule(text: str) -> ast.Rule:
    (rule,) = parse_program(text).rules
    return rule


def only_term(text: str) -> ast.Term:
    (comparison,) = parse_query(f"v = {text}").body
    assert isinstance(comparison, ast.Comparison)
    return comparison.right


def syntax_error(text: str, *, query: bool = False) -> DatalogSyntaxError:
    with pytest.raises(DatalogSyntaxError) as caught:
        (parse_query if query else parse_program)(text)
    return caught.value


# --- declarations and directives -------------------------------------------------------


def test_decl_reads_columns_and_semantics_and_ignores_other_qualifiers() -> None:
    program = parse_program(".decl person.knows(p: number, q: Person.id) btree last_write_wins")
    (decl,) = program.decls
    assert decl.name == "person.knows"
    assert [(c.name, c.type) for c in decl.columns] == [("p", "number"), ("q", "Person.id")]
    assert decl.semantics == "last_write_wins"


def test_decl_defaults_to_set_and_allows_no_columns_and_several_names() -> None:
    program = parse_program(".decl flag()\n.decl a, b(x: symbol) brie inline")
    assert [(d.name, d.arity, d.semantics) for d in program.decls] == [
        ("flag", 0, "set"),
        ("a", 1, "set"),
        ("b", 1, "set"),
    ]


def test_type_declarations_in_all_three_forms() -> None:
    program = parse_program(".type Id <: number\n.type Name = symbol\n.type U = Id | a.B")
    assert program.types == (
        ast.TypeDecl("Id", ("number",)),
        ast.TypeDecl("Name", ("symbol",)),
        ast.TypeDecl("U", ("Id", "a.B")),
    )


def test_directive_options_are_strings_and_a_list_gives_one_directive_each() -> None:
    program = parse_program(
        '.input edge(filename="e.facts", delimiter="\\t", header=true, skip=-1)\n'
        ".output a, b.c\n.printsize a"
    )
    edge, a, bc, size = program.directives
    assert edge.kind == "input" and edge.relation == "edge"
    assert edge.options == (
        ("filename", "e.facts"),
        ("delimiter", "\t"),
        ("header", "true"),
        ("skip", "-1"),
    )
    assert (a.kind, a.relation, bc.relation) == ("output", "a", "b.c")
    assert (size.kind, size.relation) == ("printsize", "a")


# --- clauses and bodies ---------------------------------------------------------------


def test_fact_is_a_rule_without_body() -> None:
    rule = only_rule("edge(1, 2).")
    assert rule == ast.Rule(ast.Atom("edge", (num(1), num(2))), ())
    assert rule.is_fact


def test_comments_are_ignored() -> None:
    text = "// line\nedge(1, /* inline */ 2). /* block\nover lines */ // end"
    assert parse_program(text).rules == (ast.Rule(ast.Atom("edge", (num(1), num(2))), ()),)


def test_rule_body_with_negation_and_comparison() -> None:
    rule = only_rule("r(x, z) :- r(x, y), !blocked(y), edge(y, z), x != z.")
    assert rule.body == (
        ast.Atom("r", (x, y)),
        ast.Negation(ast.Atom("blocked", (y,))),
        ast.Atom("edge", (y, z)),
        ast.Comparison("!=", x, z),
    )


def test_multiple_heads_expand_to_one_rule_each_with_the_same_body() -> None:
    a, b = parse_program("a(x), b(x) :- c(x).").rules
    assert (a.head.name, b.head.name) == ("a", "b")
    assert a.body == b.body == (ast.Atom("c", (x,)),)


def test_semicolon_binds_looser_than_comma() -> None:
    rule = only_rule("r(x) :- a(x), b(x) ; c(x).")
    assert rule.body == (
        ast.Disjunction(((ast.Atom("a", (x,)), ast.Atom("b", (x,))), (ast.Atom("c", (x,)),))),
    )


def test_parenthesized_disjunction_inside_a_conjunction() -> None:
    rule = only_rule("r(x) :- a(x), (b(x) ; c(x)).")
    assert rule.body == (
        ast.Atom("a", (x,)),
        ast.Disjunction(((ast.Atom("b", (x,)),), (ast.Atom("c", (x,)),))),
    )


def test_parenthesized_arithmetic_may_start_a_comparison() -> None:
    (literal,) = parse_query("(x + 1) * 2 = y").body
    assert literal == ast.Comparison("=", ast.BinOp("*", ast.BinOp("+", x, num(1)), num(2)), y)


def test_builtin_predicates_become_comparisons() -> None:
    query = parse_query('contains("ab", s), match("a.*", s).')
    s = ast.Var("s")
    assert query.body == (
        ast.Comparison("contains", ast.Const("ab", "symbol"), s),
        ast.Comparison("match", ast.Const("a.*", "symbol"), s),
    )


def test_query_needs_no_trailing_period_and_keeps_its_source() -> None:
    text = 'person.name(p, "Alice"), knows(p, q), q != p'
    query = parse_query(text)
    assert query.source == text
    assert [type(lit).__name__ for lit in query.body] == ["Atom", "Atom", "Comparison"]
    assert parse_query(text + ".") == query


# --- terms --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", num(42)),
        ("0x1F", num(31)),
        ("0b101", num(5)),
        ("007", num(7)),
        ("5u", ast.Const(5, "unsigned")),
        ("1.5", ast.Const(1.5, "float")),
        ("2e3", ast.Const(2000.0, "float")),
        ("-3", num(-3)),
        ("-2.5", ast.Const(-2.5, "float")),
        ("-(3)", ast.Neg(num(3))),
        ("-x", ast.Neg(x)),
        ("-5u", ast.Neg(ast.Const(5, "unsigned"))),
        ('"a\\"b\\\\c\\n\\t"', ast.Const('a"b\\c\n\t', "symbol")),
        ("_", ast.Wildcard()),
        ("_tmp", ast.Var("_tmp")),
    ],
)
def test_literal_terms(text: str, expected: ast.Term) -> None:
    assert only_term(text) == expected


def test_arithmetic_precedence_and_associativity() -> None:
    # 1 + 2 * 3 ^ 2 ^ 1 - 4 band 7  ==  ((1 + (2 * (3 ^ (2 ^ 1)))) - 4) band 7
    power = ast.BinOp("^", num(3), ast.BinOp("^", num(2), num(1)))
    sum_ = ast.BinOp("-", ast.BinOp("+", num(1), ast.BinOp("*", num(2), power)), num(4))
    assert only_term("1 + 2 * 3 ^ 2 ^ 1 - 4 band 7") == ast.BinOp("band", sum_, num(7))


def test_unary_minus_binds_looser_than_power() -> None:
    assert only_term("-2 ^ 2") == ast.Neg(ast.BinOp("^", num(2), num(2)))
    assert only_term("-2 * 3") == ast.BinOp("*", num(-2), num(3))


def test_functor_calls_including_binary_min_and_max() -> None:
    assert only_term('cat(s, "x", to_string(n))') == ast.Call(
        "cat", (ast.Var("s"), ast.Const("x", "symbol"), ast.Call("to_string", (ast.Var("n"),)))
    )
    assert only_term("min(x, y)") == ast.Call("min", (x, y))
    assert only_term("max(x, y, 1)") == ast.Call("max", (x, y, num(1)))
    assert only_term("autoinc()") == ast.Call("autoinc", ())


_p, _q, _edge = ast.Atom("p", (x,)), ast.Atom("q", (x,)), ast.Atom("edge", (x, ast.Wildcard()))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("count : { edge(x, _) }", ast.Aggregate("count", None, (_edge,))),
        ("count : edge(x, _)", ast.Aggregate("count", None, (_edge,))),
        ("sum x : { p(x), x > 0 }", ast.Aggregate("sum", x, (_p, ast.Comparison(">", x, num(0))))),
        ("min x + 1 : p(x)", ast.Aggregate("min", ast.BinOp("+", x, num(1)), (_p,))),
        ("max (x) : p(x)", ast.Aggregate("max", x, (_p,))),
        ("mean x : { p(x) ; q(x) }", ast.Aggregate("mean", x, (ast.Disjunction(((_p,), (_q,))),))),
    ],
)
def test_aggregates(text: str, expected: ast.Aggregate) -> None:
    assert only_term(text) == expected


def test_aggregate_in_a_rule() -> None:
    rule = only_rule("deg(x, n) :- node(x), n = count : { edge(x, _) }.")
    count = ast.Aggregate("count", None, (ast.Atom("edge", (x, ast.Wildcard())),))
    assert rule.body[1] == ast.Comparison("=", ast.Var("n"), count)


# --- spans and sources ---------------------------------------------------------------------


def test_spans_are_one_based_with_offsets() -> None:
    text = "edge(1, 2).\nr(x) :- edge(x, y)."
    program = parse_program(text)
    rule = program.rules[1]
    assert rule.span == ast.Span(2, 1, 2, 20, 12, 31)
    atom = rule.body[0]
    assert (atom.span.line, atom.span.column, atom.span.end_column) == (2, 9, 19)
    assert text[atom.span.start : atom.span.end] == "edge(x, y)"
    assert program.source == text


def test_spans_of_every_node_cover_their_text() -> None:
    text = "r(n) :- n = sum x * 2 : { p(x) }, !q(n)."
    rule = only_rule(text)
    comparison, negation = rule.body
    assert isinstance(comparison, ast.Comparison) and isinstance(negation, ast.Negation)
    aggregate = comparison.right
    assert isinstance(aggregate, ast.Aggregate) and aggregate.target is not None
    pieces = [aggregate, aggregate.target, aggregate.body[0], negation, negation.atom]
    texts = [text[n.span.start : n.span.end] for n in pieces]
    assert texts == ["sum x * 2 : { p(x) }", "x * 2", "p(x)", "!q(n)", "q(n)"]


# --- errors ----------------------------------------------------------------------------------


def test_errors_carry_position_source_and_caret() -> None:
    error = syntax_error("edge(1, 2).\nreach(x) :- edge(x, y)\nreach(1).")
    assert error.message == "missing `.` at the end of a rule"
    assert (error.line, error.column) == (2, 23)
    assert str(error).endswith("    reach(x) :- edge(x, y)\n                          ^")


def test_unknown_directive_suggests_the_close_one() -> None:
    error = syntax_error("edge(1, 2).\n.inptu edge")
    assert error.message == "unknown directive `.inptu`; did you mean `.input`?"
    assert (error.line, error.column, error.span.end_column) == (2, 1, 7)


def test_unexpected_tokens_are_named_in_plain_words() -> None:
    error = syntax_error("r(x) :- p(x, y {).")
    assert error.message.startswith("unexpected `{`; expected ")
    assert "_RPAR" not in error.message and "`)`" in error.message


_REGEX_OR_TERMINAL = re.compile(r"\(\?|\\[wdsS]|\[\^|\b_?[A-Z]{2,}(?:_[A-Z]+)*\b|\$END")
_PROGRAMS = (
    ".decl e(x: number, y: number) btree\n.functor f(a: number): number stateful\n"
    '.type T <: number\n.input e(filename="e.facts", delimiter=",")\n'
    "r(x, n) :- e(x, _), n = count : { e(x, y), !e(y, x) }, x = as(n, number).\n"
    's(x) :- e(x, y), (x < y ; contains("a", "b")), z = sum y : e(x, y), z band 1 = 0.\n'
    ".comp C<T> : B<T> { .decl a(x: T) overridable }\n.init c = C<number>\n",
)


@pytest.mark.parametrize("text", _PROGRAMS)
def test_expected_tokens_read_as_the_language_at_every_cut_of_a_program(text: str) -> None:
    """Cut anywhere (and with a stray `?` there), the program's error says what was
    expected in keywords and punctuation: never a regex or a terminal's name."""
    for cut in range(len(text)):
        for broken in (text[:cut], text[:cut] + " ?"):
            try:
                parse_program(broken)
            except DatalogSyntaxError as error:
                found = _REGEX_OR_TERMINAL.search(error.message)
                assert found is None, (broken, error.message)


def test_a_term_after_an_open_parenthesis_is_expected_as_a_term_not_a_regex() -> None:
    """Reported as ``expected a term or `as(?![\\w.])` ``."""
    error = syntax_error("q(x) :- x = (")
    assert error.message == "unexpected end of input; expected a term"


@pytest.mark.parametrize(
    ("text", "written", "digits"),
    [
        ("q(1_000).", "1_000", "1000"),
        ("q(x) :- x = 1_000_000.", "1_000_000", "1000000"),
        ("q(1_000.5).", "1_000.5", "1000.5"),
        ("q(0x1_F).", "0x1_F", "0x1F"),
        ("q(1_000u).", "1_000u", "1000u"),
    ],
)
def test_an_underscore_in_a_number_is_refused_naming_the_number(
    text: str, written: str, digits: str
) -> None:
    """Soufflé's lexer reads `1_000` as `1` then the name `_000`, a syntax error;
    the message says so instead of asking for a comma."""
    error = syntax_error(".decl q(x: number)\n" + text)
    assert error.message == f"`{written}`: a number cannot contain `_`; write `{digits}`"
    assert (error.line, error.column) == (2, text.index(written) + 1)
    assert error.span.end_column - error.span.column == len(written)


def test_query_errors_use_the_same_catalogue() -> None:
    error = syntax_error("p(x), !x = 1", query=True)
    assert error.message == "`!` must be followed by an atom, like `!edge(x, y)`"
    assert syntax_error("", query=True).message.startswith("unexpected end of input")


def _catalogue_cases() -> list[tuple[str, str]]:
    cases = [(message, snippet) for message, snippets in STATEMENT_ERRORS for snippet in snippets]
    for message, snippets in BODY_ERRORS:
        cases += [(message, f"r(x) :- {snippet}") for snippet in snippets]
    return cases


@pytest.mark.parametrize(("message", "snippet"), _catalogue_cases())
def test_each_catalogue_snippet_gets_its_own_message(message: str, snippet: str) -> None:
    assert syntax_error(snippet).message == message
    assert syntax_error("p(1).\n" + snippet).message == message


@given(st.text(alphabet='ab(),.:-!;=<>_"{}+*/ 1\n', max_size=30))
def test_any_text_parses_or_raises_a_syntax_error(text: str) -> None:
    for parse in (parse_program, parse_query):
        try:
            parse(text)
        except DatalogSyntaxError as error:
            assert error.line >= 1 and error.column >= 1
            assert not isinstance(error.__cause__, lark.exceptions.LarkError)


@given(st.data())
def test_deleting_a_character_of_a_program_never_leaks_a_lark_error(data: st.DataObject) -> None:
    text = format_program(parse_program(_SAMPLE))
    cut = data.draw(st.integers(0, len(text) - 1))
    try:
        parse_program(text[:cut] + text[cut + 1 :])
    except DatalogSyntaxError as error:
        assert error.message and "__ANON" not in error.message and "_LPAR" not in error.message


_SAMPLE = """
.type Id <: number
.decl edge(src: Id, dst: Id) multiset
.input edge(filename="edge.facts")
reach(x, y) :- edge(x, y) ; reach(x, z), edge(z, y), !stop(z).
deg(x, n) :- edge(x, _), n = count : { edge(x, _) }, n + 1 > -2.
"""


def test_ipv4_literals_are_numbers_as_in_souffle() -> None:
    """Soufflé's scanner makes a signed 32-bit integer of the address (its test
    `semantic/ipv4_1` expects `255.255.255.255` to be -1)."""
    text = "a(10.10.10.10).\na(255.255.255.255).\na(192.168.0.1).\na(127.0.0.1).\na(1.5e3)."
    program = parse_program(".decl a(x: number)\n" + text)
    values = [rule.head.args[0] for rule in program.rules]
    assert [(v.value, v.type) for v in values] == [  # type: ignore[union-attr]
        (168430090, "number"),
        (-1, "number"),
        (-1062731775, "number"),
        (2130706433, "number"),
        (1500.0, "float"),
    ]


def test_pragmas_are_accepted_with_or_without_a_value_and_explained() -> None:
    from datalog import Database

    program = parse_program('.pragma "magic-transform" "*"\n.pragma "legacy"\n.decl e(x: number)')
    assert [(p.key, p.value) for p in program.pragmas] == [("magic-transform", "*"), ("legacy", "")]
    db = Database()
    db.define('.pragma "magic-transform" "*"\n.decl e(x: number)\ne(1).')
    assert "pragma 'magic-transform' = '*': an engine hint" in db.explain("e(x)")
    assert db.query("e(x)") == [(1,)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (".type Pair = [a: number, b: number]", "records (`[a, b]`) are not supported"),
        (".decl r(p: number)\nr([1, 2]).", "records (`[a, b]`) are not supported"),
        (".type T = Leaf {x: number} | Node {}", "algebraic data types"),
        ("r($Leaf(1)).", "algebraic data types"),
        (".decl r(x: number) choice-domain x", "`choice-domain` is not supported"),
        (".plan 0: (1, 2)", "the Soufflé directive `.plan` is not supported"),
        ('.include "graph.dl"', "the Soufflé directive `.include` is not supported"),
        (".limitsize r(n=10)", "the Soufflé directive `.limitsize` is not supported"),
        # inside a component's body too
        (".comp C { .type P = [a: number] }", "records (`[a, b]`) are not supported"),
        (".comp C { .type T = A {x: number} }", "algebraic data types"),
        (".comp C { .decl r(x: number) choice-domain x }", "`choice-domain` is not supported"),
        (".comp C { r(x) :- s(x). .plan 0: (1) }", "the Soufflé directive `.plan` is not"),
    ],
)
def test_souffle_features_outside_the_core_are_named_when_refused(text: str, message: str) -> None:
    with pytest.raises(DatalogSyntaxError, match=re.escape(message)):
        parse_program(text)


def fresh_parsers() -> None:
    """The next parse makes (or loads) its parsers again."""
    grammar.lark_parser.cache_clear()
    standalone.standalone_parser.cache_clear()


def test_grammar_tables_are_cached_privately_and_a_corrupt_cache_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    grammar.lark_parser.cache_clear()
    try:
        assert grammar.lark_parser().parse("a(1).", start="program")
        cached = list((tmp_path / "deltalog").iterdir())
        assert len(cached) == 1 and cached[0].stat().st_size > 0
        assert (tmp_path / "deltalog").stat().st_mode & 0o077 == 0
        cached[0].write_bytes(b"not a pickle")
        grammar.lark_parser.cache_clear()
        assert grammar.lark_parser().parse("r(x, y)", start="query")
    finally:
        grammar.lark_parser.cache_clear()


def test_a_changed_grammar_never_loads_the_tables_cached_for_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fresh_parsers()
    try:
        assert parse_program(".comp C { }").components  # caches this grammar's parsers
        without = grammar.GRAMMAR_PATH.read_text().replace("          | component\n", "")
        (tmp_path / "changed.lark").write_text(without)
        monkeypatch.setattr(grammar, "GRAMMAR_PATH", tmp_path / "changed.lark")
        fresh_parsers()
        with pytest.raises(DatalogSyntaxError):
            parse_program(".comp C { }")
    finally:
        fresh_parsers()


def test_syntax_errors_are_explained_by_a_parser_loaded_from_another_process_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LALR state numbers depend on the process that built the tables (string hashing):
    the catalogue of malformed snippets must be matched in the parser in use."""
    bad = "size(n) :- n = count { edge(_, _) }."
    message = "an aggregate needs `:` before its body"
    with pytest.raises(DatalogSyntaxError, match=message):
        parse_program(bad)  # the catalogue, as seen by this process's parser
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONHASHSEED": "1"}
    code = "from datalog.lang.grammar import lark_parser; lark_parser()"
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    grammar.lark_parser.cache_clear()
    try:
        with pytest.raises(DatalogSyntaxError, match=message):
            parse_program(bad)
    finally:
        grammar.lark_parser.cache_clear()
