"""A key set stores packed keys while every key packs (ADR 0078).

`Tuning.packed_keys`: while every key a `KeySet` of two or more integer columns holds
hashes to its columns packed side by side (`key_hash`), the set stores that one int64
per key and unpacks it where columns are read; the first key that does not pack turns
the store into columns. Off, it stores the columns (the reference). Both must agree
with a Python model through admits (vectorized and key by key), membership, counts,
`keys_from`, `rows`, `counted`, growth and rollback, with keys that do not pack
arriving at any point; on, a set of packable keys holds one int64 per key.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from differential.trace.batch import key_hash
from differential.trace.keyset import KeySet
from differential.tuning import TUNING, tuned
from tests.budget import examples

# Small non-negative values pack; a negative or a huge one does not.
VALUE = st.integers(0, 40) | st.sampled_from([-1, -7, 1 << 40])
KEYS = st.lists(st.tuples(VALUE, VALUE), max_size=50)
STEP = st.tuples(st.sampled_from(["admit", "count", "mark", "rollback"]), KEYS)


def columns(rows: list[tuple[int, int]], dtype: Any) -> list[np.ndarray]:
    return [np.array([r[i] for r in rows], dtype=dtype) for i in range(2)]


def run(steps: list[tuple[str, list[tuple[int, int]]]], dtype: Any) -> list[Any]:
    """Every answer of a key set taken through `steps`, checked against a model."""
    seen = KeySet([np.dtype(dtype)] * 2, identity=False)
    seen.count_inputs()
    model: set[tuple[int, int]] = set()
    counts: dict[tuple[int, int], int] = {}
    marks: list[Any] = []
    out: list[Any] = []
    for op, rows in steps:
        cols = columns(rows, dtype)
        hashes = key_hash(cols)
        if op == "admit":
            added = sorted(rows[i] for i in seen.admit(hashes, cols).tolist())
            assert added == sorted({r for r in rows if r not in model})
            model |= set(rows)
            out.append(added)
        elif op == "count":
            absent = seen.count(hashes, cols, np.ones(len(rows), dtype=np.int64)).tolist()
            assert [rows[i] for i in absent] == [r for r in rows if r not in model]
            for r in rows:
                if r in model:
                    counts[r] = counts.get(r, 0) + 1
        elif op == "mark":
            marks.append((seen.mark(), set(model), dict(counts)))
        elif marks:
            mark, model, counts = marks.pop()
            seen.rollback(mark, key_hash(seen.added_since(mark)))
            marks.clear()
        assert seen.contains(hashes, cols).tolist() == [r in model for r in rows]
        assert all(seen.holds(int(h), r) == (r in model) for h, r in zip(hashes, rows, strict=True))
        assert seen.rows(10_000) == model
        kept, found = seen.counted()
        keys = list(zip(*(k.tolist() for k in kept), strict=True)) if len(found) else []
        assert dict(zip(keys, found.tolist(), strict=True)) == {
            r: n for r, n in counts.items() if n
        }
        assert all(k.dtype == np.dtype(dtype) for k in kept)
        every, _ = seen.keys_from(0, set())
        out.append(sorted(zip(*(c.tolist() for c in every), strict=True)))
    return out


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(STEP, max_size=12), st.sampled_from([0, 1_000]), st.sampled_from(["int64", "int32"])
)
def test_a_packed_store_answers_as_columns_and_a_python_set(
    steps: list[tuple[str, list[tuple[int, int]]]], few: int, dtype: str
) -> None:
    if dtype == "int32":  # (a key of int32 columns holds no value of 41 bits)
        steps = [(op, [(a % (1 << 30), b % (1 << 30)) for a, b in rows]) for op, rows in steps]
    with tuned(TUNING.but(few=few, packed_keys=True)):
        packed = run(steps, dtype)
    with tuned(TUNING.but(few=few, packed_keys=False)):
        assert run(steps, dtype) == packed


@pytest.mark.parametrize("packed", [True, False])
def test_a_set_of_packable_keys_stores_one_int64_a_key_until_one_does_not_pack(
    packed: bool,
) -> None:
    rng = np.random.default_rng(5)
    with tuned(TUNING.but(packed_keys=packed)):
        seen = KeySet([np.dtype(np.int64)] * 2, identity=False)
        for _ in range(5):  # through several growths
            cols = [rng.integers(0, 1_000, 4_000) for _ in range(2)]
            seen.admit(key_hash(cols), cols)
        stored = seen.mark().store
        assert len(stored) == (1 if packed else 2)
        odd = [np.array([-1, 3]), np.array([2, 1 << 40])]
        seen.admit(key_hash(odd), odd)
        assert len(seen.mark().store) == 2  # columns from the first that does not pack
        assert seen.contains(key_hash(odd), odd).all()
        assert seen.contains(key_hash(cols), cols).all()
