"""A batch whose key columns pack holds its hashes only (ADR 0083).

`Tuning.packed_batches`: a batch of at least `Tuning.packed_batches_from` entries whose
two or more int64 key columns all fit the packed width (so `key_hash` packed every key)
holds the hashes and its value columns, and reads its keys back from the hashes
(`Batch.columns`, `keys`, `keys_at`, `columns_at`). Off, it holds both (the reference).
Both must agree entry for entry through builds, merges (whole, fueled, key runs),
snapshots and lookups, with keys that do not pack (negative, huge) among them; and a
database must answer as the reference evaluator, one-shot and live, on and off.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.analysis_data import CSPA
from datalog import Database
from datalog.db.change import Change
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from differential.batch import Updates
from differential.time import Antichain
from differential.trace.batch import Batch, Description, key_hash, merge
from differential.trace.cursor import lookup_batch
from differential.trace.spine import Spine
from differential.tuning import TUNING, tuned
from tests.budget import examples
from tests.datalog.programs import (
    NUMPY_PATHS,
    cspa_database,
    tunings_agree_with_the_reference,
)

# Small non-negative values pack (a few keys, often repeated with several values); a
# negative or a huge one does not.
VALUE = st.integers(0, 3) | st.integers(0, 30) | st.sampled_from([-1, -9, 1 << 40])
ROW = st.tuples(VALUE, VALUE, st.integers(0, 3), st.integers(0, 2), st.sampled_from([1, -1, 2]))
ROWS = st.lists(ROW, max_size=60)
ON = {"packed_batches": True, "packed_batches_from": 0}


def updates(rows: list[tuple[int, ...]], arity: int) -> Updates:
    """Rows `(k0, k1, value, time, diff)` as updates of `arity` columns."""
    columns = tuple(np.array([r[i] for r in rows], dtype=np.int64) for i in range(arity))
    times = np.array([[0] * len(rows), [r[3] for r in rows]], dtype=np.int64).reshape(2, len(rows))
    return Updates(columns, times, np.array([r[4] for r in rows], dtype=np.int64))


def description(lower: int, upper: int, since: int = 0) -> Description:
    """Of a nested scope's rounds (a base relation's batches hold their keys)."""
    return Description(Antichain([(0, lower)]), Antichain([(0, upper)]), Antichain([(0, since)]))


def entries(batch: Batch) -> list[Any]:
    """The batch's entries, in order, with its hashes."""
    u = batch.updates()
    rows = zip(
        batch.hashes.tolist(), *(c.tolist() for c in u.columns), *u.times.tolist(), strict=True
    )
    return [(*r, d) for r, d in zip(rows, u.diffs.tolist(), strict=True)]


def built(parts: list[list[tuple[int, ...]]], arity: int, packed: bool) -> list[Batch]:
    tuning = ON if packed else {"packed_batches": False}
    with tuned(TUNING.but(few=0, **tuning)):
        return [
            Batch.build(updates(p, arity), 2, description(i, i + 1)) for i, p in enumerate(parts)
        ]


def answers(batch: Batch, queries: list[tuple[int, int]]) -> list[Any]:
    """Lookups of `queries` in `batch`, gathering every column, none, or one of them."""
    keys = [np.array([q[i] for q in queries], dtype=np.int64) for i in range(2)]
    found = []
    for columns in (None, [], [1], [len(batch.updates().columns) - 1]):
        got = lookup_batch(batch, keys, key_hash(keys), columns)
        if got is not None:
            owner, u = got
            found.append((owner.tolist(), [c.tolist() for c in u.columns], u.diffs.tolist()))
        else:
            found.append(None)
    return found


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(ROWS, min_size=1, max_size=4), st.sampled_from([2, 3]), st.lists(ROW, max_size=8))
def test_packed_batches_hold_the_same_entries_as_the_reference(
    parts: list[list[tuple[int, ...]]], arity: int, asked: list[tuple[int, ...]]
) -> None:
    packed, reference_ = built(parts, arity, True), built(parts, arity, False)
    queries = [(r[0], r[1]) for r in asked + [row for p in parts for row in p[:3]]]
    for mine, theirs, rows in zip(packed, reference_, parts, strict=True):
        assert entries(mine) == entries(theirs)
        assert answers(mine, queries) == answers(theirs, queries)
        fits = all(0 <= r[i] < (1 << 23) for r in rows for i in (0, 1))
        # on, a batch whose keys all pack holds no key column (off: it holds them)
        assert (mine.packed_keys is not None) == (fits and len(mine) > 0)
        assert len(mine.held) == arity - (2 if mine.packed_keys else 0)
        assert theirs.packed_keys is None
        if len(mine):
            cut = np.arange(0, len(mine), 2)
            assert [c.tolist() for c in mine.keys_at(cut)] == [c[cut].tolist() for c in theirs.keys]
    with tuned(TUNING.but(few=0, **ON)):
        merged = merge(packed, Antichain([(0, 2)]))
    with tuned(TUNING.but(few=0, packed_batches=False)):
        expected = merge(reference_, Antichain([(0, 2)]))
    assert entries(merged) == entries(expected)
    assert answers(merged, queries) == answers(expected, queries)


def random_parts(seed: int, batches: int, rows: int) -> list[list[tuple[int, ...]]]:
    """Batches of many rows over a few keys, each key with several values and times."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 12, size=(batches, rows, 2))
    keys[rng.random((batches, rows)) < 0.02] = -3  # (a key that does not pack)
    values = rng.integers(0, 6, size=(batches, rows))
    times = rng.integers(0, 3, size=(batches, rows))
    diffs = rng.choice([1, 1, 1, -1, 2], size=(batches, rows))
    return [
        [
            (*keys[b, r].tolist(), int(values[b, r]), int(times[b, r]) + 3 * b, int(diffs[b, r]))
            for r in range(rows)
        ]
        for b in range(batches)
    ]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("arity", [2, 3])
def test_many_rows_over_few_keys_as_the_reference(seed: int, arity: int) -> None:
    parts = random_parts(seed, 5, 400)
    if seed % 2:  # every key packs
        parts = [[(abs(r[0]), abs(r[1]), *r[2:]) for r in p] for p in parts]
    packed, expected = built(parts, arity, True), built(parts, arity, False)
    queries = [(r[0], r[1]) for p in parts for r in p[:40]]
    for mine, theirs in zip(packed, expected, strict=True):
        assert entries(mine) == entries(theirs)
        assert answers(mine, queries) == answers(theirs, queries)
    assert any(b.packed_keys is not None for b in packed) == bool(seed % 2)
    for fueled in (False, True):
        assert spine_read(parts, arity, fueled, True) == spine_read(parts, arity, fueled, False)


def spine_read(
    parts: list[list[tuple[int, ...]]], arity: int, fueled: bool, packed: bool
) -> tuple[list[Any], list[Any]]:
    """Batches appended to a spine, merged whole or by pieces (`merge_fuel`), then read
    whole and as a snapshot."""
    tuning = ON if packed else {"packed_batches": False}
    fuel = {"merge_fuel": 3 if fueled else 0}
    with tuned(TUNING.but(few=0, recent_rows=0, **fuel, **tuning)):
        spine = Spine(2, [np.int64] * arity, 2)
        for i, p in enumerate(parts):
            spine.append(Batch.build(updates(p, arity), 2, description(i, i + 1)))
        whole = spine.updates()
        shot = spine.snapshot((0, len(parts) + 3), description(0, len(parts) + 4, len(parts) + 3))
    rows = zip(
        *(c.tolist() for c in whole.columns),
        whole.times[1].tolist(),
        whole.diffs.tolist(),
        strict=True,
    )
    return sorted(rows), entries(shot)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(ROWS, min_size=2, max_size=12), st.sampled_from([2, 3]), st.booleans())
def test_spines_of_packed_batches_merge_as_the_reference(
    parts: list[list[tuple[int, ...]]], arity: int, fueled: bool
) -> None:
    """Batches appended to a spine, merged whole or by pieces (`merge_fuel`), then read
    whole and as a snapshot: the same with packed batches as with the reference."""
    assert spine_read(parts, arity, fueled, True) == spine_read(parts, arity, fueled, False)


def answered(db: Database, queries: list[str], packed: bool, **tuning: Any) -> list[set[Any]]:
    on = {"packed_batches_from": 0} if packed else {}
    with tuned(TUNING.but(packed_batches=packed, **{**on, **tuning})):
        return [set(db.query(q)) for q in queries]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_packed_batches_answer_as_the_reference_evaluator(data: st.DataObject) -> None:
    on = {**NUMPY_PATHS, "packed_batches": True, "packed_batches_from": 0}
    tunings_agree_with_the_reference(data, [on, {**NUMPY_PATHS, "packed_batches": False}])


def test_packed_batches_answer_live_under_inserts_and_retractions() -> None:
    """A subscription (its rounds kept apart) to CSPA's aliases, fed and retracted."""
    rng = random.Random(1)
    n = 60
    assign = [(rng.randrange(n), rng.randrange(n)) for _ in range(n)]
    deref = [(rng.randrange(n), rng.randrange(n)) for _ in range(n // 4)]
    seen = []
    for packed in (True, False):
        on = {"packed_batches_from": 0} if packed else {}
        with tuned(TUNING.but(packed_batches=packed, **on, **NUMPY_PATHS)):
            db = Database()
            db.define(CSPA)
            counts: Counter[tuple[Any, ...]] = Counter()

            def receive(change: Change, counts: Counter[tuple[Any, ...]] = counts) -> None:
                for row, diff in zip(change.rows, change.diffs, strict=True):
                    counts[row] += diff

            db.subscribe("valueAlias(x, y)", receive)
            db.insert("assign", assign[: n // 2])
            db.insert("dereference", deref)
            db.insert("assign", assign[n // 2 :])
            db.retract("assign", assign[::3])
            assert all(c >= 0 for c in counts.values())
            seen.append({row for row, c in counts.items() if c})
    facts = {"assign": sorted(set(assign) - set(assign[::3])), "dereference": sorted(set(deref))}
    checked = check_program(parse_program(CSPA))
    computed = reference.evaluate(checked, facts)
    expected = reference.answer(
        check_query(parse_query("valueAlias(x, y)"), checked.schema), computed
    )
    assert seen[0] == seen[1] == expected and len(expected) > 100


def test_cspas_batches_hold_no_key_column_of_pairs() -> None:
    """CSPA over 300 variables, one-shot: the same aliases on and off, and on, no batch of
    pair keys of the iteration's traces holds a key column."""
    db = cspa_database(300)
    made: list[Batch] = []
    build = Batch.build

    def watched(*args: Any, **kwargs: Any) -> Batch:
        batch = build(*args, **kwargs)
        made.append(batch)
        return batch

    original = Batch.__dict__["build"]
    Batch.build = staticmethod(watched)  # type: ignore[method-assign]
    try:
        found = answered(db, ["valueAlias(x, y)"], True, packed_batches_from=64)[0]
    finally:
        Batch.build = original  # type: ignore[method-assign]
    assert found == answered(db, ["valueAlias(x, y)"], False)[0] and len(found) > 10_000
    pairs = [b for b in made if b.key_arity == 2 and len(b) >= 64 and b.times.shape[0] == 2]
    assert pairs and all(b.packed_keys is not None and not b.held for b in pairs)
