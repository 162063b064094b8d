"""Stratification: SCCs in dependency order; negation through recursion named."""

from __future__ import annotations

import pytest

from datalog.lang.checks import check_program, dependencies
from datalog.lang.errors import StratificationError
from datalog.lang.parser import parse_program
from datalog.lang.strata import strongly_connected_components

DECLS = "".join(f".decl {name}(x: number)\n" for name in "abcdepq")


def strata_of(rules: str) -> list[tuple[set[str], bool]]:
    checked = check_program(parse_program(DECLS + rules))
    return [(set(s.relations), s.recursive) for s in checked.strata]


def test_components_come_after_everything_they_reach() -> None:
    graph = {"a": ["b"], "b": ["c", "a"], "c": ["d"], "d": ["c"], "e": []}
    components = strongly_connected_components(graph)
    assert [set(c) for c in components] == [{"c", "d"}, {"a", "b"}, {"e"}]


def test_deep_chains_do_not_recurse_in_python() -> None:
    graph = {str(i): [str(i + 1)] for i in range(5000)}
    assert len(strongly_connected_components(graph)) == 5001


def test_strata_are_in_dependency_order_and_base_relations_need_none() -> None:
    found = strata_of("p(x) :- q(x), !a(x).\nq(x) :- b(x).\nq(x) :- q(x), c(x).\nb(1).\n")
    assert found == [({"q"}, True), ({"p"}, False)]


def test_mutual_recursion_is_one_recursive_stratum() -> None:
    found = strata_of("p(x) :- a(x).\np(x) :- q(x).\nq(x) :- p(x), b(x).\n")
    assert found == [({"p", "q"}, True)]


def test_stratum_rules_are_the_rules_deriving_its_relations() -> None:
    checked = check_program(parse_program(DECLS + "p(x) :- a(x).\nq(x) :- p(x).\np(x) :- b(x).\n"))
    assert [len(s.rules) for s in checked.strata] == [2, 1]
    assert all(r.head.name == "p" for r in checked.strata[0].rules)


def test_negation_through_recursion_names_the_cycle() -> None:
    with pytest.raises(StratificationError) as caught:
        check_program(parse_program(DECLS + "p(x) :- a(x), !q(x).\nq(x) :- p(x).\n"))
    assert caught.value.message == (
        "negation through recursion: `p` depends negatively on `q`, "
        "and `q` depends on `p` (cycle p -> q -> p)"
    )
    assert caught.value.span.line == 8


def test_negation_of_itself_is_a_cycle_of_one() -> None:
    with pytest.raises(StratificationError, match=r"`p` depends negatively on itself"):
        check_program(parse_program(DECLS + "p(x) :- a(x), !p(x).\n"))


def test_aggregation_through_recursion_names_the_longer_cycle() -> None:
    rules = "p(n) :- n = count : { q(_) }.\nq(x) :- e(x), d(x).\ne(x) :- p(x).\n"
    with pytest.raises(StratificationError) as caught:
        check_program(parse_program(DECLS + rules))
    assert caught.value.message == (
        "aggregation through recursion: `p` aggregates over `q`, "
        "and `q` depends on `p` (cycle p -> q -> e -> p)"
    )


def test_negation_of_a_lower_stratum_is_fine() -> None:
    found = strata_of("p(x) :- a(x), !q(x).\nq(x) :- b(x).\n")
    assert found == [({"q"}, False), ({"p"}, False)]


def test_dependencies_are_transitive_and_include_the_start() -> None:
    checked = check_program(
        parse_program(DECLS + "p(x) :- q(x), !a(x).\nq(x) :- b(x).\nd(x) :- e(x).\n")
    )
    assert dependencies(checked, ["p"]) == {"p", "q", "a", "b"}
    assert dependencies(checked, ["d", "c"]) == {"d", "e", "c"}
