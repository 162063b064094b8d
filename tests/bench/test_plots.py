"""Benchmark plots: titled, both axes labelled, and a run that did not finish is drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.plots import PLOTS, Plot, figure, write_plots
from bench.suite import Run

plt = pytest.importorskip("matplotlib.pyplot")


def _axes(runs: list[Run], plot: Plot) -> Any:
    fig = figure(runs, plot)
    plt.close(fig)
    return fig.axes[0]


def _runs() -> list[Run]:
    return [
        Run("reach", "dag-100", "deltalog", "initial", data={"run_s": 0.02}, peak_mb=80),
        Run("reach", "dag-100", "duckdb", "initial", data={"run_s": 0.5}, peak_mb=120),
        Run("reach", "dag-100", "pyDatalog", "initial", status="timeout", peak_mb=900),
        Run("tc", "dag-100", "deltalog", "initial", data={"run_s": 0.3}, peak_mb=90),
        Run("tc", "dag-100", "duckdb", "initial", status="skipped: 50,000 facts > its limit"),
        Run("tc", "dag-100", "pyDatalog", "initial", status="error: KeyError 'x'"),
        Run("tc", "dag-100", "kuzu", "initial", status="unavailable: `kuzu` not installed"),
        Run("reach", "dag-100", "deltalog", "single", data={"p50_ms": 1.5}),
    ]


def test_each_plot_has_a_title_and_labelled_axes() -> None:
    initial = [r for r in _runs() if r.mode == "initial" and r.system != "kuzu"]
    for plot in (p for p in PLOTS if p.mode == "initial"):
        ax = _axes(initial, plot)
        assert ax.get_title() == plot.title and plot.title
        assert ax.get_xlabel() == plot.axis and ax.get_ylabel() == "workload, dataset"
        assert [t.get_text() for t in ax.get_yticklabels()] == ["reach\ndag-100", "tc\ndag-100"]


def test_a_run_that_did_not_finish_is_a_labelled_marker_not_a_missing_bar() -> None:
    initial = [r for r in _runs() if r.mode == "initial" and r.system != "kuzu"]
    time_plot = next(p for p in PLOTS if p.file == "initial_time.png")
    ax = _axes(initial, time_plot)
    labels = sorted(t.get_text() for t in ax.texts)
    assert labels == ["error", "skipped", "timeout"]
    assert sum(len(container) for container in ax.containers) == 3  # the finished runs
    assert [text.get_text() for text in ax.get_legend().get_texts()] == [
        "deltalog", "duckdb", "pyDatalog"]  # fmt: skip
    memory = next(p for p in PLOTS if p.file == "peak_memory.png")
    ax = _axes(initial, memory)
    assert sorted(t.get_text() for t in ax.texts) == ["error", "skipped", "timeout"]


def test_every_mode_with_runs_gets_its_file_and_unavailable_systems_are_left_out(
    tmp_path: Path,
) -> None:
    written = write_plots(_runs(), tmp_path)
    assert sorted(p.name for p in written) == [
        "initial_time.png", "peak_memory.png", "update_latency_single.png"]  # fmt: skip
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)
