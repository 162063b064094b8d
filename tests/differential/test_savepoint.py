"""Savepoints (docs/adr/0052): a key set rolls back exactly, through a resize of its
table, and an engine's hypothetical epoch leaves its next real epoch's outputs as
they would have been."""

from __future__ import annotations

import numpy as np
import pytest

from differential.engine import Engine
from differential.hypothetical import outputs
from differential.inputs import Requests
from differential.operators.reduce import ReduceOp, distinct
from differential.trace.batch import key_hash
from differential.trace.keyset import KeySet


def keys(lo: int, hi: int, width: int) -> tuple[np.ndarray, ...]:
    base = np.arange(lo, hi, dtype=np.int64)
    return tuple(base * (j + 1) for j in range(width))


@pytest.mark.parametrize("width", [1, 2])
@pytest.mark.parametrize("more", [3, 5000])  # 5000: the table grows (a new table)
def test_a_key_set_rolled_back_is_the_set_it_was(width: int, more: int) -> None:
    identity = width == 1
    held = KeySet([np.dtype(np.int64)] * width, identity)
    old = keys(0, 700, width)
    held.admit(key_hash(old), old)
    mark = held.mark()
    new = keys(700, 700 + more, width)
    held.admit(key_hash(new), new)
    held.rollback(mark, key_hash(held.added_since(mark)))
    assert len(held) == 700
    assert held.contains(key_hash(old), old).all()
    assert not held.contains(key_hash(new), new).any()
    assert held.admit(key_hash(new), new).tolist() == list(range(more))  # all new again


def test_a_rolled_back_key_set_compares_packed_hashes_alone_again() -> None:
    """A key that cannot be packed into its hash (a negative value) turns off
    hash-only comparison; forgetting it turns it back on."""
    held = KeySet([np.dtype(np.int64)] * 2, False)
    old = keys(0, 100, 2)
    held.admit(key_hash(old), old)
    assert held.packed
    mark = held.mark()
    odd = (np.array([-5], dtype=np.int64), np.array([7], dtype=np.int64))
    held.admit(key_hash(odd), odd)
    assert not held.packed
    held.rollback(mark, key_hash(held.added_since(mark)))
    assert held.packed and held.contains(key_hash(old), old).all()
    assert not held.contains(key_hash(odd), odd).any()


def test_an_engine_epoch_after_a_hypothetical_is_the_one_it_would_have_been() -> None:
    def built() -> tuple[Engine, list[np.ndarray]]:
        engine = Engine()
        engine.create_input("x", [np.dtype(np.int64)])
        df = engine.dataflow("d")
        arranged = df.import_input("x", [0], 1)
        out = df.capture(ReduceOp(arranged, distinct, [], "distinct").output, "out")
        seen: list[np.ndarray] = []
        out.listeners.append(lambda u, _e: seen.append(np.sort(u.columns[0] * u.diffs)))
        engine.start(df)
        return engine, seen

    def rows(values: range, inserting: bool = True) -> dict[str, Requests]:
        column = np.array(list(values), dtype=np.int64)
        return {"x": Requests((column,), np.full(len(column), inserting))}

    asking, asked = built()
    quiet, told = built()
    for engine in (asking, quiet):
        engine.commit(rows(range(10)))
    found = outputs(asking, rows(range(5, 3000)))  # grows the distinct's key set
    assert sorted(found[0][1].columns[0].tolist()) == list(range(10, 3000))
    outputs(asking, rows(range(3), inserting=False))  # ends its growing steps
    for engine in (asking, quiet):
        engine.commit(rows(range(8, 12)))
        engine.commit(rows(range(2), inserting=False))
    assert asking.epoch == quiet.epoch
    assert [a.tolist() for a in asked] == [t.tolist() for t in told]
