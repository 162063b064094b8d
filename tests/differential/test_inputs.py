"""Input semantics: set, multiset and last_write_wins, against Python models.

Each commit's diffs are observed through a dataflow that reads the input's shared
arrangement, and the input's accumulated state is compared with the model.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from differential.engine import Engine
from differential.inputs import Semantics
from differential.tuning import TUNING, tuned
from tests.differential.harness import I64, Accumulated, Op, Row, collection, counter, requests
from tests.differential.strategies import ops

Stream = list[list[Op]]


class Observed:
    """An engine with one binary input `r` and a dataflow delivering its changes."""

    def __init__(self, semantics: Semantics) -> None:
        self.engine = Engine()
        self.input = self.engine.create_input("r", [I64, I64], semantics)
        df = self.engine.dataflow("observe")
        self.acc = Accumulated(df.capture(collection(df, "r", 2).output, "r"))
        self.changes: list[dict[Row, int]] = []
        self.acc_listener = df.outputs["r"].listeners
        self.acc_listener.append(lambda u, _: self.changes.append(dict(counter(u))))
        self.engine.start(df)

    def commit(self, txn: list[Op]) -> dict[Row, int]:
        self.engine.commit({"r": requests(txn, 2)})
        return self.changes[-1]

    def state(self) -> dict[Row, int]:
        return dict(counter(self.input.presence.spine.accumulate(None)))


def set_model(state: set[Row], txn: list[Op]) -> set[Row]:
    new = set(state)
    for inserting, row in txn:
        (new.add if inserting else new.discard)(row)
    return new


def lww_model(state: dict[int, int], txn: list[Op]) -> dict[int, int]:
    new = dict(state)
    for inserting, (entity, value) in txn:
        if inserting:
            new[entity] = value
        elif new.get(entity) == value:
            del new[entity]
    return new


def diff(before: dict[Row, int], after: dict[Row, int]) -> dict[Row, int]:
    out = Counter(after)
    out.subtract(before)
    return {k: v for k, v in out.items() if v}


STREAMS = st.lists(ops(2, 3, max_size=8), min_size=1, max_size=6)


@pytest.mark.parametrize("few", [0, 1_000], ids=["vectorized", "row-by-row"])
@given(stream=STREAMS)
def test_set_semantics_commit_exactly_the_change_of_the_set(few: int, stream: Stream) -> None:
    note(f"stream: {stream}")
    with tuned(TUNING.but(few=few)):
        obs, model = Observed("set"), set[Row]()
        for txn in stream:
            after = set_model(model, txn)
            assert obs.commit(txn) == diff(dict.fromkeys(model, 1), dict.fromkeys(after, 1))
            model = after
            assert obs.state() == dict.fromkeys(model, 1) == obs.acc.rows()


def test_set_reinsert_and_retract_of_absent_rows_are_no_ops() -> None:
    obs = Observed("set")
    assert obs.commit([(True, (1, 1))]) == {(1, 1): 1}
    assert obs.commit([(True, (1, 1)), (False, (2, 2))]) == {}
    assert obs.state() == {(1, 1): 1}


def test_set_last_request_on_a_row_wins_inside_a_transaction() -> None:
    obs = Observed("set")
    assert obs.commit([(True, (1, 1)), (False, (1, 1)), (True, (2, 2)), (False, (2, 2))]) == {}
    assert obs.commit([(False, (3, 3)), (True, (3, 3))]) == {(3, 3): 1}
    assert obs.commit([(False, (3, 3)), (True, (3, 3)), (False, (3, 3))]) == {(3, 3): -1}
    assert obs.state() == {}


@given(STREAMS)
def test_multiset_counts_step_in_request_order_and_never_go_below_zero(stream: Stream) -> None:
    note(f"stream: {stream}")
    obs, model = Observed("multiset"), Counter[Row]()
    for txn in stream:
        before = Counter(model)
        for inserting, row in txn:  # retracting a copy that is not there does nothing
            model[row] = model[row] + 1 if inserting else max(model[row] - 1, 0)
        change = {row: model[row] - before[row] for row in set(model) | set(before)}
        assert obs.commit(txn) == {k: v for k, v in change.items() if v}
        assert obs.state() == {k: v for k, v in model.items() if v}


def test_retracting_an_absent_multiset_copy_does_not_make_a_later_insert_vanish() -> None:
    obs = Observed("multiset")
    assert obs.commit([(False, (1, 1))]) == {}
    assert obs.commit([(True, (1, 1))]) == {(1, 1): 1}
    assert obs.commit([(True, (2, 2)), (False, (2, 2)), (False, (2, 2)), (True, (2, 2))]) == {
        (2, 2): 1
    }


@given(STREAMS)
def test_last_write_wins_keeps_one_value_per_entity(stream: Stream) -> None:
    note(f"stream: {stream}")
    obs, model = Observed("last_write_wins"), dict[int, int]()
    for txn in stream:
        after = lww_model(model, txn)
        before_rows: dict[Row, int] = dict.fromkeys(model.items(), 1)
        after_rows: dict[Row, int] = dict.fromkeys(after.items(), 1)
        assert obs.commit(txn) == diff(before_rows, after_rows), f"from {model}"
        model = after
        assert obs.state() == after_rows


def test_last_write_wins_retracting_a_value_not_held_is_a_no_op() -> None:
    obs = Observed("last_write_wins")
    obs.commit([(True, (1, 10))])
    assert obs.commit([(False, (1, 11)), (False, (2, 10))]) == {}
    assert obs.state() == {(1, 10): 1}


def test_last_write_wins_several_writes_to_one_entity_in_one_transaction() -> None:
    obs = Observed("last_write_wins")
    obs.commit([(True, (1, 10))])
    assert obs.commit([(True, (1, 11)), (True, (1, 12)), (True, (2, 5))]) == {
        (1, 10): -1,
        (1, 12): 1,
        (2, 5): 1,
    }
    # write then retract the written value: the entity ends with no value
    assert obs.commit([(True, (1, 13)), (False, (1, 13))]) == {(1, 12): -1}
    # retract the held value, then a value never held: still retracted
    assert obs.commit([(False, (2, 5)), (False, (2, 6))]) == {(2, 5): -1}
    assert obs.state() == {}


def test_last_write_wins_needs_a_binary_relation() -> None:
    eng = Engine()
    try:
        eng.create_input("r", [I64], "last_write_wins")
    except ValueError as err:
        assert "binary" in str(err)
    else:
        raise AssertionError("a unary last_write_wins input was accepted")


def test_requests_on_float_columns_keep_their_dtype() -> None:
    eng = Engine()
    inp = eng.create_input("f", [np.dtype(np.float64)])
    from differential.inputs import Requests

    eng.commit({"f": Requests((np.array([0.5, 0.5, 1.5]),), np.array([True, True, False]))})
    state = inp.presence.spine.accumulate(None)
    assert state.columns[0].dtype == np.float64 and state.rows() == [(0.5, (0,), 1)]
