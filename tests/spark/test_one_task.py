"""A recursive stratum without a pivot runs in ONE task (ADR 0070): the same answers
as the per-round plan it replaces and as the embedded engine, in the same few jobs
whatever the depth of the recursion; what local fixpoints alone read is not cached."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from datalog import Database
from datalog.lang.checks import check_program
from datalog.lang.parser import parse_program
from tests.spark.test_evaluate import collect_all
from tests.spark.test_rounds import jobs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

E = ".decl e(x: number, y: number)\n"
TC = E + ".decl p(x: number, y: number)\np(x, y) :- e(x, y).\n"
EDGES = [(1, 2), (2, 3), (3, 4), (4, 2), (1, 5), (5, 6), (6, 7), (7, 8), (8, 1), (2, 9), (9, 9)]
PROGRAMS = {
    # single-source reach with a negation: the head keeps no column of `r(x)`
    "reach": E + ".decl b(x: number)\n.decl r(y: number)\nr(1).\nr(y) :- r(x), e(x, y), !b(y).\n",
    # several sources, from an input: exit rows derived on Spark
    "sources": E + ".decl s(x: number)\n.decl r(y: number)\nr(x) :- s(x).\n"
    "r(y) :- r(x), e(x, y), y != 4.\n",
    "squared": TC + "p(x, z) :- p(x, y), p(y, z).\n",  # not linear
    "swap": TC + "p(y, x) :- p(x, y).\n",  # the columns swap
    "same-generation": E + ".decl sg(x: number, y: number)\nsg(x, x) :- e(x, _).\n"
    "sg(x, y) :- e(xp, x), sg(xp, yp), e(yp, y), x != y.\n",
    "symbols": ".decl n(a: symbol, b: symbol)\n.decl r(a: symbol, k: number)\n"
    'r("a", 0).\nr(b, k + 1) :- r(a, k), n(a, b), k < 4, strlen(b) < 3.\n',
    "floats": E + ".decl w(x: number, f: float)\n.decl h(x: float)\nh(0.5).\n"
    "h(g) :- h(f), w(_, d), g = f + d, g < 3.0.\n",
}
INPUTS: dict[str, list[tuple[Any, ...]]] = {
    "e": EDGES + EDGES[:2],  # copies: the task's database holds sets
    "b": [(7,)],
    "s": [(1,), (6,), (6,)],
    "n": [("a", "b"), ("b", "cc"), ("cc", "a"), ("b", "long"), ("cc", "d")],
    "w": [(1, 0.75), (2, 1.25)],
}
SCHEMAS = {"e": "a long, b long", "b": "a long", "s": "a long", "n": "a string, b string",
           "w": "a long, b double"}  # fmt: skip
HEADS = {"reach": "r", "sources": "r", "squared": "p", "swap": "p", "same-generation": "sg",
         "symbols": "r", "floats": "h"}  # fmt: skip


def frames_for(spark: SparkSession, text: str) -> dict[str, Any]:
    names = check_program(parse_program(text)).schema.relations
    return {n: spark.createDataFrame(r, SCHEMAS[n]) for n, r in INPUTS.items() if n in names}


def embedded(text: str, head: str) -> set[tuple[Any, ...]]:
    db = Database()
    db.define(text)
    names = db.checked.schema.relations
    with db.transaction() as tx:
        for name, rows in INPUTS.items():
            if name in names:
                tx.insert(name, rows)
    arity = db.checked.schema[head].arity
    return set(db.query(f"{head}({', '.join(f'v{i}' for i in range(arity))})"))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_one_task_gives_the_rounds_and_the_embedded_engines_answers(
    spark: SparkSession, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    from datalog.io.spark.evaluate import evaluate

    text, head = PROGRAMS[name], HEADS[name]
    checked = check_program(parse_program(text))
    one = evaluate(spark, checked, frames_for(spark, text), verbose=True)[head]
    assert f"stratum [{head}]: one task" in capsys.readouterr().err.splitlines()
    rounds = evaluate(spark, checked, frames_for(spark, text), local=False)[head]
    found = collect_all({"one": one, "rounds": rounds})
    expected = embedded(text, head)
    assert len(expected) > 2  # something to compare
    assert found["one"] == found["rounds"] == expected


def test_one_task_costs_the_same_jobs_whatever_the_depth(spark: SparkSession) -> None:
    from datalog.io.spark.evaluate import evaluate

    text = E + ".decl r(y: number)\nr(0).\nr(y) :- r(x), e(x, y).\n"
    checked = check_program(parse_program(text))
    for length in (3, 40):  # 3 rounds or 40 round by round
        chain = [(i, i + 1) for i in range(length)]
        frame = spark.createDataFrame(chain, "a long, b long")
        before = jobs(spark)
        found = evaluate(spark, checked, {"e": frame})["r"]
        used = jobs(spark) - before  # sizing `e` (a frame of Python rows), the task
        assert used <= 2, length
        assert collect_all({"r": found})["r"] == {(i,) for i in range(length + 1)}


def test_over_the_single_task_limit_a_stratum_runs_round_by_round(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    from datalog.io.spark.evaluate import evaluate
    from datalog.io.spark.local import SINGLE_KEY

    text = PROGRAMS["reach"]
    checked = check_program(parse_program(text))
    spark.conf.set(SINGLE_KEY, "100")  # `e`: 13 rows of 16 bytes
    try:
        found = evaluate(spark, checked, frames_for(spark, text), verbose=True)["r"]
        rows = collect_all({"r": found})["r"]
    finally:
        spark.conf.unset(SINGLE_KEY)
    assert "one task" not in capsys.readouterr().err
    assert rows == embedded(text, "r")


def test_what_only_local_fixpoints_read_is_not_cached(spark: SparkSession) -> None:
    from datalog.io.spark.evaluate import cache_reads

    text = PROGRAMS["sources"]
    checked = check_program(parse_program(text))
    frames = {n: f.select("*") for n, f in frames_for(spark, text).items()}
    stratum = next(s for s in checked.strata if s.recursive)
    uncached = {"e", "s"}
    cache_reads(frames, stratum, uncached)  # a stratum Spark's plans evaluate
    assert uncached == set()
    assert frames["e"].is_cached and frames["s"].is_cached
    for frame in frames.values():
        frame.unpersist()


def persisted(spark: SparkSession) -> set[int]:
    """The ids of the RDDs the session holds persisted (caches and checkpoints)."""
    jsc = getattr(spark.sparkContext, "_jsc")  # noqa: B009 (no public listing)
    return {int(key) for key in jsc.getPersistentRDDs().keySet()}


def test_an_input_only_one_task_reads_is_read_without_a_cache(spark: SparkSession) -> None:
    from datalog.io.spark.evaluate import evaluate

    text = PROGRAMS["reach"]
    checked = check_program(parse_program(text))
    spark.catalog.clearCache()
    before = persisted(spark)  # earlier tests' checkpoints may be cleaned meanwhile
    found = evaluate(spark, checked, frames_for(spark, text))["r"]
    assert collect_all({"r": found})["r"] == embedded(text, "r")
    assert found.is_cached  # the answer's rows, decoded from its blobs once read (ADR 0074)
    found.unpersist(blocking=True)
    assert len(persisted(spark) - before) == 1  # the answer's checkpoint: no cache of e, b
