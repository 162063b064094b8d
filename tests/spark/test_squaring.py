"""Transitive closure by squaring (ADR 0059): which strata are rewritten (no Spark
needed), and that the rewritten closure takes about log2 of the rounds and gives the
reference evaluator's answer (Spark)."""

from __future__ import annotations

import contextlib
import io
import itertools
from typing import TYPE_CHECKING

import pytest

from datalog.eval.reference import evaluate as reference_evaluate
from datalog.io.spark.squaring import squared
from datalog.lang.ast import Atom
from datalog.lang.checks import CheckedProgram, check_program
from datalog.lang.parser import parse_program
from tests.spark.test_evaluate import collect_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DECLS = ".decl e(x: number, y: number)\n.decl p(x: number, y: number)\n"
RIGHT = DECLS + "p(x, y) :- e(x, y).\np(x, z) :- p(x, y), e(y, z).\n"
LEFT = DECLS + "p(a, b) :- e(a, b).\np(a, c) :- e(a, b), p(b, c).\n"
CHAIN = [(i, i + 1) for i in range(16)] + [(3, 0)]  # a cycle, then a tail: 16 rounds linear


def recursive_body(checked: CheckedProgram) -> list[tuple[str, tuple[str, ...]]] | None:
    """The body of the stratum's rule with two atoms, as evaluated, when it was squared."""
    stratum = next(s for s in checked.strata if s.recursive)
    rules = squared(stratum, checked.schema, set())
    changed = [rule for rule, source in rules.items() if rule is not source]
    if not changed:
        return None
    assert len(changed) == 1 and len(rules) == 2
    return [
        (a.name, tuple(str(getattr(t, "name", t)) for t in a.args))
        for a in changed[0].body
        if isinstance(a, Atom)
    ]


@pytest.mark.parametrize(
    ("text", "body"),
    [
        (RIGHT, [("p", ("x", "y")), ("p", ("y", "z"))]),
        (LEFT, [("p", ("a", "b")), ("p", ("b", "c"))]),
    ],
)
def test_a_linear_closure_is_squared(text: str, body: list[tuple[str, tuple[str, ...]]]) -> None:
    assert recursive_body(check_program(parse_program(text))) == body


@pytest.mark.parametrize(
    "text",
    [
        # another base relation than the one the step follows: not e+
        DECLS + ".decl f(x: number, y: number)\np(x, y) :- f(x, y).\n"
        "p(x, z) :- p(x, y), e(y, z).\n",
        # a third rule, a filter, a constant, columns swapped, a repeated variable
        RIGHT + "p(x, x) :- e(x, _).\n",
        DECLS + "p(x, y) :- e(x, y).\np(x, z) :- p(x, y), e(y, z), x != z.\n",
        DECLS + "p(x, y) :- e(x, y).\np(x, z) :- p(x, 1), e(1, z).\n",
        DECLS + "p(x, y) :- e(y, x).\np(x, z) :- p(x, y), e(y, z).\n",
        DECLS + "p(x, y) :- e(x, y).\np(x, z) :- p(y, x), e(y, z).\n",
        DECLS + "p(x, y) :- e(x, y).\np(x, x) :- p(x, y), e(y, x).\n",
        # not a closure: the step does not chain through its middle variable
        DECLS + "p(x, y) :- e(x, y).\np(x, z) :- p(x, y), e(x, z).\n",
    ],
)
def test_other_shapes_are_left_alone(text: str) -> None:
    assert recursive_body(check_program(parse_program(text))) is None


def test_a_closure_seeded_with_rows_of_its_own_is_left_alone() -> None:
    checked = check_program(parse_program(RIGHT))
    stratum = next(s for s in checked.strata if s.recursive)
    rules = squared(stratum, checked.schema, {"p"})
    assert all(rule is source for rule, source in rules.items())


def rounds_and_answer(
    spark: SparkSession, text: str, edges: list[tuple[int, int]], squaring: bool
) -> tuple[int, set[tuple[object, ...]]]:
    from datalog.io.spark.evaluate import evaluate

    checked = check_program(parse_program(text))
    stream = io.StringIO()
    frame = spark.createDataFrame(edges, "a long, b long")
    with contextlib.redirect_stderr(stream):
        found = evaluate(spark, checked, {"e": frame}, verbose=True, squaring=squaring, local=False)
    assert (
        collect_all({"p": found["p"]})["p"] == reference_evaluate(checked, {"e": set(edges)})["p"]
    )
    return stream.getvalue().count("round "), collect_all({"p": found["p"]})["p"]


@pytest.mark.spark
@pytest.mark.parametrize("text", [RIGHT, LEFT])
def test_a_squared_closure_takes_log_rounds_and_the_same_answer(
    spark: SparkSession, text: str
) -> None:
    linear, expected = rounds_and_answer(spark, text, CHAIN, squaring=False)
    rounds, answer = rounds_and_answer(spark, text, CHAIN, squaring=True)
    assert answer == expected
    # the longest shortest path has 16 edges: 16 rounds linear (the last finds
    # nothing), paths of up to 2, 4, 8, 16 edges and a round that finds nothing
    assert (linear, rounds) == (16, 5)


@pytest.mark.spark
def test_a_seeded_closure_is_evaluated_as_written(spark: SparkSession) -> None:
    text = RIGHT + "p(100, 0).\n"  # p is not e+: (100, 16) is in it
    linear, expected = rounds_and_answer(spark, text, CHAIN, squaring=False)
    rounds, answer = rounds_and_answer(spark, text, CHAIN, squaring=True)
    assert answer == expected and (100, 16) in answer
    assert rounds == linear == 16


@pytest.mark.spark
def test_a_nonlinear_rule_derives_from_two_delta_rows_once(spark: SparkSession) -> None:
    """Semi-naive with two recursive atoms: the atom before the delta reads the
    relation without that delta, so a pair of delta rows is joined once, not twice."""
    from datalog.io.spark.evaluate import StratumEvaluator, base_relations

    checked = check_program(parse_program(DECLS + "p(x, y) :- e(x, y).\n"
                                          "p(x, z) :- p(x, y), p(y, z).\n"))  # fmt: skip
    edges = list(itertools.pairwise(range(5)))
    relations = base_relations(
        spark, checked, {"e": spark.createDataFrame(edges, "a long, b long")}
    )
    stratum = next(s for s in checked.strata if s.recursive)
    rules = {r: r for r in stratum.rules}
    evaluator = StratumEvaluator(spark, checked, relations, rules, 16, False)
    delta = evaluator.new_facts({"p": relations["e"]}, {})
    full = {"p": delta["p"][0]}
    derived = evaluator.derive(stratum, {**relations, **full}, delta, {"p": []})
    # the only derivations: (i, i+1) joined with (i+1, i+2), each once
    rows = derived["p"].collect() if derived["p"] is not None else []
    assert sorted(tuple(r) for r in rows) == [(0, 2), (1, 3), (2, 4)]
