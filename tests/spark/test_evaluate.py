"""The Spark evaluator agrees with the reference evaluator and the embedded engine.

One program holds every case (recursion, same generation, negation, each
aggregate, arithmetic and string functors), so Spark evaluates it once.
"""

from __future__ import annotations

import json
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from datalog import Database, UnsupportedError
from datalog.eval.reference import evaluate as reference_evaluate
from datalog.lang.checks import check_program
from datalog.lang.parser import parse_program

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

PROGRAM = """
.decl edge(x: number, y: number)
.decl name(x: number, n: symbol)
.decl w(x: number, f: float)
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
.decl sg(x: number, y: number)
sg(x, y) :- edge(p, x), edge(p, y), x != y.
sg(x, y) :- edge(a, x), sg(a, b), edge(b, y).
.decl node(x: number)
node(x) :- edge(x, _) ; edge(_, x).
.decl root(x: number)
root(x) :- node(x), !edge(_, x).
.decl unreached(x: number, y: number)
unreached(x, y) :- node(x), node(y), !reach(x, y).
.decl outdegree(x: number, n: number)
outdegree(x, n) :- node(x), n = count : { edge(x, _) }.
.decl total(s: number)
total(s) :- s = sum y : { edge(_, y) }.
.decl least(x: number, m: number)
least(x, m) :- node(x), m = min y : { edge(x, y) }.
.decl most(x: number, m: number)
most(x, m) :- node(x), m = max y : { reach(x, y) }.
.decl average(a: float)
average(a) :- a = mean y : { edge(_, y) }.
.decl none(n: number, s: number)
none(n, s) :- n = count : { edge(x, x) }, s = sum y : { edge(y, y) }.
.decl math(x: number, q: number, r: number, b: number, big: number)
math(x, q, r, b, big) :- node(x), q = (3 - x * 4) / 3, r = (3 - x * 4) % 3,
    b = (x band 6) bor (x bshl 2), big = 9223372036854775807 + x.
.decl dropped(x: number)
dropped(x) :- node(x), _y = 10 / (x - 2).
.decl ratio(x: number, g: float)
ratio(x, g) :- w(x, f), g = (f + 0.5) / 2.0, g < 3.
.decl label(x: number, s: symbol, n: number)
label(x, cat(s, "!"), strlen(s)) :- name(x, s), contains("o", s).
label(x, substr(s, 1, 2), to_number(cat("4", to_string(x)))) :- name(x, s), match("[a-z]+", s).
"""
EDGES = [(1, 2), (2, 3), (3, 4), (1, 5), (5, 3), (6, 6)]
NAMES = [(1, "one"), (2, "two"), (3, "Three"), (4, "four")]
WEIGHTS = [(1, 0.5), (2, 4.0), (3, -1.25), (4, 0.0)]


@pytest.fixture(scope="module")
def results(spark: SparkSession) -> dict[str, set[tuple[Any, ...]]]:
    from datalog.io.spark.evaluate import evaluate

    checked = check_program(parse_program(PROGRAM))
    inputs = {
        "edge": spark.createDataFrame(EDGES, "a long, b long"),
        "name": spark.createDataFrame(NAMES, "a long, b string"),
        "w": spark.createDataFrame(WEIGHTS, "a long, b double"),
    }
    relations = evaluate(spark, checked, inputs)
    return collect_all({name: relations[name] for name in DERIVED})


def collect_all(frames: dict[str, DataFrame]) -> dict[str, set[tuple[Any, ...]]]:
    """Every frame's rows, fetched by ONE Spark job (each job costs about a second)."""
    from pyspark.sql import functions as sf

    tagged = [f.select(sf.lit(n).alias("r"), sf.to_json(sf.struct(*f.columns)).alias("j"))
              for n, f in frames.items()]  # fmt: skip
    found: dict[str, set[tuple[Any, ...]]] = {name: set() for name in frames}
    for row in reduce(lambda a, b: a.union(b), tagged).collect():
        found[row.r].add(tuple(json.loads(row.j).values()))
    return found


@pytest.fixture(scope="module")
def expected() -> dict[str, set[tuple[Any, ...]]]:
    checked = check_program(parse_program(PROGRAM))
    return reference_evaluate(checked, {"edge": EDGES, "name": NAMES, "w": WEIGHTS})


@pytest.fixture(scope="module")
def database() -> Database:
    db = Database()
    db.define(PROGRAM)
    with db.transaction() as tx:
        tx.insert("edge", EDGES)
        tx.insert("name", NAMES)
        tx.insert("w", WEIGHTS)
    return db


DERIVED = ["reach", "sg", "node", "root", "unreached", "outdegree", "total", "least", "most"]
DERIVED += ["average", "none", "math", "dropped", "ratio", "label"]


@pytest.mark.parametrize("relation", DERIVED)
def test_spark_equals_reference_and_embedded_engine(
    relation: str,
    results: dict[str, set[tuple[Any, ...]]],
    expected: dict[str, set[tuple[Any, ...]]],
    database: Database,
) -> None:
    arity = database.checked.schema[relation].arity
    embedded = set(database.query(f"{relation}({', '.join(f'v{i}' for i in range(arity))})"))
    assert results[relation] == expected[relation]
    assert results[relation] == embedded


def test_empty_aggregates_follow_souffle(results: dict[str, set[tuple[Any, ...]]]) -> None:
    assert results["none"] == {(1, 6)}  # one self loop
    assert (4, 0) in results["outdegree"]  # count of nothing is 0
    assert all(x != 4 for x, _ in results["least"])  # min of nothing does not fire


def test_integer_power_is_unsupported_with_its_position(spark: SparkSession) -> None:
    from datalog.io.spark.evaluate import evaluate

    text = ".decl e(x: number)\n.decl p(y: number)\np(y) :- e(x), y = x ^ 2.\n"
    with pytest.raises(UnsupportedError) as caught:
        evaluate(spark, check_program(parse_program(text)), {})
    assert caught.value.line == 3


@pytest.mark.parametrize(
    "expression",
    ["as(x, float) > 1.0", "ord(s) > 0", "x = range(0, 3)"],
    ids=["as", "ord", "range"],
)
def test_souffle_casts_ord_and_range_are_unsupported_with_their_position(
    spark: SparkSession, expression: str
) -> None:
    from datalog.io.spark.evaluate import evaluate

    text = f".decl e(x: number, s: symbol)\n.decl p(x: number)\np(x) :- e(x, s), {expression}.\n"
    with pytest.raises(UnsupportedError, match="not supported on Spark") as caught:
        evaluate(spark, check_program(parse_program(text)), {})
    assert caught.value.line == 3


def test_run_on_spark_writes_the_embedded_engines_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    from datalog.cli.commands import EXAMPLES, main
    from datalog.io.spark.run import run

    program = EXAMPLES / "social.dl"
    assert (
        main(["run", str(program), "-F", str(EXAMPLES / "facts"), "-D", str(tmp_path / "a")]) == 0
    )
    run(program.read_text(), EXAMPLES / "facts", tmp_path / "b", spark)
    written = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert written == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in written:
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()


def test_inputs_with_copies_give_sets(spark: SparkSession) -> None:
    """Inputs are read as they come, copies included: every relation still comes
    out a set, and aggregates count distinct bindings."""
    from datalog.io.spark.evaluate import evaluate

    text = """
    .decl edge(x: number, y: number)
    .decl path(x: number, y: number)
    path(x, y) :- edge(x, y).
    path(x, z) :- path(x, y), edge(y, z).
    .decl out(x: number, n: number)
    out(x, n) :- edge(x, _), n = count : { edge(x, _) }.
    """
    copies = EDGES + EDGES[:3] + [(3, 4), (1, 2)]
    path = [(1, 2), (1, 2), (9, 1)]  # an input of a recursive relation, with copies
    checked = check_program(parse_program(text))
    frames = {
        "edge": spark.createDataFrame(copies, "a long, b long"),
        "path": spark.createDataFrame(path, "a long, b long"),
    }
    found = collect_all({n: f for n, f in evaluate(spark, checked, frames).items()
                         if n in ("edge", "path", "out")})  # fmt: skip
    expected = reference_evaluate(checked, {"edge": set(copies), "path": set(path)})
    for name in ("edge", "path", "out"):
        assert found[name] == expected[name], name
    counts = {name: evaluate(spark, checked, frames)[name].count() for name in ("edge", "path")}
    assert counts == {"edge": len(set(copies)), "path": len(expected["path"])}
