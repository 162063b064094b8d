"""Every `Tuning` preset is a twin of the default: the same answers as the reference
evaluator after every commit (ADR 0049), and `tuned` restores what it replaced."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from differential.tuning import TUNING, Tuning, tuned
from tests.budget import examples
from tests.datalog.test_engine_vs_reference import check_against_reference

PRESETS = {
    "columns_only": Tuning.columns_only(),
    "rows_first": Tuning.rows_first(),
    "small_parts": Tuning.small_parts(),
}


@pytest.mark.parametrize("preset", sorted(PRESETS))
@settings(
    max_examples=examples(25),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_each_preset_gives_the_reference_answers(preset: str, data: st.DataObject) -> None:
    with tuned(PRESETS[preset]):
        assert PRESETS[preset] == TUNING
        check_against_reference(data)


def test_tuned_restores_the_tuning_in_force_even_when_the_block_raises() -> None:
    before = dataclasses.replace(TUNING)
    with pytest.raises(KeyError), tuned(TUNING.but(few=0)), tuned(TUNING.but(pairs=2)):
        assert (TUNING.few, TUNING.pairs) == (0, 2)
        raise KeyError("out")
    assert TUNING == before == Tuning.default()


def test_but_changes_only_the_named_fields_and_refuses_unknown_ones() -> None:
    moved = Tuning.default().but(sort_part=3)
    assert moved.sort_part == 3
    assert dataclasses.replace(moved, sort_part=Tuning().sort_part) == Tuning.default()
    with pytest.raises(TypeError):
        Tuning.default().but(no_such_threshold=1)
