"""The benchmark suite's report: markdown tables, a JSON dump and PNG plots.

Layer: bench — may import anything public from deltalog packages and peers.
`write_report` writes `results.md`, `results.json`, `initial_time.png`,
`peak_memory.png` and `update_latency.png` into the output directory, and, when
`docs/benchmarks.md` (the directory's name plus `.md`) has the markers
`<!-- results:begin -->` / `<!-- results:end -->`, puts `results.md` between them.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import format_table
from bench.peers.base import unavailable, version

if TYPE_CHECKING:
    from bench.suite import Run

__all__ = ["machine", "write_report"]

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def machine() -> str:
    """Cores, memory, OS and Python of this machine, in one line."""
    mem = "?"
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            kib = int(info.readline().split()[1])
        mem = f"{kib / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (
        f"{os.cpu_count()} cores, {mem} RAM, {platform.system()} {platform.machine()}, "
        f"Python {sys.version.split()[0]}"
    )


def _peers(systems: Sequence[str]) -> str:
    rows = []
    for spec in systems:
        why = unavailable(spec)
        rows.append([spec.partition("=")[0], version(spec) if why is None else "-", why or "ok"])
    return format_table(rows, ["system", "version", "status"])


def _num(run: Run, key: str) -> object:
    value = run.data.get(key)
    return "" if value is None else value


def _answer(run: Run, size: str = "answer", digest: str = "digest") -> str:
    """`1,234`, or `100 #4823c5` with the first hex digits of the row digest."""
    if size not in run.data:
        return ""
    text = f"{int(run.data[size]):,}"
    return f"{text} #{run.data[digest][:6]}" if digest in run.data else text


def _initial(runs: Sequence[Run]) -> str:
    rows = [
        [
            r.workload,
            r.dataset,
            r.system,
            r.status,
            _answer(r),
            _num(r, "load_s"),
            _num(r, "run_s"),
            round(r.peak_mb) if r.peak_mb else "",
        ]
        for r in runs
        if r.mode == "initial" and not r.status.startswith("unavailable")
    ]
    headers = ["workload", "dataset", "system", "status", "answer", "load s", "query s", "peak MiB"]
    return format_table(rows, headers) if rows else "(none)"


def _updates(runs: Sequence[Run]) -> str:
    rows = []
    for r in runs:
        if r.mode == "initial":
            continue
        n, size = int(r.data.get("updates", 0)), int(r.data.get("update_rows", 0))
        label = f"{r.mode}: {n} changes of {size // max(1, n // 2)} rows" if n else r.mode
        answers = f"{_answer(r, 'mid', 'mid_digest')} / {_answer(r)}" if "mid" in r.data else ""
        rows.append(
            [
                r.workload,
                r.dataset,
                r.system,
                label,
                r.status,
                answers,
                _num(r, "p50_ms"),
                _num(r, "p99_ms"),
                _num(r, "max_ms"),
                round(r.peak_mb) if r.peak_mb else "",
            ]
        )
    headers = ["workload", "dataset", "system", "updates", "status", "answer mid / end",
               "p50 ms", "p99 ms", "max ms", "peak MiB"]  # fmt: skip
    return format_table(rows, headers) if rows else "(none)"


def _markdown(
    runs: Sequence[Run], systems: Sequence[str], elapsed: float, problems: list[str]
) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M %Z")
    parts = [
        f"Generated {stamp} by `python -m bench.suite {' '.join(sys.argv[1:])}` "
        f"in {elapsed / 60:.1f} min on {machine()}.",
        "### Systems\n\n" + _peers(systems) + "\n\nUnavailable systems are left out below.",
        "### Initial evaluation\n\n" + _initial(runs),
        "### Updates: retract sampled rows, then insert them back (latency per change)\n\n"
        + _updates(runs),
    ]
    if problems:
        parts.append("### MISMATCHES\n\n" + "\n".join(f"- {p}" for p in problems))
    else:
        parts.append(
            "All systems that finished agree on every answer size and, where shown"
            " (`#` and the first hex digits), on the digest of the answer rows."
        )
    return "\n\n".join(parts) + "\n"


def write_report(
    runs: Sequence[Run], out: Path, systems: Sequence[str], elapsed: float, problems: list[str]
) -> None:
    """Write the tables, the JSON dump and the plots (see the module)."""
    out.mkdir(parents=True, exist_ok=True)
    text = _markdown(runs, systems, elapsed, problems)
    (out / "results.md").write_text(text, encoding="utf-8")
    dump: list[dict[str, Any]] = [asdict(r) for r in runs]
    (out / "results.json").write_text(json.dumps(dump, indent=1) + "\n", encoding="utf-8")
    _plots(runs, out)
    doc = out.with_suffix(".md")
    if doc.exists():
        body = doc.read_text(encoding="utf-8")
        if BEGIN in body and END in body:
            head, rest = body.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            doc.write_text(f"{head}{BEGIN}\n{text}{END}{tail}", encoding="utf-8")


def _plots(runs: Sequence[Run], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    ok = [r for r in runs if r.status == "ok"]
    first = [r for r in ok if r.mode == "initial"]
    _bars(first, lambda r: float(r.data["run_s"]), "query seconds (log)", out / "initial_time.png")
    _bars(first, lambda r: r.peak_mb, "peak RSS MiB of the process", out / "peak_memory.png")
    for mode in ("single", "batch"):
        picked = [r for r in ok if r.mode == mode]
        _bars(picked, lambda r: float(r.data["p50_ms"]), f"{mode}: p50 ms per change (log)",
              out / f"update_latency_{mode}.png")  # fmt: skip


def _bars(runs: Sequence[Run], value: Any, label: str, path: Path) -> None:
    """Grouped horizontal bars: one group per (workload, dataset), one bar per system."""
    import matplotlib.pyplot as plt

    if not runs:
        return
    cases = list(dict.fromkeys((r.workload, r.dataset) for r in runs))
    systems = list(dict.fromkeys(r.system for r in runs))
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.22 * max(1, len(cases)) * max(1, len(systems))))
    height = 0.8 / max(1, len(systems))
    for j, system in enumerate(systems):
        ys, xs = [], []
        for i, case in enumerate(cases):
            for r in runs:
                if (r.workload, r.dataset) == case and r.system == system:
                    ys.append(i + j * height)
                    xs.append(max(float(value(r)), 1e-4))
        ax.barh(ys, xs, height=height, label=system)
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(cases))])
    ax.set_yticklabels([f"{w}\n{d}" for w, d in cases], fontsize=7)
    ax.invert_yaxis()
    if "log" in label:
        ax.set_xscale("log")
    ax.set_xlabel(label)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
