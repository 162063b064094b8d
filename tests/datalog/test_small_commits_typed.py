"""Small commits through live dataflows over the values where Python rows and numpy
columns part ways (ADR 0030), against the reference evaluator after every commit.

The list paths of a few changes (a reduce's keys as rows, a join's matches, a delta
query's validation from its proposals, a trace's waiting rows read by key, a head
picked as a projection) see Python integers where the numpy paths see int64 and
uint64 columns. Here a fixed program reads relations of every column type holding
their extremes (uint64 above 2**63, int64's least value, -0.0 beside 0.0), with
heads that reorder and repeat variables, recursion, aggregates, subsumption and
triangles (delta queries, on Python rows for number columns) over unsigned and
multiset inputs; transactions insert and retract the same rows in one epoch.
Subscriptions and one-shot queries must equal the reference evaluator, and so must
queries as of every earlier epoch at the end, with the small-batch kernels on and
off (`small_path`), under each join plan.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog.db.database import Database
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from tests.budget import examples
from tests.datalog.answers import Accumulated

pytestmark = pytest.mark.usefixtures("small_path")

PROGRAM = """
.decl e(x: unsigned, y: unsigned)
.decl m(x: unsigned, y: unsigned) multiset
.decl n(x: number, y: number)
.decl nm(x: number, y: number) multiset
.decl f(x: float, y: float)
.decl s(x: symbol, y: number)
.decl reach(x: unsigned, y: unsigned)
reach(x, y) :- e(x, y).
reach(x, z) :- reach(x, y), e(y, z).
.decl back(y: unsigned, x: unsigned)
back(y, x) :- reach(x, y).
.decl loop(x: unsigned, y: unsigned)
loop(x, x) :- e(x, _).
.decl mreach(x: unsigned, y: unsigned)
mreach(x, y) :- m(x, y).
mreach(x, z) :- mreach(x, y), m(y, z).
.decl nreach(x: number, y: number)
nreach(x, y) :- n(x, y).
nreach(x, z) :- nreach(x, y), n(y, z).
.decl nswap(y: number, x: number, z: number)
nswap(y, x, y) :- nreach(x, y), n(y, _).
.decl freach(x: float, y: float)
freach(x, y) :- f(x, y).
freach(x, z) :- freach(x, y), f(y, z).
.decl sreach(x: symbol, y: number)
sreach(x, y) :- s(x, y).
sreach(x, z) :- sreach(x, y), n(y, z).
.decl ecount(x: unsigned, c: number)
ecount(x, c) :- e(x, _), c = count : { e(x, _) }.
.decl nmin(x: number, v: number)
nmin(x, v) :- n(x, _), v = min y : { n(x, y) }.
.decl nmax(x: number, v: number)
nmax(x, v) :- n(x, _), v = max y : { nreach(x, y) }.
.decl best(x: unsigned, y: unsigned)
best(x, y) :- reach(x, y).
best(x, y1) <= best(x, y2) :- y2 < y1.
.decl tri(x: number, y: number, z: number)
tri(x, y, z) :- n(x, y), n(y, z), n(z, x).
.decl utri(x: unsigned, y: unsigned, z: unsigned)
utri(x, y, z) :- e(x, y), m(y, z), e(z, x).
.decl mtri(x: number, y: number, z: number)
mtri(x, y, z) :- n(x, y), nm(y, z), nm(z, x).
"""
DERIVED = (
    *("reach", "back", "loop", "mreach", "nreach", "nswap", "freach", "sreach"),
    *("ecount", "nmin", "nmax", "best", "tri", "utri", "mtri"),
)
VALUES: dict[str, tuple[Any, ...]] = {
    "unsigned": (0, 1, 2**63 - 1, 2**63, 2**64 - 1),
    "number": (-(2**63), -1, 0, 2**63 - 1),
    "float": (0.0, -0.0, 1.5, float("inf")),
    "symbol": ("a", "b"),
}
CHECKED = check_program(parse_program(PROGRAM))
BASES = {r: CHECKED.schema.types(r) for r in ("e", "m", "n", "nm", "f", "s")}
QUERIES = [f"{r}({', '.join('xyz'[: len(CHECKED.schema.types(r))])})" for r in DERIVED]

Row = tuple[Any, ...]
Change = tuple[str, str, Row]  # (insert | retract | flip, relation, row)


def rows(relation: str) -> st.SearchStrategy[Row]:
    return st.tuples(*(st.sampled_from(VALUES[k]) for k in BASES[relation]))


CHANGES = st.sampled_from(sorted(BASES)).flatmap(
    lambda r: st.tuples(
        st.sampled_from(("insert", "insert", "retract", "flip")), st.just(r), rows(r)
    )
)
STREAMS = st.lists(st.lists(CHANGES, min_size=1, max_size=4), min_size=1, max_size=8)


def _same_zero(rows: set[Row]) -> set[Row]:
    """Rows with -0.0 read as 0.0 (equal values: which one a set keeps is arbitrary)."""
    return {tuple(0.0 if v == 0 and isinstance(v, float) else v for v in r) for r in rows}


def _apply(counts: dict[str, Counter[Row]], change: Change) -> None:
    op, relation, row = change
    multiset = relation in ("m", "nm")
    held = counts[relation]
    if op == "insert":
        held[row] = held[row] + 1 if multiset else 1
    elif op == "retract":
        held[row] = max(held[row] - 1, 0) if multiset else 0
    else:  # inserted, retracted and inserted again in one transaction
        held[row] = held[row] + 1 if multiset else 1


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=STREAMS, plan=st.sampled_from(("auto", "wcoj", "binary")))
def test_small_typed_commits_equal_the_reference(stream: list[list[Change]], plan: Any) -> None:
    note(f"plan {plan}")
    db = Database()
    db.define(PROGRAM)
    subs = {q: Accumulated() for q in QUERIES}
    for q, acc in subs.items():
        db.subscribe(q, acc, plan)
    queries = {q: check_query(parse_query(q), CHECKED.schema) for q in QUERIES}
    counts: dict[str, Counter[Row]] = {r: Counter() for r in BASES}
    answers: dict[int, dict[str, set[Row]]] = {}
    for n, tx in enumerate(stream):
        note(f"tx {n}: {tx}")
        with db.transaction() as t:
            for op, relation, row in tx:
                if op == "flip":
                    t.insert(relation, [row])
                    t.retract(relation, [row])
                    t.insert(relation, [row])
                else:
                    (t.insert if op == "insert" else t.retract)(relation, [row])
        for change in tx:
            _apply(counts, change)
        facts = {r: {row for row, c in held.items() if c > 0} for r, held in counts.items()}
        relations = reference.evaluate(CHECKED, facts)
        answers[db.epoch] = {}
        for q, acc in subs.items():
            expected = answers[db.epoch][q] = _same_zero(reference.answer(queries[q], relations))
            assert _same_zero(acc.rows()) == expected, f"after tx {n}: subscription `{q}`"
            once = q.replace("(x", "(a").replace(" x", " a")  # a new one-shot dataflow
            assert _same_zero(set(db.query(once, plan))) == expected, f"after tx {n}: `{once}`"
    for epoch, expected in answers.items():  # snapshots of traces the live ones read
        for q in QUERIES:
            got = _same_zero(set(db.query(q, plan, as_of=epoch)))
            assert got == expected[q], f"`{q}` as of epoch {epoch}"
