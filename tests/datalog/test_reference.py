"""The reference evaluator computes known answers (it is the oracle, so it is
checked against hand-computed results, not against the engine)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datalog.eval.reference import Row, answer, evaluate
from datalog.lang.checks import check_program, check_query
from datalog.lang.errors import TransactionError
from datalog.lang.functions import Value
from datalog.lang.parser import parse_program, parse_query

EDGES = """
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""


def run(
    source: str, facts: Mapping[str, Iterable[Sequence[Value]]] | None = None
) -> dict[str, set[Row]]:
    return evaluate(check_program(parse_program(source)), facts or {})


def closure(edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    result = set(edges)
    while True:
        more = {(a, d) for a, b in result for c, d in edges if b == c} - result
        if not more:
            return result
        result |= more


@given(st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=12))
def test_transitive_closure_matches_a_direct_computation(edges: set[tuple[int, int]]) -> None:
    assert run(EDGES, {"edge": edges})["reach"] == closure(edges)


def test_same_generation() -> None:
    source = """
    .decl parent(c: symbol, p: symbol)
    .decl sg(x: symbol, y: symbol)
    sg(x, x) :- parent(x, _).
    sg(x, y) :- parent(x, p), sg(p, q), parent(y, q), x != y.
    """
    parents = [("b", "a"), ("c", "a"), ("d", "b"), ("e", "c"), ("a", "r")]
    sg = run(source, {"parent": parents})["sg"]
    assert {(x, y) for x, y in sg if x != y} == {("b", "c"), ("c", "b"), ("d", "e"), ("e", "d")}


def test_stratified_negation() -> None:
    source = (
        EDGES
        + """
    .decl node(x: number)
    .decl unreachable(x: number, y: number)
    node(x) :- edge(x, _) ; edge(_, x).
    unreachable(x, y) :- node(x), node(y), !reach(x, y).
    """
    )
    result = run(source, {"edge": [(1, 2), (2, 3)]})
    assert result["node"] == {(1,), (2,), (3,)}
    assert result["unreachable"] == {(1, 1), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3)}


AGGREGATES = """
.decl item(group: symbol, value: number)
.decl groups(group: symbol)
.decl counted(group: symbol, n: number)
.decl summed(group: symbol, n: number)
.decl lowest(group: symbol, n: number)
.decl highest(group: symbol, n: number)
.decl average(group: symbol, n: float)
counted(g, n) :- groups(g), n = count : { item(g, _) }.
summed(g, n) :- groups(g), n = sum v : { item(g, v) }.
lowest(g, n) :- groups(g), n = min v : { item(g, v) }.
highest(g, n) :- groups(g), n = max v : { item(g, v) }.
average(g, n) :- groups(g), n = mean v : { item(g, v) }.
"""


@pytest.fixture(scope="module")
def aggregated() -> dict[str, set[Row]]:
    items = [("a", 1), ("a", 4), ("a", 4), ("b", -3)]
    return run(AGGREGATES, {"item": items, "groups": [("a",), ("b",), ("empty",)]})


def test_count_of_an_empty_group_is_zero(aggregated: dict[str, set[Row]]) -> None:
    assert aggregated["counted"] == {("a", 2), ("b", 1), ("empty", 0)}


def test_sum_of_an_empty_group_is_zero(aggregated: dict[str, set[Row]]) -> None:
    assert aggregated["summed"] == {("a", 5), ("b", -3), ("empty", 0)}


def test_min_max_mean_of_an_empty_group_do_not_fire(aggregated: dict[str, set[Row]]) -> None:
    assert aggregated["lowest"] == {("a", 1), ("b", -3)}
    assert aggregated["highest"] == {("a", 4), ("b", -3)}
    assert aggregated["average"] == {("a", 2.5), ("b", -3.0)}
    assert all(isinstance(n, float) for _, n in aggregated["average"])


def test_ungrouped_aggregates_over_nothing() -> None:
    source = """
    .decl item(v: number)
    .decl c(n: number)
    .decl s(n: number)
    .decl m(n: number)
    c(n) :- n = count : { item(_) }.
    s(n) :- n = sum v : { item(v) }.
    m(n) :- n = min v : { item(v) }.
    """
    result = run(source)
    assert (result["c"], result["s"], result["m"]) == ({(0,)}, {(0,)}, set())


def test_aggregates_range_over_distinct_assignments_with_wildcards_as_positions() -> None:
    source = """
    .decl r(a: number, b: number)
    .decl c(n: number)
    .decl s(n: number)
    c(n) :- n = count : { r(_, _) }.
    s(n) :- n = sum b : { r(_, b) }.
    """
    result = run(source, {"r": [(1, 5), (2, 5), (3, 7)]})
    assert result["c"] == {(3,)}
    assert result["s"] == {(17,)}  # both 5s count: they come from different assignments


def test_sum_of_floats_is_a_float() -> None:
    source = """
    .decl r(x: float)
    .decl s(n: float)
    s(n) :- n = sum x : { r(x) }.
    """
    assert run(source, {"r": [(1.5,), (2,)]})["s"] == {(3.5,)}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("-7 / 2", {(-3,)}),
        ("-7 % 2", {(-1,)}),
        ("7 / -2", {(-3,)}),
        ("7 % -2", {(1,)}),
        ("7 / 0", set()),
        ("7 % 0", set()),
        ("2 ^ 10", {(1024,)}),
        ("2 ^ 63", {(-(2**63),)}),
        ("9223372036854775807 + 1", {(-(2**63),)}),
        ('strlen("héllo")', {(5,)}),
        ('to_number("-42")', {(-42,)}),
        ('to_number("4x")', set()),
        ("max(3, 9, 4)", {(9,)}),
    ],
)
def test_arithmetic_corner_cases(expression: str, expected: set[Row]) -> None:
    source = f"""
    .decl one(x: number)
    .decl out(x: number)
    one(1).
    out(y) :- one(_), y = {expression}.
    """
    assert run(source)["out"] == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('cat("ab", "cd", "e")', {("abcde",)}),
        ('substr("hello", 1, 3)', {("ell",)}),
        ('substr("hello", 3, 10)', {("lo",)}),
        ('substr("hello", 6, 1)', set()),
        ('substr("hello", -1, 1)', set()),
        ("to_string(-12)", {("-12",)}),
    ],
)
def test_string_functions(expression: str, expected: set[Row]) -> None:
    source = f"""
    .decl out(x: symbol)
    .decl one(x: number)
    one(1).
    out(y) :- one(_), y = {expression}.
    """
    assert run(source)["out"] == expected


def test_division_by_zero_drops_only_that_binding() -> None:
    source = """
    .decl r(x: number)
    .decl q(x: number)
    q(y) :- r(x), y = 12 / x.
    """
    assert run(source, {"r": [(0,), (4,), (-5,)]})["q"] == {(3,), (-2,)}


def test_symbol_comparisons_are_lexicographic() -> None:
    source = """
    .decl w(x: symbol)
    .decl before(x: symbol, y: symbol)
    .decl has(x: symbol)
    before(x, y) :- w(x), w(y), x < y.
    has(x) :- w(x), contains("b", x).
    """
    result = run(source, {"w": [("b",), ("ab",), ("c",)]})
    assert result["before"] == {("ab", "b"), ("ab", "c"), ("b", "c")}
    assert result["has"] == {("b",), ("ab",)}


def test_program_facts_may_hold_constant_expressions() -> None:
    source = """
    .decl f(x: number, y: float)
    f(1 + 2, 3).
    f(1 / 0, 1.5).
    """
    assert run(source)["f"] == {(3, 3.0)}


def test_queries_project_their_variables_in_order_of_appearance() -> None:
    checked = check_program(parse_program(EDGES))
    relations = evaluate(checked, {"edge": [(1, 2), (2, 3), (4, 1)]})
    query = check_query(parse_query("reach(1, y), !edge(1, y)"), checked.schema)
    assert answer(query, relations) == {(3,)}
    query = check_query(parse_query("reach(x, 3) ; edge(x, 1)"), checked.schema)
    assert answer(query, relations) == {(1,), (2,), (4,)}


def test_base_facts_are_coerced_and_checked() -> None:
    source = ".decl r(x: float, s: symbol)"
    assert run(source, {"r": [(1, "a")]})["r"] == {(1.0, "a")}
    with pytest.raises(TransactionError, match="unknown relation `q`"):
        run(source, {"q": [(1,)]})
    with pytest.raises(TransactionError, match="expects a symbol"):
        run(source, {"r": [(1.0, 2)]})


def test_sibling_aggregates_keep_their_variables_to_themselves() -> None:
    """Soufflé scoping: `y` of one aggregate is not the `y` of its sibling."""
    from datalog.db.database import Database
    from datalog.lang.checks import check_program
    from datalog.lang.parser import parse_program

    text = """
    .decl edge(x: number, y: number)
    .decl u(a: number, b: number)
    u(a, b) :- a = sum y : { edge(_, y) }, b = sum y : { edge(y, _) }.
    edge(1, 2). edge(2, 3). edge(3, 1). edge(1, 3).
    """
    assert evaluate(check_program(parse_program(text)), {})["u"] == {(9, 7)}
    db = Database()
    db.define(text)
    assert db.query("u(a, b)") == [(9, 7)]


def test_negated_builtin_predicates_parse_and_agree_with_the_engine() -> None:
    """`!contains(a, b)` and `!match(p, s)` (Soufflé) keep what the positive form drops."""
    from datalog.db.database import Database
    from datalog.lang.checks import check_program
    from datalog.lang.parser import parse_program

    text = """
    .decl s(x: symbol)
    .decl r(x: symbol)
    r(x) :- s(x), !contains("ab", x), !match("z.*", x).
    s("xaby"). s("zed"). s("q").
    """
    assert evaluate(check_program(parse_program(text)), {})["r"] == {("q",)}
    db = Database()
    db.define(text)
    assert db.query("r(x)") == [("q",)]


def test_aggregates_over_a_multiset_input_see_distinct_assignments() -> None:
    """A `multiset` input may hold a fact twice; an aggregate still counts it once."""
    from datalog.db.database import Database

    db = Database()
    db.define(
        ".decl m(x: number) multiset\n.decl c(n: number)\n.decl s(n: number)\n"
        "c(n) :- n = count : { m(_) }.\ns(n) :- n = sum x : { m(x) }."
    )
    db.insert("m", [(1,), (1,), (2,)])
    assert (db.query("c(n)"), db.query("s(n)")) == ([(2,)], [(3,)])
