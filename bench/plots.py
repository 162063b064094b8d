"""The benchmark suite's plots: one PNG of grouped horizontal bars per measure.

Layer: bench. Imports matplotlib (the `bench` extra) inside its functions only.

Each plot has a title, a labelled value axis (with its unit) and a labelled case
axis (workload over dataset). Every system that ran a case gets a row in it: a
bar when it finished, else a cross at the start of the axis labelled with why
(`skipped`, `timeout`, `error`), so a missing measurement is never mistaken for
a system that was not asked. Systems that are not installed are left out, as in
the tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.suite import Run

Measure = Callable[["Run"], float | None]


@dataclass(frozen=True)
class Plot:
    """One figure: which runs, what is measured, and how it is labelled."""

    mode: str
    measure: Measure
    title: str
    axis: str
    log: bool
    file: str


PLOTS = (
    Plot("initial", lambda r: _number(r.data.get("run_s")),
         "Initial evaluation: time to answer the query", "query seconds (log scale)", True,
         "initial_time.png"),
    Plot("initial", lambda r: r.peak_mb or None,
         "Initial evaluation: peak memory", "peak RSS of the process, MiB", False,
         "peak_memory.png"),
    Plot("single", lambda r: _number(r.data.get("p50_ms")),
         "Updates one row at a time: median latency per change",
         "p50 milliseconds per change (log scale)", True, "update_latency_single.png"),
    Plot("batch", lambda r: _number(r.data.get("p50_ms")),
         "Updates in batches: median latency per change",
         "p50 milliseconds per change (log scale)", True, "update_latency_batch.png"),
)  # fmt: skip


def write_plots(runs: Sequence[Run], out: Path) -> list[Path]:
    """Every plot that has runs to show, as PNG files in `out`; their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for plot in PLOTS:
        shown = [r for r in runs if r.mode == plot.mode and not r.status.startswith("unavailable")]
        if not shown:
            continue
        fig = figure(shown, plot)
        fig.savefig(out / plot.file, dpi=110)
        plt.close(fig)
        written.append(out / plot.file)
    return written


def figure(runs: Sequence[Run], plot: Plot) -> Any:
    """The matplotlib figure of `plot` over `runs` (one mode, installed systems)."""
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys((r.workload, r.dataset) for r in runs))
    systems = list(dict.fromkeys(r.system for r in runs))
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.22 * len(cases) * len(systems)))
    height = 0.8 / len(systems)
    values = [v for r in runs if r.status == "ok" and (v := plot.measure(r)) is not None]
    start = _axis_start(values, plot.log)
    for j, system in enumerate(systems):
        color = f"C{j % 10}"
        bars: list[tuple[float, float]] = []
        for i, case in enumerate(cases):
            for r in runs:
                if (r.workload, r.dataset) != case or r.system != system:
                    continue
                y, value = i + j * height, plot.measure(r) if r.status == "ok" else None
                if value is None:
                    _missing(ax, start, y, _why(r), color)
                else:
                    bars.append((y, max(value, start)))
        ax.barh([y for y, _ in bars], [x for _, x in bars], height=height, color=color,
                label=system)  # fmt: skip
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(cases))])
    ax.set_yticklabels([f"{w}\n{d}" for w, d in cases], fontsize=7)
    ax.invert_yaxis()
    if plot.log:
        ax.set_xscale("log")
    ax.set_xlim(left=start)
    ax.set_title(plot.title, fontsize=10)
    ax.set_xlabel(plot.axis)
    ax.set_ylabel("workload, dataset")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def _missing(ax: Any, start: float, y: float, why: str, color: str) -> None:
    """A cross at the start of the axis and the reason beside it."""
    ax.plot([start], [y], marker="x", color=color, markersize=5, clip_on=False)
    ax.annotate(why, (start, y), xytext=(5, 0), textcoords="offset points", fontsize=6,
                va="center", color=color)  # fmt: skip


def _why(run: Run) -> str:
    """`skipped`, `timeout`, `error` (the first word of the status), or `no data`."""
    word = run.status.split(":")[0].strip()
    return "no data" if word == "ok" else word


def _axis_start(values: Sequence[float], log: bool) -> float:
    """Where the value axis starts: a little below the least bar on a log scale."""
    if not log:
        return 0.0
    least = min((v for v in values if v > 0), default=1.0)
    return least / 3


def _number(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]
