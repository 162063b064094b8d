"""Nested sends past `TUNING.relay_depth` wait for the outermost send
(`differential.dataflow.Relay`): the same answers at any depth, nothing of a
failed send delivered later."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from differential.batch import Updates
from differential.dataflow import Scope, Stream
from differential.tuning import TUNING, tuned
from tests.budget import examples
from tests.datalog.test_engine_vs_reference import check_against_reference


@settings(
    max_examples=examples(25),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_send_relayed_gives_the_reference_answers(data: st.DataObject) -> None:
    with tuned(TUNING.but(relay_depth=1)):  # every nested send waits for the outermost
        check_against_reference(data)


def test_what_a_failed_send_left_waiting_is_never_delivered() -> None:
    scope = Scope(1)
    a, b, c = (Stream(scope, [np.int64]) for _ in range(3))
    a.connect(b.send)  # queued for the outermost send at relay depth 1
    b.connect(c.send)
    got: list[list[int]] = []
    c.connect(lambda updates: got.append(updates.columns[0].tolist()))
    failing = [True]

    def interrupted(updates: Updates) -> None:
        if failing[0]:
            raise KeyboardInterrupt

    a.connect(interrupted)
    with tuned(TUNING.but(relay_depth=1)):
        with pytest.raises(KeyboardInterrupt):
            a.send(Updates.at([np.array([1])], (1,)))
        failing[0] = False
        a.send(Updates.at([np.array([2])], (1,)))
    assert got == [[2]]
    assert scope.relay.depth == 0 and not scope.relay.waiting
