"""The program-analysis bench's API child: its answer, and its traced peak when asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.bench_analysis import TRACED, api_child, prepare


def test_the_api_child_reports_the_evaluations_traced_peak_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = prepare("tc", 2_000, tmp_path)
    plain = api_child(program)
    assert "traced_mb" not in plain
    monkeypatch.setenv(TRACED, "1")
    traced = api_child(program)
    assert traced["size"] == plain["size"] > 0
    assert traced["traced_mb"] > 0
