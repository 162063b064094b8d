"""Text a user (or an attacker) can send is refused quickly, with a position, or
works: deep nesting, long expressions, lone surrogates, huge texts under a budget.

No timing is asserted: the size of the work is (how many tokens are read before
the budget stops them, that a refusal happens before lark parses anything)."""

from __future__ import annotations

import sys
from unittest import mock

import pytest

from datalog import Database
from datalog.lang import grammar, parser
from datalog.lang.errors import BudgetExceeded, DatalogSyntaxError
from datalog.lang.nesting import LEVELS, MAX_NESTING
from datalog.lang.parser import parse_program, parse_query
from datalog.lang.pretty import format_program
from datalog.lang.source_text import SourceText, first_surrogate
from differential.dataflow import Interrupted

PROGRAM = ".decl r(x: number)\n.decl q(x: number)\nr(1).\n"


def test_a_million_nested_parentheses_are_refused_before_lark_parses_them() -> None:
    n = 1_000_000
    text = PROGRAM + "q(x) :- r(y), x = " + "(" * n + "y" + ")" * n + "."
    unused = mock.patch.object(parser, "lark_parser", side_effect=AssertionError("parsed"))
    fast = mock.patch.object(parser, "standalone_parser", side_effect=AssertionError("parsed"))
    with unused, fast, pytest.raises(DatalogSyntaxError, match="nested too deeply") as caught:
        parse_program(text)
    error = caught.value
    assert (error.line, error.column) == (4, len("q(x) :- r(y), x = ") + MAX_NESTING + 1)
    assert len(str(error)) < 1000  # the 2 MB line is shown cut around the position


def test_brackets_inside_strings_and_comments_do_not_count_as_nesting() -> None:
    deep = "(" * (2 * MAX_NESTING)
    text = f'.decl s(x: symbol)\ns("{deep}"). // {deep}\n/* {deep} */ s("{{").'
    assert len(parse_program(text).rules) == 2


def test_nesting_at_the_limit_parses_and_one_more_level_is_refused_where_it_opens() -> None:
    prefix = "q(x) :- r(x), x = "
    parse_program(PROGRAM + prefix + "-(" * MAX_NESTING + "1" + ")" * MAX_NESTING + ".")
    over = prefix + "-(" * (MAX_NESTING + 1) + "1" + ")" * (MAX_NESTING + 1) + "."
    with pytest.raises(DatalogSyntaxError, match="nested too deeply") as caught:
        parse_program(PROGRAM + over)
    assert (caught.value.line, caught.value.column) == (4, len(prefix) + 2 * MAX_NESTING + 2)
    negations = prefix + "-" * (MAX_NESTING + 1) + "x."  # no bracket: the tree is refused
    with pytest.raises(DatalogSyntaxError, match="nested too deeply") as caught:
        parse_program(PROGRAM + negations)
    assert (caught.value.line, caught.value.column) == (4, len(prefix) + MAX_NESTING + 1)


@pytest.mark.parametrize(
    ("unit", "rule", "levels"),
    [
        ("max(@, 1)", "q(x) :- r(x), x = @.", LEVELS["call"]),
        ("(@, x = 1)", "q(x) :- r(x), @.", LEVELS["group"]),
        ("count : { r(y), y = @ }", "q(x) :- r(x), x = @.", LEVELS["aggregate"]),
    ],
)
def test_calls_groups_and_aggregates_count_the_levels_their_walks_cost(
    unit: str, rule: str, levels: int
) -> None:
    def nested(times: int) -> str:
        text = "r(x)" if unit.startswith("(") else "x"
        for _ in range(times):
            text = unit.replace("@", text)
        return rule.replace("@", text)

    parse_program(PROGRAM + nested(MAX_NESTING // levels))
    with pytest.raises(DatalogSyntaxError, match="nested too deeply"):
        parse_program(PROGRAM + nested(MAX_NESTING // levels + 1))


def test_a_400_term_sum_parses_checks_prints_and_evaluates() -> None:
    expr = " + ".join(["y"] * 400)
    text = PROGRAM + f"q(x) :- r(y), x = {expr}."
    printed = format_program(parse_program(text))
    assert format_program(parse_program(printed)) == printed  # (== on ASTs recurses in C)
    db = Database()
    db.define(text)
    assert db.query("q(x)") == [(400,)]
    got = []
    db.subscribe("q(x)", got.append)
    db.insert("r", [(2,)])
    assert sorted(got[-1].rows) == [(800,)]
    assert db.query(f"r(y), x = {expr}, x > 0") == [(1, 400), (2, 800)]


def test_a_deep_expression_without_brackets_is_refused_at_a_position() -> None:
    """A sum of 5,000 terms nests no bracket, but is 5,000 operators deep."""
    expr = " + ".join(["y"] * 5000)
    with pytest.raises(DatalogSyntaxError, match="nested too deeply") as caught:
        parse_query(f"r(y), x = {expr}")
    assert caught.value.line == 1 and caught.value.column > 1


@pytest.mark.parametrize(
    "text",
    [
        '.decl s(x: symbol)\ns("a\ud800b").',
        ".decl s(x: symbol) // \udfff\n",
        '.decl s(x: symbol)\n.input s(filename="\ud83d.facts")',
    ],
)
def test_a_lone_surrogate_anywhere_in_the_text_is_refused_with_a_printable_error(
    text: str,
) -> None:
    db = Database()
    with pytest.raises(DatalogSyntaxError, match="lone surrogate") as caught:
        db.define(text)
    error = caught.value
    assert error.line >= 1 and error.column == first_surrogate_column(text)
    str(error).encode("utf-8")  # the message itself can be printed and logged
    assert db.checked.schema.get("s") is None


def first_surrogate_column(text: str) -> int:
    offset = first_surrogate(text)
    assert offset is not None
    return offset - (text.rfind("\n", 0, offset) + 1) + 1


def test_a_surrogate_in_a_query_is_refused() -> None:
    db = Database()
    db.define('.decl s(x: symbol)\ns("a").')
    with pytest.raises(DatalogSyntaxError, match="lone surrogate"):
        db.query('s("\udc00")')
    assert db.query("s(x)") == [("a",)]


def test_parsing_checks_the_budget_every_few_thousand_tokens() -> None:
    calls = []

    def check() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise Interrupted("stopped: the computation ran past its time budget")

    text = PROGRAM + "".join(f"r({i}).\n" for i in range(10_000))  # 50,000 tokens
    with mock.patch.object(grammar, "check_budget", check), pytest.raises(Interrupted):
        parse_program(text)
    assert len(calls) == 3  # stopped at the third check, long before the end


def test_a_huge_definition_stops_with_the_budget_and_changes_nothing() -> None:
    db = Database()
    db.define(PROGRAM)
    text = "".join(f"r({i}).\n" for i in range(20_000))
    with pytest.raises(BudgetExceeded), db.budget(0.0):
        db.define(text)
    assert db.query("r(x)") == [(1,)]


def test_positions_skip_strings_and_comments_when_looking_back() -> None:
    text = 'a(")(", 1) /* ) ( */ // ((\n   \n  x'
    source = SourceText(text)
    assert source.depths_at(len(text)) == (0, 0)
    assert source.depths_at(2) == (1, 0)  # inside `a(`
    end = source.code_end_before(text.index("x"))
    assert text[:end].endswith("1)")
    assert source.on_later_line(text.index("x"))
    assert source.code_end_before(text.index(")", 3) + 1) == text.index(")", 3) + 1
    assert SourceText("// only a comment\n").code_end_before(18) == 0


def test_deep_terms_compare_and_hash_without_recursing() -> None:
    """Dataclass equality recursed about three frames a level in C: a program with
    the same 400-term rule twice raised RecursionError while indexing its rules."""
    expr = " + ".join(["y"] * 400)
    db = Database()
    db.define(PROGRAM + f"q(x) :- r(y), x = {expr}.\nq(x) :- r(y), x = {expr}.")
    assert db.query("q(x)") == [(400,)]
    a, b = parse_query(f"x = {expr}"), parse_query(f"x = {expr}")
    c = parse_query(f"x = {expr} + 1")

    def deep(frames: int) -> tuple[bool, bool, int]:
        if frames:
            return deep(frames - 1)
        return a == b, a == c, len({a.body[0], b.body[0], c.body[0]})

    assert deep(150) == (True, False, 2)


def _at_the_limit(shape: str) -> str:
    """A rule nested exactly `MAX_NESTING` levels deep in one way."""
    if shape == "operators":
        return "q(x) :- r(y), x = " + " + ".join(["y"] * (MAX_NESTING + 1)) + "."
    if shape == "calls":
        n = MAX_NESTING // LEVELS["call"]
        return "q(x) :- r(y), x = " + "max(" * n + "y" + ", 1)" * n + "."
    if shape == "groups":
        n = MAX_NESTING // LEVELS["group"]
        return "q(x) :- r(x), " + "(" * n + "x > 0" + ")" * n + "."
    inner = "r(y)"
    for i in range(MAX_NESTING // LEVELS["aggregate"]):
        inner = f"r(y{i}), c{i} = count : {{ {inner} }}"
    return f"q(x) :- r(x), {inner}."


@pytest.mark.parametrize("shape", ["operators", "calls", "groups", "aggregates"])
def test_every_operation_runs_a_rule_at_the_limit_from_150_frames_deep(shape: str) -> None:
    """The limit keeps every walk within Python's default recursion limit, with 150
    frames left to whoever calls (the limit is never raised: `sys.getrecursionlimit`)."""
    text = PROGRAM + _at_the_limit(shape)
    db = Database()
    seen: list[object] = []

    def run() -> None:
        db.define(text)
        db.subscribe("q(x)", seen.append)
        db.insert("r", [(2,)])
        answers = db.query("q(x)")
        db.query(f"q({answers[0][0]})")
        db.why(f"q({answers[0][0]})")
        db.explain("q(x)")
        format_program(parse_program(text))

    def deep(frames: int) -> None:
        if frames:
            deep(frames - 1)
        else:
            run()

    limit = sys.getrecursionlimit()
    deep(150)
    assert sys.getrecursionlimit() == limit and len(seen) == 2
