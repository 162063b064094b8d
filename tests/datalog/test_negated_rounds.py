"""Recursions that negate a lower stratum, in one-shot rounds (ADR 0077).

The CRDT benchmark of dynamic-datalog (`bench.analysis_data.CRDT`) recurses through
`!hasValue(v)` and `!hasNextSibling(s)`: rows of the recursive relation are kept or
dropped by a relation of a lower stratum. Each new tactic is a twin of the reference
it shortcuts (`Tuning` fields, off: the reference): the same answers as the reference
evaluator on generated CRDT sessions and generated programs, with every tactic on and
with each one off; and each one is taken where it should be (a spy), which fails
without it.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from bench.analysis_data import CRDT, crdt_facts
from datalog import Database
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from differential.batch import Updates
from differential.operators import chain, iterate, reduce_tactics, unread
from differential.operators.counted import CountedInput
from differential.trace.index import HashIndex, HashTable
from differential.trace.keyset import KeySet
from differential.tuning import TUNING, Tuning, tuned
from tests.budget import examples
from tests.datalog.programs import Generated, fed, full_query, programs, streams
from tests.datalog.test_engine_vs_reference import check_against_reference

OFF = {
    "growing_net": False,
    "unread_sides": False,
    "smaller_arranged": False,
    "retire_rounds": False,
    "antijoin_masks": False,
    "probe_tail": 0,
}
QUERIES = ["result(a, b, c)", "nextElem(a, b, c, d)", "skipBlank(a, b, c, d)"]


def crdt_database(operations: int, seed: int) -> tuple[Database, dict[str, list[Any]]]:
    facts = {
        name: [tuple(r) for r in rows.tolist()]
        for name, rows in crdt_facts(operations, seed).items()
    }
    db = Database()
    db.define(CRDT)
    for name, rows in facts.items():
        db.insert(name, rows)
    return db, facts


def expected(program: str, facts: dict[str, list[Any]], queries: list[str]) -> list[set[Any]]:
    checked = check_program(parse_program(program))
    computed = reference.evaluate(checked, {r: sorted(set(rows)) for r, rows in facts.items()})
    return [
        reference.answer(check_query(parse_query(q), checked.schema), computed) for q in queries
    ]


def answers(db: Database, queries: list[str], tuning: Tuning) -> list[set[Any]]:
    with tuned(tuning):
        return [set(db.query(q)) for q in queries]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crdt_sessions_answer_as_the_reference_with_each_tactic_on_and_off(seed: int) -> None:
    db, facts = crdt_database(150, seed)
    wanted = expected(CRDT, facts, QUERIES)
    assert answers(db, QUERIES, Tuning.default()) == wanted
    assert answers(db, QUERIES, Tuning.default().but(**OFF)) == wanted
    for name in OFF:
        assert answers(db, QUERIES, Tuning.default().but(**{name: OFF[name]})) == wanted, name
    # numpy at every size, and the few-row paths far beyond their measured best
    assert answers(db, QUERIES, Tuning.columns_only()) == wanted
    assert answers(db, QUERIES, Tuning.rows_first().but(probe_tail=1 << 20)) == wanted


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_programs_answer_alike_with_the_tactics_on_and_off(data: st.DataObject) -> None:
    generated: Generated = data.draw(programs())
    stream = data.draw(streams())
    note(generated.text)
    db, facts = fed(generated, stream)
    queries = [full_query(r, generated.relations[r]) for r in generated.derived]
    on = answers(db, queries, Tuning.default().but(few=0, few_pairs=0, deferred_rows=0))
    assert on == answers(db, queries, Tuning.default().but(**OFF))
    wanted = expected(generated.text, {r: list(rows) for r, rows in facts.items()}, queries)
    assert on == wanted


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_live_queries_with_the_reference_antijoin_step_give_the_reference_answers(
    data: st.DataObject,
) -> None:
    """Subscriptions through commits of inserts and retractions (the masked step falls
    back where the negated side holds entries of later iterations of earlier epochs)."""
    with tuned(Tuning.default().but(antijoin_masks=False, smaller_arranged=False)):
        check_against_reference(data)


# -- each tactic is taken (each of these fails without it) ------------------------------


@contextmanager
def general_reduces() -> Iterator[list[int]]:
    """The depth of the scope of every re-evaluation by the general reduce."""
    depths: list[int] = []
    originals = {
        cls: cls.reevaluate for cls in (reduce_tactics.RowsTactic, reduce_tactics.ColumnsTactic)
    }

    def spy(cls: type) -> Any:
        def reevaluate(self: Any, keys: Any, time: Any) -> Any:
            depths.append(len(time))
            return originals[cls](self, keys, time)

        return reevaluate

    with (
        mock.patch.object(reduce_tactics.RowsTactic, "reevaluate", spy(reduce_tactics.RowsTactic)),
        mock.patch.object(
            reduce_tactics.ColumnsTactic, "reevaluate", spy(reduce_tactics.ColumnsTactic)
        ),
    ):
        yield depths


def test_a_distinct_grows_through_retractions_that_cancel() -> None:
    """With the antijoin sending each row and the retraction of the matched ones (its
    reference step), a round's changes hold retractions that cancel: the recursive
    distincts still take their growing step, not the general reduce of every key."""
    db, facts = crdt_database(150, 0)
    wanted = expected(CRDT, facts, QUERIES)
    for net in (True, False):
        with general_reduces() as depths:
            tuning = Tuning.default().but(antijoin_masks=False, growing_net=net)
            assert answers(db, QUERIES, tuning) == wanted
        inner = [d for d in depths if d == 2]
        assert (not inner) if net else inner


def test_rows_that_cancel_do_not_wait_to_be_counted() -> None:
    keys = KeySet([np.dtype(np.int64)] * 2, False)
    keys.count_inputs()
    counted = CountedInput(keys)
    column = np.array([5, 5], dtype=np.int64)
    updates = Updates((column, column + 1), np.zeros((1, 2), dtype=np.int64), np.array([1, -1]))
    assert counted.take([(updates, (0,))], (0,)) == []


def test_fused_rounds_start_from_rows_waiting_at_a_join() -> None:
    """More than `few` rows at the first round (the scheduler's), then one row a round
    through a join with a base relation: the variable's rows wait at the join's side,
    none at the distinct's, and the rounds from there are fused."""
    program = """
    .decl e(x: number, y: number)
    .decl seed(x: number)
    .decl r(x: number)
    r(x) :- seed(x).
    r(y) :- r(x), e(x, y).
    """
    db = Database()
    db.define(program)
    db.insert("seed", [(i,) for i in range(1000, 1040)])
    db.insert("e", [(1000 + i, 1001 + i) for i in range(300)])
    taken: list[bool] = []
    run = chain.Chain.run

    def spy(self: chain.Chain, time: Any) -> bool:
        taken.append(run(self, time))
        return taken[-1]

    with mock.patch.object(chain.Chain, "run", spy):
        found = set(db.query("r(x)"))
    assert found == {(i,) for i in range(1000, 1301)}
    assert any(taken)


@contextmanager
def marked() -> Iterator[list[int]]:
    """How many arrangements each `mark_unread` marked."""
    counts: list[int] = []
    original = unread.mark_unread

    def spy(scope: Any) -> Any:
        found = original(scope)
        counts.append(len(found))
        return found

    with mock.patch.object(iterate, "mark_unread", spy):
        yield counts


LINEAR = """
.decl e(x: number, y: number)
.decl r(x: number, y: number)
r(x, y) :- e(x, y).
r(x, z) :- r(y, z), e(x, y).
"""
SQUARED = """
.decl e(x: number, y: number)
.decl r(x: number, y: number)
r(x, y) :- e(x, y).
r(x, z) :- r(x, y), r(y, z).
"""


def test_only_sides_joined_with_unchanging_relations_keep_nothing() -> None:
    edges = [(i, i + 1) for i in range(60)] + [(i, i + 3) for i in range(0, 60, 7)]
    closure = expected(LINEAR, {"e": edges}, ["r(x, y)"])[0]
    for program, marks in ((LINEAR, True), (SQUARED, False)):
        db = Database()
        db.define(program)
        db.insert("e", edges)
        with marked() as counts:
            assert set(db.query("r(x, y)")) == closure
        assert any(counts) == marks, program
        with marked() as counts:  # a live query's rounds are read again at later epochs
            db.subscribe("r(x, y)", lambda *_: None)
        assert not any(counts)


def test_a_nested_scope_is_forgotten_once_a_one_shot_read_ran_it() -> None:
    db = Database()
    db.define(LINEAR)
    db.insert("e", [(i, i + 1) for i in range(40)])
    retired: list[int] = []
    spines: list[weakref.ref[Any]] = []
    retire = iterate.Subscope.retire

    def spy(self: iterate.Subscope) -> None:
        spines.extend(weakref.ref(op.spine) for op in self.inner.operators if hasattr(op, "spine"))
        retire(self)
        retired.append(len(self.inner.operators))
        with pytest.raises(RuntimeError, match="retired"):  # never silently empty
            self.step((0,))

    gc.disable()  # freed by reference counting, at once
    try:
        with mock.patch.object(iterate.Subscope, "retire", spy):
            assert len(set(db.query("r(x, y)"))) == 40 * 41 // 2
        assert retired == [0]
        assert spines and all(ref() is None for ref in spines)
    finally:
        gc.enable()


@pytest.mark.parametrize("tail", [0, 1, 32, 1 << 20])
def test_hash_tables_probe_alike_whatever_the_tail(tail: int) -> None:
    """Hashes crowded into few home slots (long probe runs), repeated, with absent
    ones: `find` and `claim` of a hash table and the runs of a batch's index agree
    with Python's dictionaries."""
    rng = np.random.default_rng(tail)
    hashes = np.unique(rng.integers(0, 1 << 40, 3000)) << np.int64(20)  # (low bits alike)
    with tuned(TUNING.but(probe_tail=tail)):
        table = HashTable(len(hashes))
        asked = np.concatenate([hashes[::2], hashes[::3], hashes[::2] + 1])
        placed, placer = table.claim(asked, 100)
        distinct = set(asked.tolist())
        assert len(placed) == len(distinct) == len(set(asked[placed].tolist()))
        assert (asked[placer] == asked).all() and set(placer.tolist()) == set(placed.tolist())
        values = {h: 100 + i for i, h in enumerate(asked[placed].tolist())}
        probe = np.concatenate([asked, hashes[1::6], -asked])
        assert table.find(probe).tolist() == [values.get(h, -1) for h in probe.tolist()]
        column = np.sort(np.repeat(hashes, rng.integers(1, 3, len(hashes))))
        index = HashIndex(column)
        lo, hi = index.ranges(probe)
        held = np.isin(probe, column)
        assert (lo[held] == np.searchsorted(column, probe[held], "left")).all()
        assert (hi[held] == np.searchsorted(column, probe[held], "right")).all()
        assert (hi[~held] == lo[~held]).all()
