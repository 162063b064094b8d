"""A batch holds its int64 value columns at int32 where they fit (ADR 0085).

`Tuning.narrow_values`: a batch of at least `Tuning.narrow_values_from` entries in a
nested scope holds each int64 value column whose values all fit int32 at int32, and
reads it back at int64 wherever it is read (`Batch.columns`, `values`, `columns_at`,
`values_at`, `updates`); merges (whole and fueled) keep a column narrow when every
input's values fit. Off: every column at its type (the reference). Both must agree
entry for entry, dtype for dtype, through builds, merges, snapshots and lookups, with
values at the int32 bounds and beyond them; and a database must answer as the
reference evaluator, one-shot and live, on and off.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
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
from differential.operators.enter import _lift_batch
from differential.time import Antichain
from differential.trace.batch import Batch, Description, key_hash, merge
from differential.trace.cursor import FewKeys, lookup_batch, lookup_entries
from differential.trace.spine import Spine
from differential.tuning import TUNING, tuned
from tests.budget import examples
from tests.datalog.programs import (
    NUMPY_PATHS,
    cspa_database,
    tunings_agree_with_the_reference,
)

LOW, HIGH = -(1 << 31), (1 << 31) - 1
# Values at the int32 bounds, just beyond them, far beyond, and small ones (most).
BOUND = st.sampled_from([LOW, HIGH, LOW + 1, HIGH - 1, LOW - 1, HIGH + 1, 1 << 40, -(1 << 62)])
VALUE = st.integers(-3, 3) | st.integers(0, 30) | BOUND
KEY = st.integers(0, 3) | st.integers(0, 30) | st.sampled_from([-1, HIGH + 1])
ROW = st.tuples(KEY, KEY, VALUE, VALUE, st.integers(0, 2), st.sampled_from([1, -1, 2]))
ROWS = st.lists(ROW, max_size=40)
ON = {"narrow_values": True, "narrow_values_from": 0, "few": 0}
OFF = {"narrow_values": False, "few": 0}


def updates(rows: list[tuple[int, ...]], arity: int = 4) -> Updates:
    """Rows `(k0, k1, v0, v1, time, diff)` as updates of the first `arity` columns."""
    columns = tuple(np.array([r[i] for r in rows], dtype=np.int64) for i in range(arity))
    times = np.array([[0] * len(rows), [r[4] for r in rows]], dtype=np.int64).reshape(2, len(rows))
    return Updates(columns, times, np.array([r[5] for r in rows], dtype=np.int64))


def description(lower: int, upper: int, since: int = 0) -> Description:
    """Of a nested scope's rounds (a base relation's batches are not narrowed)."""
    return Description(Antichain([(0, lower)]), Antichain([(0, upper)]), Antichain([(0, since)]))


def entries(batch: Batch) -> list[Any]:
    """The batch's entries, in order, with its hashes, and the dtypes it hands out."""
    u = batch.updates()
    rows = zip(
        batch.hashes.tolist(), *(c.tolist() for c in u.columns), *u.times.tolist(), strict=True
    )
    dtypes = [str(c.dtype) for c in (*u.columns, *batch.values)] + [str(d) for d in batch.dtypes]
    return [dtypes, *((*r, d) for r, d in zip(rows, u.diffs.tolist(), strict=True))]


def built(parts: list[list[tuple[int, ...]]], key_arity: int, narrow: bool) -> list[Batch]:
    with tuned(TUNING.but(**(ON if narrow else OFF))):
        return [
            Batch.build(updates(p), key_arity, description(i, i + 1)) for i, p in enumerate(parts)
        ]


def answers(batch: Batch, queries: list[tuple[int, int]]) -> list[Any]:
    """Lookups of `queries` in `batch` by numpy (every column, none, one value column,
    every value column at half the entries) and by Python lists (`lookup_entries`, its
    lists kept with the batch or each key's range read)."""
    k = batch.key_arity
    keys = [np.array([q[i] for q in queries], dtype=np.int64) for i in range(k)]
    found: list[Any] = []
    for columns in (None, [], [k], [3]):
        got = lookup_batch(batch, keys, key_hash(keys), columns)
        found.append(None if got is None else _found(*got))
    half = np.arange(0, len(batch), 2)
    gathered = [*batch.columns_at(half), *batch.values_at(half), *batch.values_at(slice(1, 9))]
    found.append([(str(c.dtype), c.tolist()) for c in gathered])
    for listed in (0, 1 << 20):
        with tuned(TUNING.but(listed=listed, listed_max=listed)):
            few: list[Any] = []
            asked = FewKeys.of(keys, key_hash(keys))
            lookup_entries(batch, asked, few)
            found.append(sorted(few))
    return found


def _found(owner: np.ndarray, u: Updates) -> Any:
    return owner.tolist(), [(str(c.dtype), c.tolist()) for c in u.columns], u.diffs.tolist()


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(ROWS, min_size=1, max_size=4),
    st.sampled_from([1, 2]),
    st.lists(ROW, max_size=6),
    st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_narrowed_batches_hold_the_same_entries_as_the_reference(
    parts: list[list[tuple[int, ...]]],
    key_arity: int,
    asked: list[tuple[int, ...]],
    decided: list[bool],
) -> None:
    """Built, looked up and merged (some inputs narrowed, some not decided): the same
    entries, answers and dtypes as the reference; on, a value column that fits is held
    at int32, one that does not at int64."""
    narrow, reference_ = built(parts, key_arity, True), built(parts, key_arity, False)
    queries = [(r[0], r[1]) for r in asked + [row for p in parts for row in p[:3]]]
    for mine, theirs, rows in zip(narrow, reference_, parts, strict=True):
        assert entries(mine) == entries(theirs)
        assert answers(mine, queries) == answers(theirs, queries)
        assert not theirs.narrowed
        if len(mine):  # (a value column equal to the key is the key's array: held once)
            fits = [int(c.min()) >= LOW and int(c.max()) <= HIGH for c in theirs.values]
            keys = (mine.hashes, *mine.keys)
            held = mine.held_values
            widths = [c.dtype.itemsize for c in held if not any(c is k for k in keys)]
            wanted = [
                4 if f else 8
                for f, c in zip(fits, held, strict=True)
                if not any(c is k for k in keys)
            ]
            assert widths == wanted, rows
    # Merged with inputs built on or off (a small batch's columns are never decided).
    mixed = [n if d else r for n, r, d in zip(narrow, reference_, decided, strict=False)]
    with tuned(TUNING.but(**ON)):
        merged = merge(mixed, Antichain([(0, 2)]))
    with tuned(TUNING.but(**OFF)):
        expected = merge(reference_, Antichain([(0, 2)]))
    assert entries(merged) == entries(expected)
    assert answers(merged, queries) == answers(expected, queries)


def spine_read(
    parts: list[list[tuple[int, ...]]], key_arity: int, fueled: bool, narrow: bool
) -> tuple[list[Any], list[Any]]:
    """Batches appended to a spine, merged whole or by pieces (`merge_fuel`), then read
    whole and as a snapshot."""
    fuel = {"merge_fuel": 3 if fueled else 0}
    with tuned(TUNING.but(recent_rows=0, **fuel, **(ON if narrow else OFF))):
        spine = Spine(key_arity, [np.int64] * 4, 2)
        for i, p in enumerate(parts):
            spine.append(Batch.build(updates(p), key_arity, description(i, i + 1)))
        whole = spine.updates()
        shot = spine.snapshot((0, len(parts) + 3), description(0, len(parts) + 4, len(parts) + 3))
    rows = zip(
        *(c.tolist() for c in whole.columns),
        whole.times[1].tolist(),
        whole.diffs.tolist(),
        strict=True,
    )
    return sorted(rows), [str(c.dtype) for c in whole.columns] + entries(shot)


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(ROWS, min_size=2, max_size=10), st.sampled_from([1, 2]), st.booleans())
def test_spines_of_narrowed_batches_merge_as_the_reference(
    parts: list[list[tuple[int, ...]]], key_arity: int, fueled: bool
) -> None:
    assert spine_read(parts, key_arity, fueled, True) == spine_read(parts, key_arity, fueled, False)


@pytest.mark.parametrize("seed", range(2))
def test_many_rows_merged_by_pieces_as_the_reference(seed: int) -> None:
    """Batches of many rows whose values fit in some batches and not in others, merged
    whole and by pieces (`merge_fuel` 64): the same as the reference."""
    rng = np.random.default_rng(seed)
    parts = []
    for b in range(6):
        keys = rng.integers(0, 40, size=(300, 2))
        values = rng.integers(LOW, HIGH, size=(300, 2), endpoint=True)
        if b % 3 == 2:
            values[rng.random(300) < 0.05, 1] = HIGH + 1 + b
        times, diffs = rng.integers(0, 3, size=300), rng.choice([1, -1, 2], size=300)
        parts.append(
            [
                (*keys[r].tolist(), *values[r].tolist(), int(times[r]) + 3 * b, int(diffs[r]))
                for r in range(300)
            ]
        )
    for key_arity in (1, 2):
        for fueled in (False, True):
            assert spine_read(parts, key_arity, fueled, True) == spine_read(
                parts, key_arity, fueled, False
            )


@pytest.mark.parametrize("dtype", [np.uint64, np.float64, np.int32])
def test_only_int64_value_columns_narrow(dtype: type) -> None:
    """Unsigned, float and int32 value columns are held as they are."""
    n = 50
    columns = (np.arange(n, dtype=np.int64), np.arange(n).astype(dtype), np.arange(n) * 3)
    u = Updates(columns, np.zeros((2, n), dtype=np.int64), np.ones(n, dtype=np.int64))
    with tuned(TUNING.but(**ON)):
        batch = Batch.build(u, 1, description(0, 1))
    assert batch.narrowed == (1,)
    assert [c.dtype for c in batch.held] == [np.int64, np.dtype(dtype), np.int32]
    assert [c.dtype for c in batch.columns] == [np.int64, np.dtype(dtype), np.int64]


def test_lifted_and_snapshot_batches_share_the_columns_they_are_given() -> None:
    """A base relation's batch entered into a scope, and a trace's one batch read as a
    snapshot, hold the same arrays (nothing copied at int32 beside the int64 one that
    stays: ADR 0044 shares a base relation's columns between its arrangements)."""
    n = 64
    columns = (np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64) * 5)
    with tuned(TUNING.but(**ON)):
        outer = Batch.build(
            Updates(columns, np.zeros((1, n), dtype=np.int64), np.ones(n, dtype=np.int64)),
            1,
            Description(Antichain([(0,)]), Antichain([(1,)]), Antichain([(0,)])),
        )
        lifted = _lift_batch(outer)
        spine = Spine(1, [np.int64] * 2, 2)
        spine.append(
            Batch.build(
                updates([(k, 3 * k + 1, 7, 0, 0, 1) for k in range(n)], 2), 1, description(0, 1)
            )
        )
        (inner,) = spine.batches
        shot = spine.snapshot((0, 3), description(0, 4, 3))
    assert not outer.narrowed and all(a is b for a, b in zip(lifted.held, outer.held, strict=True))
    assert inner.narrowed == (0,) and inner.held[1].dtype == np.int32
    assert shot.narrowed == (0,) and all(a is b for a, b in zip(shot.held, inner.held, strict=True))
    assert shot.values[0].dtype == np.int64


def answered(db: Database, queries: list[str], narrow: bool, **tuning: Any) -> list[set[Any]]:
    on = {"narrow_values_from": 0} if narrow else {}
    with tuned(TUNING.but(narrow_values=narrow, **{**on, **tuning})):
        return [set(db.query(q)) for q in queries]


@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_narrowed_values_answer_as_the_reference_evaluator(data: st.DataObject) -> None:
    on = {**NUMPY_PATHS, "narrow_values": True, "narrow_values_from": 0}
    tunings_agree_with_the_reference(data, [on, {**NUMPY_PATHS, "narrow_values": False}])


def test_narrowed_values_answer_live_under_inserts_and_retractions() -> None:
    """A subscription (its rounds kept apart) to CSPA's aliases, fed and retracted, with
    variables at the int32 bounds and beyond: on, off and the reference evaluator agree,
    and on, the iteration's batches hold value columns at int32."""
    rng = random.Random(1)
    names = [rng.choice([rng.randrange(40), HIGH - rng.randrange(9), HIGH + 1]) for _ in range(60)]
    assign = [(rng.choice(names), rng.choice(names)) for _ in range(60)]
    deref = [(rng.choice(names), rng.choice(names)) for _ in range(15)]
    seen, held = [], []
    for narrow in (True, False):
        on = {"narrow_values_from": 0} if narrow else {}
        with tuned(TUNING.but(narrow_values=narrow, **on, **NUMPY_PATHS)), _watched() as made:
            db = Database()
            db.define(CSPA)
            counts: Counter[tuple[Any, ...]] = Counter()

            def receive(change: Change, counts: Counter[tuple[Any, ...]] = counts) -> None:
                for row, diff in zip(change.rows, change.diffs, strict=True):
                    counts[row] += diff

            db.subscribe("valueAlias(x, y)", receive)
            db.insert("assign", assign[:30])
            db.insert("dereference", deref)
            db.insert("assign", assign[30:])
            db.retract("assign", assign[::3])
            assert all(c >= 0 for c in counts.values())
            seen.append({row for row, c in counts.items() if c})
            held.append(sum(bool(b.narrowed) for b in made))
    facts = {"assign": sorted(set(assign) - set(assign[::3])), "dereference": sorted(set(deref))}
    checked = check_program(parse_program(CSPA))
    computed = reference.evaluate(checked, facts)
    expected = reference.answer(
        check_query(parse_query("valueAlias(x, y)"), checked.schema), computed
    )
    assert seen[0] == seen[1] == expected and len(expected) > 100
    assert held[0] > 0 and held[1] == 0


@contextmanager
def _watched() -> Iterator[list[Batch]]:
    """Every batch built (`Batch.build`) within the block, listed."""
    made: list[Batch] = []
    original = Batch.__dict__["build"]
    build = Batch.build

    def watched(*args: Any, **kwargs: Any) -> Batch:
        batch = build(*args, **kwargs)
        made.append(batch)
        return batch

    Batch.build = staticmethod(watched)  # type: ignore[method-assign]
    try:
        yield made
    finally:
        Batch.build = original  # type: ignore[method-assign]


def test_cspa_one_shot_as_the_reference() -> None:
    """CSPA over 300 variables, one-shot: the same aliases on and off."""
    db = cspa_database(300)
    with _watched() as made:
        found = answered(db, ["valueAlias(x, y)"], True, narrow_values_from=64)[0]
    assert found == answered(db, ["valueAlias(x, y)"], False)[0] and len(found) > 10_000
    assert any(b.narrowed for b in made)
