"""A key set's table of positions and its narrow counts answer as the reference (ADR 0082).

`Tuning.keyset_positions`: the table holds each key's stored position only and reads
its hash from the store (`trace.table.PositionTable`); off, `HashTable` holds hash and
position (the reference). `Tuning.narrow_counts`: counts of int32, widened to int64
before one could overflow; off, int64. Both on and both off must give the same
answers as a Python model through admits (vectorized and key by key), membership,
counts, `keys_from`, `rows`, `counted`, growth from a tiny first table, marks and
rollbacks, for keys that pack, keys that do not (arriving at any point), hashes that
collide (overflow keys), one-column keys of int64 (the free-slot
marker among them), int32 and uint64.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from differential.trace.batch import key_hash
from differential.trace.index import EMPTY, HashTable
from differential.trace.keyset import KeySet
from differential.trace.table import PositionTable
from differential.tuning import TUNING, tuned
from tests.budget import examples

Row = tuple[int, ...]
Hasher = Callable[[list[np.ndarray]], np.ndarray]


def colliding(cols: list[np.ndarray]) -> np.ndarray:
    """Hashes that many keys share; the key set's own hash while it runs (a table built
    again hashes its stored keys). (Not the free-slot marker: `HashTable.find` of it
    reads a free slot's value, which only an identity set, comparing no columns,
    may ignore; `key_hash` gives it to one-column keys only.)"""
    a, b = (c.astype(np.int64) for c in cols)
    return (a + b) % 11 * 1_000_003


# Each kind of key set: its columns' dtypes, whether identity, its hash, and its values.
PAIR = st.integers(0, 40) | st.sampled_from([-1, -7, 1 << 40])
KINDS: dict[str, tuple[list[Any], bool, Hasher, st.SearchStrategy[int]]] = {
    "pairs": ([np.int64] * 2, False, key_hash, PAIR),
    "pairs32": ([np.int32] * 2, False, key_hash, st.integers(0, 40) | st.just(-3)),
    "colliding": ([np.int64] * 2, False, colliding, st.integers(0, 12)),
    "one64": ([np.int64], True, key_hash, st.integers(-50, 50) | st.just(-(1 << 63))),
    "one32": ([np.int32], True, key_hash, st.integers(-(1 << 31), (1 << 31) - 1)),
    "oneu64": ([np.uint64], True, key_hash, st.integers(0, 60) | st.just((1 << 64) - 5)),
}
OPS = st.sampled_from(["admit", "admit", "count", "mark", "rollback", "absent"])


@st.composite
def scripts(draw: st.DrawFn) -> tuple[str, list[tuple[str, list[Row], list[int]]]]:
    kind = draw(st.sampled_from(sorted(KINDS)))
    dtypes, _, _, values = KINDS[kind]
    key = st.tuples(*[values] * len(dtypes))
    steps = []
    for _ in range(draw(st.integers(1, 14))):
        rows = draw(st.lists(key, max_size=60))
        diffs = draw(st.lists(st.sampled_from([1, 1, 2, -1, 1 << 29]), min_size=len(rows),
                              max_size=len(rows)))  # fmt: skip
        steps.append((draw(OPS), rows, diffs))
    return kind, steps


def run(kind: str, steps: list[tuple[str, list[Row], list[int]]]) -> list[Any]:
    """Every answer of a key set taken through `steps`, checked against a model."""
    hasher = KINDS[kind][2]
    hashing = mock.patch("differential.trace.keyset.key_hash", hasher)
    with hashing if hasher is colliding else nullcontext():
        return _run(kind, steps)


def _run(kind: str, steps: list[tuple[str, list[Row], list[int]]]) -> list[Any]:
    dtypes, identity, hasher, _ = KINDS[kind]
    seen = KeySet([np.dtype(d) for d in dtypes], identity=identity)
    seen.count_inputs()
    model: set[Row] = set()
    counts: dict[Row, int] = {}
    marks: list[Any] = []
    out: list[Any] = []
    for op, rows, diffs in steps:
        cols = [np.array([r[i] for r in rows], dtype=d) for i, d in enumerate(dtypes)]
        hashes = hasher(cols)
        if op == "admit":
            added = sorted(rows[i] for i in seen.admit(hashes, cols).tolist())
            assert added == sorted({r for r in rows if r not in model})
            model |= set(rows)
            out.append(added)
        elif op == "absent" and identity:  # distinct keys not held (fused rounds' `grown`)
            fresh = sorted({r for r in rows if r not in model})
            fcols = [np.array([r[0] for r in fresh], dtype=dtypes[0])]
            seen.admit_absent(hasher(fcols), fcols)
            model |= set(fresh)
        elif op == "count":
            absent = seen.count(hashes, cols, np.array(diffs, dtype=np.int64)).tolist()
            assert [rows[i] for i in absent] == [r for r in rows if r not in model]
            for r, d in zip(rows, diffs, strict=True):
                if r in model:
                    counts[r] = counts.get(r, 0) + d
        elif op == "mark":
            marks.append((seen.mark(), set(model), dict(counts)))
        elif op == "rollback" and marks:
            mark, model, counts = marks.pop()
            seen.rollback(mark, hasher(list(seen.added_since(mark))))
            marks.clear()
        assert seen.contains(hashes, cols).tolist() == [r in model for r in rows]
        assert all(seen.holds(int(h), r) == (r in model) for h, r in zip(hashes, rows, strict=True))
        assert seen.rows(100_000) == model and len(seen) == len(model)
        kept, found = seen.counted()
        keys = list(zip(*(k.tolist() for k in kept), strict=True)) if len(found) else []
        assert dict(zip(keys, found.tolist(), strict=True)) == {
            r: n for r, n in counts.items() if n
        }
        assert found.dtype == np.int64
        assert all(k.dtype == np.dtype(d) for k, d in zip(kept, dtypes, strict=True))
        every, _ = seen.keys_from(0, set())
        out.append(sorted(zip(*(c.tolist() for c in every), strict=True)))
    return out


@settings(max_examples=examples(250), deadline=None)
@given(scripts(), st.sampled_from([0, 1_000]), st.sampled_from([0, 32]), st.sampled_from([2, 1.25]))
def test_a_table_of_positions_answers_as_the_reference_and_a_python_set(
    script: tuple[str, list[tuple[str, list[Row], list[int]]]], few: int, tail: int, load: float
) -> None:
    kind, steps = script
    small = TUNING.but(few=few, probe_tail=tail, keyset_load=load, keyset_start=4, index_chunk=16)
    with tuned(small.but(keyset_positions=True, narrow_counts=True)):
        new = run(kind, steps)
    with tuned(small.but(keyset_positions=False, narrow_counts=False)):
        assert run(kind, steps) == new


@pytest.mark.parametrize("positions", [True, False])
def test_a_table_of_positions_takes_4_bytes_a_slot_and_counts_4_a_key(positions: bool) -> None:
    rng = np.random.default_rng(3)
    with tuned(TUNING.but(keyset_positions=positions, narrow_counts=positions)):
        seen = KeySet([np.dtype(np.int64)] * 2, identity=False)
        seen.count_inputs()
        for _ in range(6):  # through several growths
            cols = [rng.integers(0, 1_000, 5_000) for _ in range(2)]
            seen.admit(key_hash(cols), cols)
            seen.count(key_hash(cols), cols, np.ones(5_000, dtype=np.int64))
        slots = len(seen.table.arrays()[0])
        table = sum(a.nbytes for a in seen.table.arrays())
        assert table == slots * (4 if positions else 12)
        assert seen.counts is not None and seen.counts.itemsize == (4 if positions else 8)


def test_counts_widen_to_int64_before_one_could_overflow() -> None:
    with tuned(TUNING.but(narrow_counts=True)):
        seen = KeySet([np.dtype(np.int64)], identity=True)
        seen.count_inputs()
        keys = [np.array([7, 9])]
        seen.admit(key_hash(keys), keys)
        big = np.array([(1 << 30) + 5, 1], dtype=np.int64)
        for _ in range(5):
            assert not len(seen.count(key_hash(keys), keys, big))
        _, counts = seen.counted()
        assert counts.tolist() == [5 * ((1 << 30) + 5), 5]
        assert seen.counts is not None and seen.counts.dtype == np.int64


@settings(max_examples=examples(100), deadline=None)
@given(
    st.sets(st.integers(-(1 << 62), 1 << 62), max_size=300),
    st.integers(0, 40),
    st.sampled_from([0, 32]),
)
def test_a_table_of_positions_finds_claims_fills_and_removes_as_a_hash_table(
    hashes: set[int], room: int, tail: int
) -> None:
    """`PositionTable` against `HashTable`: the same keys at the same slots after
    `claim` (with repeats), `fill` and `remove`, the same answers to `find`."""
    held = np.array(sorted(hashes), dtype=np.int64)
    rng = np.random.default_rng(len(held))
    rng.shuffle(held)
    half = len(held) // 2
    with tuned(TUNING.but(probe_tail=tail, index_chunk=8)):
        reference = HashTable(len(held) + room, 1.25)
        store = np.zeros(len(held) + room + 1, dtype=np.int64)
        table = PositionTable(len(held) + room, 1.25, store)
        reference.fill(held[:half])
        table.fill(held[:half])
        store[:half] = held[:half]
        twice = np.concatenate([held[half:], held[half:][::3]])  # repeats
        expected = reference.claim(twice, half)
        placed, placer = table.claim(twice, half)
        assert placed.tolist() == expected[0].tolist() and placer.tolist() == expected[1].tolist()
        store[half : half + len(placed)] = twice[placed]
        queries = np.concatenate([held, held + 1, np.array([EMPTY + 1], dtype=np.int64)])
        assert table.find(queries).tolist() == reference.find(queries).tolist()
        gone = held[half:]
        table.remove(gone)
        reference.remove(gone)
        assert table.size == reference.size == half
        assert table.find(queries).tolist() == reference.find(queries).tolist()
        slots_held = np.flatnonzero(table.arrays()[0] >= 0)
        assert slots_held.tolist() == np.flatnonzero(reference.arrays()[0] != EMPTY).tolist()
