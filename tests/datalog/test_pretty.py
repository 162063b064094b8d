"""Pretty-printing then parsing gives back the same AST (spans aside)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from datalog.lang import ast
from datalog.lang.parser import parse_program, parse_query
from datalog.lang.pretty import (
    format_literal,
    format_program,
    format_query,
    format_rule,
    format_term,
)
from tests.budget import examples
from tests.datalog import strategies


def _term_back(term: ast.Term) -> ast.Term:
    query = parse_query(f"x = {format_term(term)}")
    comparison = query.body[0]
    assert isinstance(comparison, ast.Comparison)
    return comparison.right


@given(strategies.terms)
def test_term_round_trips(term: ast.Term) -> None:
    assert _term_back(term) == term


@given(strategies.literals)
def test_literal_round_trips(literal: ast.Literal) -> None:
    assert parse_query(format_literal(literal)).body == (literal,)


@given(strategies.rules)
def test_rule_round_trips(rule: ast.Rule) -> None:
    assert parse_program(format_rule(rule)).rules == (rule,)


@given(strategies.programs)
def test_program_round_trips(program: ast.Program) -> None:
    assert parse_program(format_program(program)) == program


@given(strategies.queries)
def test_query_round_trips(query: ast.Query) -> None:
    assert parse_query(format_query(query)) == query


@given(st.integers(min_value=0, max_value=10**6))
def test_negated_constant_is_not_folded(n: int) -> None:
    term = ast.Neg(ast.Const(n, "number"))
    assert format_term(term) == f"-({n})"
    assert _term_back(term) == term


@settings(max_examples=examples(25))  # deep nesting draws slowly; a few suffice
@given(strategies.body_strategy(depth=2))
def test_nested_aggregates_and_disjunctions_round_trip(body: tuple[ast.Literal, ...]) -> None:
    assert parse_query(format_query(ast.Query(body))).body == body


def test_printed_program_reads_like_souffle() -> None:
    text = (
        ".decl edge(x: number, y: number) multiset\n"
        'reach(x, y) :- edge(x, y) ; reach(x, z), edge(z, y), !stop(z), y != "a\\"b".\n'
        "deg(x, n) :- node(x), n = count : { edge(x, _) }, m = (n + 1) * -2 ^ 2.\n"
    )
    assert format_program(parse_program(text)) == text
