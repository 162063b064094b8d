"""An engine turns numpy's huge-page advice off unless the user set it."""

from __future__ import annotations

import pytest

from differential.engine import Engine
from differential.memory import hugepage_advice, set_hugepage_advice


@pytest.fixture
def restore_advice() -> object:
    before = hugepage_advice()
    yield before
    if before is not None:
        set_hugepage_advice(before)


def test_an_engine_stops_the_advice(
    restore_advice: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    if restore_advice is None:
        pytest.skip("this numpy has no huge-page advice to turn off")
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    set_hugepage_advice(True)
    Engine()
    assert hugepage_advice() is False


def test_the_users_numpy_setting_wins(
    restore_advice: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    if restore_advice is None:
        pytest.skip("this numpy has no huge-page advice to turn off")
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    set_hugepage_advice(True)
    Engine()
    assert hugepage_advice() is True
