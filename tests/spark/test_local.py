"""Decomposable recursion (ADR 0065, ADR 0070): which strata run as one job of local
fixpoints or in one task (no Spark needed), and that they give the embedded engine's answers, with
negation, aggregates, symbols and floats, as do the strata that fall back to rounds.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest

from datalog import Database
from datalog.io.spark.decompose import decomposition, steps_program
from datalog.lang.checks import check_program
from datalog.lang.parser import parse_program
from tests.spark.test_evaluate import collect_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

E = ".decl e(x: number, y: number)\n"
TC = E + ".decl p(x: number, y: number)\np(x, y) :- e(x, y).\n"


ONE = "one task"  # decomposed without a pivot: the whole fixpoint in one task (ADR 0070)


def pivot(text: str) -> int | str | None:
    """The pivot of the program's one recursive stratum, `ONE` when it runs in one
    task, None when it is not decomposed at all (round by round)."""
    checked = check_program(parse_program(text))
    stratum = next(s for s in checked.strata if s.recursive)
    plan = decomposition(stratum, checked.schema)
    if plan is not None:  # the text a task evaluates checks, as the engine will
        check_program(parse_program(steps_program(plan, checked.schema)))
    if plan is None:
        return None
    return ONE if plan.pivot is None else plan.pivot


@pytest.mark.parametrize(
    ("text", "column"),
    [
        (TC + "p(x, z) :- p(x, y), e(y, z).\n", 0),  # right-linear: x passes through
        (TC + "p(x, z) :- e(x, y), p(y, z).\n", 1),  # left-linear: z passes through
        (TC + "p(x, z) :- p(x, y), e(y, z), !e(z, x), z != 3.\n", 0),
        (TC + "p(x, z) :- p(x, y), e(y, z), n = count : { e(y, _) }, n < 3.\n", 0),
        (TC + "p(x, z) :- p(x, y), e(y, z).\np(x, z) :- p(x, y), e(z, y).\n", 0),
        (E + ".decl r(y: number)\nr(1).\nr(y) :- r(x), e(x, y).\n", ONE),  # reach
        (TC + "p(x, z) :- p(x, y), p(y, z).\n", ONE),  # not linear
        (TC + "p(x, z) :- p(x, y), e(y, z).\np(z, y) :- p(x, y), e(x, z).\n", ONE),
        (TC + "p(y, x) :- p(x, y).\n", ONE),  # the columns swap: nothing passes through
        (
            E + ".decl a(x: number, y: number)\n.decl b(x: number, y: number)\n"
            "a(x, y) :- e(x, y).\na(x, z) :- b(x, y), e(y, z).\nb(x, z) :- a(x, y), e(y, z).\n",
            None,
        ),  # mutual recursion: two relations
        # a user-defined functor: the task's engine would not know it
        (".functor f(x: number): number\n" + TC + "p(x, z) :- p(x, y), z = @f(y).\n", None),
    ],
    ids=[
        "right",
        "left",
        "negation",
        "aggregate",
        "two-steps",
        "reach",
        "squared",
        "no-common-column",
        "swap",
        "mutual",
        "functor",
    ],
)
def test_decomposable_strata_are_linear_with_a_column_passed_through(
    text: str, column: int | str | None
) -> None:
    assert pivot(text) == column


PROGRAM = """
.decl e(x: number, y: number)
.decl blocked(x: number)
.decl tag(x: number, s: symbol)
.decl w(x: number, f: float)
.decl path(x: number, y: number, d: number)
path(x, y, 1) :- e(x, y), !blocked(x).
path(x, z, d + 1) :- path(x, y, d), e(y, z), !blocked(y), d < 6,
    n = count : { e(y, _) }, n < 3.
.decl longest(x: number, m: number)
longest(x, m) :- path(x, _, _), m = max d : { path(x, _, d) }.
.decl named(s: symbol, y: symbol)
named(s, t) :- tag(x, s), e(x, y), tag(y, t).
named(s, cat(t, "'")) :- named(s, u), tag(x, u), e(x, y), tag(y, t), strlen(t) < 8.
.decl heavy(x: number, f: float)
heavy(x, f) :- w(x, f).
heavy(x, g) :- heavy(x, f), g = f * 2.0, g < 40.0, g > -40.0.
.decl reach(y: number)
reach(1).
reach(y) :- reach(x), e(x, y), !blocked(y).
.decl cut(x: number, n: number)
cut(x, n) :- reach(x), n = count : { path(x, _, _) }.
"""
EDGES = [(1, 2), (2, 3), (3, 4), (4, 2), (1, 5), (5, 6), (6, 7), (7, 8), (8, 1), (2, 9)]
INPUTS: dict[str, list[tuple[Any, ...]]] = {
    "e": EDGES + EDGES[:3],  # copies: the task's database holds sets
    "blocked": [(7,)],
    "tag": [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")],
    "w": [(1, 0.75), (2, 3.0), (3, -1.5)],
}
SCHEMAS = {"e": "a long, b long", "blocked": "a long", "tag": "a long, b string",
           "w": "a long, b double"}  # fmt: skip
DERIVED = ("path", "longest", "named", "heavy", "reach", "cut")


def embedded() -> dict[str, set[tuple[Any, ...]]]:
    db = Database()
    db.define(PROGRAM)
    with db.transaction() as tx:
        for name, rows in INPUTS.items():
            tx.insert(name, rows)
    found = {}
    for name in DERIVED:
        arity = db.checked.schema[name].arity
        found[name] = set(db.query(f"{name}({', '.join(f'v{i}' for i in range(arity))})"))
    return found


def on_spark(spark: SparkSession, **options: Any) -> dict[str, set[tuple[Any, ...]]]:
    from datalog.io.spark.evaluate import evaluate

    checked = check_program(parse_program(PROGRAM))
    frames = {n: spark.createDataFrame(rows, SCHEMAS[n]) for n, rows in INPUTS.items()}
    relations = evaluate(spark, checked, frames, verbose=True, **options)
    return collect_all({name: relations[name] for name in DERIVED})


@pytest.mark.spark
def test_local_fixpoints_give_the_embedded_engines_answers(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    found = on_spark(spark)
    local = [line for line in capsys.readouterr().err.splitlines() if "local fixpoints" in line]
    assert sorted(local) == [
        "stratum [heavy]: one job of local fixpoints, pivot column 0",
        "stratum [named]: one job of local fixpoints, pivot column 0",
        "stratum [path]: one job of local fixpoints, pivot column 0",
    ]
    expected = embedded()
    assert all(expected[name] for name in DERIVED)  # every relation has rows to compare
    assert found == expected


@pytest.mark.spark
@pytest.mark.parametrize(("single", "plan"), [("0", "rounds"), (None, "one task")])
def test_over_the_broadcast_limit_a_stratum_runs_round_by_round_or_in_one_task(
    spark: SparkSession, capsys: pytest.CaptureFixture[str], single: str | None, plan: str
) -> None:
    from datalog.io.spark.evaluate import evaluate
    from datalog.io.spark.local import LIMIT_KEY, SINGLE_KEY

    text = TC + ".decl b(x: number)\np(x, z) :- p(x, y), e(y, z), !b(z).\n"
    checked = check_program(parse_program(text))
    frames = {"e": spark.createDataFrame(EDGES, "a long, b long"),
              "b": spark.createDataFrame([(7,)], "a long")}  # fmt: skip
    spark.conf.set(LIMIT_KEY, "40")  # `b` fits (8 bytes), `e` does not (160)
    if single is not None:  # 0: no single task either (by default it takes it)
        spark.conf.set(SINGLE_KEY, single)
    try:
        found = collect_all({"p": evaluate(spark, checked, frames, verbose=True)["p"]})
    finally:
        spark.conf.unset(LIMIT_KEY)
        spark.conf.unset(SINGLE_KEY)
    err = capsys.readouterr().err
    assert "local fixpoints" not in err
    assert ("stratum [p]: one task" in err.splitlines()) == (plan == "one task")
    db = Database()
    db.define(text)
    with db.transaction() as tx:
        tx.insert("e", EDGES)
        tx.insert("b", [(7,)])
    assert found["p"] == set(db.query("p(x, y)"))
    assert (1, 8) not in found["p"] and (1, 9) in found["p"]


@pytest.mark.spark
def test_a_local_fixpoint_costs_the_same_jobs_whatever_the_depth(spark: SparkSession) -> None:
    from datalog.eval.reference import evaluate as reference_evaluate
    from datalog.io.spark.evaluate import evaluate
    from tests.spark.test_rounds import jobs

    text = TC + "p(x, z) :- p(x, y), e(y, z).\n"
    checked = check_program(parse_program(text))
    for length in (3, 40):  # 3 rounds or 40 round by round
        chain = [(i, i + 1) for i in range(length)]
        before = jobs(spark)
        found = evaluate(spark, checked, {"e": spark.createDataFrame(chain, "a long, b long")})
        used = jobs(spark) - before  # fetching `e`, the one job of local fixpoints
        assert used <= 2, length
        expected = reference_evaluate(checked, {"e": set(chain)})["p"]
        assert collect_all({"p": found["p"]})["p"] == expected


@pytest.mark.parametrize(
    ("master", "broadcast", "single", "limit"),
    [
        ("local[2]", None, None, 4 << 30),
        ("local[2]", "0", None, 0),  # local fixpoints off: no single task either
        ("local[2]", None, "1000", 1000),
        ("spark://127.0.0.1:7077", None, None, 0),
        ("spark://127.0.0.1:7077", "5000", None, 5000),  # on when asked: the same bound
        ("spark://127.0.0.1:7077", "5000", "0", 0),
    ],
)
def test_a_single_task_is_taken_locally_and_on_a_cluster_when_asked(
    master: str, broadcast: str | None, single: str | None, limit: int
) -> None:
    from datalog.io.spark.local import LIMIT_KEY, SINGLE_KEY, single_task_limit

    def get(key: str, default: str | None = None) -> str | None:
        return {LIMIT_KEY: broadcast, SINGLE_KEY: single}.get(key, default)

    spark = SimpleNamespace(
        conf=SimpleNamespace(get=get), sparkContext=SimpleNamespace(master=master)
    )
    assert single_task_limit(cast("SparkSession", spark)) == limit


@pytest.mark.parametrize(
    ("master", "setting", "limit"),
    [
        ("local[2]", None, 64 << 20),
        ("spark://127.0.0.1:7077", None, 0),  # executors may have no Python: off
        ("spark://127.0.0.1:7077", "1000", 1000),
        ("local[2]", "0", 0),
    ],
)
def test_local_fixpoints_are_on_locally_and_on_a_cluster_when_asked(
    master: str, setting: str | None, limit: int
) -> None:
    from datalog.io.spark.local import LIMIT_KEY, broadcast_limit

    def get(key: str, default: str | None = None) -> str | None:
        return setting if key == LIMIT_KEY else default

    spark = SimpleNamespace(
        conf=SimpleNamespace(get=get), sparkContext=SimpleNamespace(master=master)
    )
    assert broadcast_limit(cast("SparkSession", spark)) == limit
