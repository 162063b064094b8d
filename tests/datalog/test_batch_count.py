"""One-shot counts over set joins (ADR 0028): the shortcuts against the general plan.

A one-shot query drops the empty inputs of derived relations, and a relation
whose one rule is a set join then needs no distinct; an ungrouped aggregate
plans its body without the demand; `count` reads only its groups' columns. Each
answer is checked against a live subscription (the general plan) and a count
in Python, with facts inserted into the derived relation as well (overlapping
what the rule derives, which a missing distinct would count twice). A triangle
count validates its candidates through pair bitmaps (`differential.trace.dense`).
"""

from __future__ import annotations

from itertools import permutations
from unittest import mock

import numpy as np

from datalog import Database
from datalog.lang.checks import check_query
from datalog.lang.parser import parse_query
from datalog.plan.explain import plan_notes
from datalog.plan.plan import Options
from datalog.plan.planner import Planner
from differential.batch import Updates, consolidate
from differential.dataflow import Stream
from differential.engine import Engine
from differential.operators.linear import project
from differential.trace.dense import DensePairs
from differential.tuning import TUNING, tuned
from tests.datalog.answers import Recorder

PROGRAM = """
.decl e(a: number, b: number)
.decl v(a: number)
.decl tri(a: number, b: number, c: number)
.decl p(a: number)
.decl n(k: number)
.decl m(k: number)
.decl deg(a: number, k: number)
tri(a, b, c) :- e(a, b), e(b, c), e(a, c).
p(a) :- e(a, _).
n(k) :- k = count : { tri(_, _, _) }.
m(k) :- k = count : { p(_) }.
deg(a, k) :- v(a), k = count : { tri(a, _, _) }.
"""
QUERIES = ("n(k)", "m(k)", "deg(a, k)")


def _graph(seed: int) -> set[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    pairs = set(
        zip(rng.integers(0, 12, 40).tolist(), rng.integers(0, 12, 40).tolist(), strict=True)
    )
    return {(a, b) for a, b in pairs if a != b} | {(b, a) for a, b in pairs if a != b}


def _expected(edges: set[tuple[int, int]], extra: set[tuple[int, ...]]) -> dict[str, set]:
    nodes = {x for edge in edges for x in edge}
    tri = {t for t in permutations(sorted(nodes), 3) if {t[:2], t[1:], t[::2]} <= edges} | extra
    return {
        "n(k)": {(len(tri),)},
        "m(k)": {(len({a for a, _ in edges}),)},
        "deg(a, k)": {(a, sum(t[0] == a for t in tri)) for a in range(6)},
    }


def _check(db: Database, live: dict[str, Recorder], expected: dict[str, set]) -> None:
    for query in QUERIES:  # renamed: not the live query's key, so a one-shot dataflow
        assert set(db.query(query.replace("k", "j"))) == expected[query], query
        assert live[query].rows() == expected[query], query


def test_one_shot_counts_agree_with_live_plans_and_python() -> None:
    for seed in range(4):
        db = Database()
        db.define(PROGRAM)
        edges = _graph(seed)
        db.insert("e", sorted(edges))
        db.insert("v", [(a,) for a in range(6)])
        live = {query: Recorder() for query in QUERIES}
        for query, recorder in live.items():
            db.subscribe(query, recorder)
        _check(db, live, _expected(edges, set()))
        some = sorted(t for t in permutations(range(12), 3) if {t[:2], t[1:], t[::2]} <= edges)
        extra = set(some[:3]) | {(0, 0, 0), (1, 2, 1)}  # derived ones and new ones
        db.insert("tri", sorted(extra))
        _check(db, live, _expected(edges, extra))
        gone = sorted(edges)[:8]
        db.retract("e", gone)
        _check(db, live, _expected(edges - set(gone), extra))


def _skipped(db: Database, query: str, one_shot: bool) -> list[str]:
    """The relations a plan of `query` derives without a distinct."""
    checked = check_query(parse_query(query), db.checked.schema)
    planner = Planner(db.engine, db.symbols)
    plan = planner.build(db.checked, checked, query, Options(one_shot=one_shot))
    db.engine.drop(plan.dataflow)
    return [note.split(":")[0] for note in plan_notes(plan.plan) if note.endswith("no distinct")]


def test_the_distinct_is_left_out_only_where_the_rule_derives_a_set() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("e", [(0, 1), (1, 0)])
    assert _skipped(db, "n(k)", one_shot=True) == ["tri"]
    assert _skipped(db, "n(k)", one_shot=False) == []  # facts may come later
    assert _skipped(db, "m(k)", one_shot=True) == []  # p projects e: it keeps its distinct
    db.insert("tri", [(5, 6, 7)])
    assert _skipped(db, "n(k)", one_shot=True) == []  # facts to merge with the rule's


def test_projecting_onto_no_columns_sums_each_times_updates() -> None:
    scope = Engine().dataflow("t").root
    stream = Stream(scope, [np.dtype(np.int64)], "s")
    sent: list[Updates] = []
    project(stream, []).connect(sent.append)
    times = np.array([[1, 2, 1, 1, 2, 3, 3], [0, 0, 0, 1, 0, 0, 0]], dtype=np.int64)
    diffs = np.array([1, 2, 3, -1, 1, 4, -4], dtype=np.int64)
    mixed = Updates((np.arange(7),), times, diffs)
    same = Updates((np.arange(3),), np.zeros((2, 3), np.int64), np.array([1, 5, -2]))
    cancelling = Updates((np.arange(2),), np.zeros((2, 2), np.int64), np.array([2, -2]))
    for batch in (mixed, same, cancelling, same.take(np.array([0]))):
        stream.send(batch)
        out = [row for part in sent for row in part.rows()]  # nothing sent where all cancel
        assert all(part.arity == 0 for part in sent)
        sent.clear()
        assert sorted(out) == sorted(consolidate(Updates((), batch.times, batch.diffs)).rows())


def test_a_triangle_count_through_bitmaps_equals_python() -> None:
    rng = np.random.default_rng(5)
    pairs = set(
        zip(rng.integers(0, 30, 200).tolist(), rng.integers(0, 30, 200).tolist(), strict=True)
    )
    edges = {(a, b) for a, b in pairs if a != b} | {(b, a) for a, b in pairs if a != b}
    nodes = {x for edge in edges for x in edge}
    triangles = [t for t in permutations(nodes, 3) if {t[:2], t[1:], t[::2]} <= edges]
    built: list[DensePairs | None] = []
    original = DensePairs.of

    def spy(*args: object) -> DensePairs | None:
        built.append(original(*args))  # type: ignore[arg-type]
        return built[-1]

    with (
        tuned(TUNING.but(min_indexed=0)),
        mock.patch.object(DensePairs, "of", staticmethod(spy)),
    ):
        db = Database()
        db.define(
            ".decl e(a: number, b: number)\n.decl n(k: number)\n"
            "n(k) :- k = count : { e(a, b), e(b, c), e(a, c) }."
        )
        db.insert("e", sorted(edges))
        assert db.query("n(k)") == [(len(triangles),)]
    assert any(d is not None for d in built)
