"""The symbol table: stable ids in first-seen order, vectorized interning."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from datalog.eval.symbols import SymbolTable


def test_ids_are_assigned_in_first_seen_order_within_a_batch() -> None:
    table = SymbolTable()
    ids = table.intern_many(["b", "a", "b", "c", "a"])
    assert ids.tolist() == [0, 1, 0, 2, 1]
    assert ids.dtype == np.int64
    assert table.to_list() == ["b", "a", "c"]


def test_ids_are_stable_across_calls() -> None:
    table = SymbolTable()
    assert table.intern("x") == 0
    assert table.intern_many(np.array(["y", "x"])).tolist() == [1, 0]
    assert table.intern("y") == 1
    assert len(table) == 2


def test_strings_inverts_intern_many() -> None:
    table = SymbolTable()
    words = [f"w{i % 37}" for i in range(100)]  # forces the backing array to grow
    ids = table.intern_many(words)
    assert table.strings(ids).tolist() == words
    assert table.string(int(ids[5])) == words[5]


def test_empty_batch_gives_empty_ids() -> None:
    table = SymbolTable()
    assert table.intern_many([]).shape == (0,)
    assert table.strings(np.empty(0, dtype=np.int64)).shape == (0,)


def test_unknown_ids_are_rejected() -> None:
    table = SymbolTable()
    table.intern("a")
    with pytest.raises(KeyError):
        table.string(1)
    with pytest.raises(KeyError):
        table.strings(np.array([0, 5]))


def test_non_strings_are_rejected() -> None:
    with pytest.raises(TypeError):
        SymbolTable().intern(3)  # type: ignore[arg-type]


def test_get_does_not_intern() -> None:
    table = SymbolTable()
    assert table.get("a") is None
    assert len(table) == 0


def test_persisted_list_round_trips() -> None:
    table = SymbolTable()
    table.intern_many(["q", "p", "é", ""])
    restored = SymbolTable.from_list(table.to_list())
    assert restored.to_list() == table.to_list()
    assert restored.intern("p") == table.intern("p")
    with pytest.raises(ValueError, match="duplicate"):
        SymbolTable.from_list(["a", "a"])


@given(st.lists(st.lists(st.text(max_size=4), max_size=12), max_size=5))
def test_batches_agree_with_one_at_a_time_interning(batches: list[list[str]]) -> None:
    vectorized, scalar = SymbolTable(), SymbolTable()
    for batch in batches:
        ids = vectorized.intern_many(batch)
        assert ids.tolist() == [scalar.intern(s) for s in batch]
    assert vectorized.to_list() == scalar.to_list()
