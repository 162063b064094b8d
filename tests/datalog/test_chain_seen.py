"""Fused rounds that remember a run's keys as Python rows (ADR 0061): a round's
membership test is one set lookup, not a probe of the distinct's key set, while the
run's set holds every key of the key set; past `TUNING.fused_seen` keys the run
probes again. Twin-tested against the scheduler like ADR 0029's rounds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

from hypothesis import given, note, settings

from datalog import Database
from differential.trace.keyset import KeySet
from differential.tuning import TUNING, tuned
from tests.budget import examples
from tests.datalog.test_chain import fused_runs, fusion, programs, run, transactions

BODY3 = """
.decl a(x: number)
.decl b(x: number)
.decl c(y: number)
.decl d(y: number)
a(x) :- b(x), c(y), d(y).
b(x + 1) :- a(x), x < 3000.
b(0). c(1). c(2). d(2). d(3).
"""


@contextmanager
def probes() -> Iterator[list[int]]:
    """How many keys were probed one at a time (`KeySet.holds`) in the block."""
    count = [0]
    original = KeySet.holds

    def spy(self: KeySet, h: int, key: tuple[object, ...]) -> bool:
        count[0] += 1
        return original(self, h, key)

    with mock.patch.object(KeySet, "holds", spy):
        yield count


@settings(max_examples=examples(40))
@given(programs(), transactions)
@tuned(TUNING.but(handover=16, fused_seen=40))
def test_runs_that_forget_their_keys_midway_give_the_scheduler_answers(
    program: str, commits: list
) -> None:
    """Hand-overs every 16 keys and a run's set dropped past 40 keys: runs start
    remembering and go on probing, with the same answers and inner state."""
    note(program)
    assert run(program, commits, True) == run(program, commits, False)


@tuned(TUNING.but(handover=64))
def test_a_fresh_chain_through_joins_probes_no_key_one_at_a_time() -> None:
    with probes() as probed, fused_runs() as taken:
        db = Database()
        db.define(BODY3)
        assert sorted(db.query("a(x)")) == [(x,) for x in range(3001)]
    assert any(taken)
    assert probed[0] == 0  # 6,000 probes, one per round, before


@tuned(TUNING.but(handover=64, fused_seen=200))
def test_past_the_bound_the_rounds_probe_again_with_the_same_answer() -> None:
    answers = []
    for fused in (True, False):
        with fusion(fused), probes() as probed:
            db = Database()
            db.define(BODY3)
            answers.append(sorted(db.query("a(x)")))
        assert probed[0] > (1000 if fused else -1)
    assert answers[0] == answers[1] == [(x,) for x in range(3001)]


def test_a_chain_that_comes_back_to_a_key_it_made_long_before_stops_there() -> None:
    """The chain wraps around to `c(0)` after 1,024 rounds, many hand-overs after
    the one that put it in the key set: the run's set still holds it. (Seeding the
    run's set with the key set's keys is caught by the random twins above: without
    it a key is admitted twice.)"""
    program = ".decl c(x: number)\nc(0).\nc((x + 1) band 1023) :- c(x)."
    for fused in (True, False):
        with fusion(fused), fused_runs() as taken, tuned(TUNING.but(handover=64)):
            db = Database()
            db.define(program)
            assert sorted(db.query("c(x)")) == [(x,) for x in range(1024)]
        assert any(taken) == fused


@tuned(TUNING.but(handover=64))
def test_a_long_run_compiles_its_routes_once_and_a_short_one_never() -> None:
    """Compiled routes (`chain_routes`) after the first hand-over only: a small
    commit's few rounds pay no compilation."""
    from differential.operators import chain

    compiled: list[object] = []
    original = chain.compile_route

    def spy(paths: object) -> object:
        compiled.append(paths)
        return original(paths)  # type: ignore[arg-type]

    with mock.patch.object(chain, "compile_route", spy):
        db = Database()
        db.define(BODY3)
        assert len(db.query("a(x)")) == 3001
        assert len(compiled) == 2  # one per relation, once for the run
        compiled.clear()
        db.define(".decl e(x: number)\ne(x + 1) :- e(x), x < 20.\ne(0).")
        assert len(db.query("e(x)")) == 21
    assert compiled == []


def test_a_key_sets_rows_are_its_keys_up_to_a_limit() -> None:
    """`KeySet.rows`: every key, the free-slot marker's key (kept aside) included."""
    import numpy as np

    from differential.trace.batch import key_hash
    from differential.trace.index import EMPTY

    keys = KeySet([np.dtype(np.int64)], identity=True)
    column = np.array([5, EMPTY, -3, 70_000], dtype=np.int64)
    keys.admit_absent(key_hash((column,)), (column,))
    assert keys.rows(4) == {(5,), (EMPTY,), (-3,), (70_000,)}
    assert keys.rows(3) is None
    pairs = KeySet([np.dtype(np.int64)] * 2, identity=False)
    a, b = np.array([1, 2, 1], dtype=np.int64), np.array([7, 8, 9], dtype=np.int64)
    pairs.admit(key_hash((a, b)), (a, b))
    assert pairs.rows(10) == {(1, 7), (2, 8), (1, 9)}
