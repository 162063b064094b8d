"""The benchmark suite's report: markdown tables, a JSON dump and PNG plots.

Layer: bench — may import anything public from deltalog packages and peers.
`write_report` writes `results.md`, `results.json` and the plots (`bench.plots`:
`initial_time.png`, `peak_memory.png`, `update_latency_{single,batch}.png`) into
the output directory, and, when
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
from bench.plots import write_plots

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
    write_plots(runs, out)
    doc = out.with_suffix(".md")
    if doc.exists():
        body = doc.read_text(encoding="utf-8")
        if BEGIN in body and END in body:
            head, rest = body.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            doc.write_text(f"{head}{BEGIN}\n{text}{END}{tail}", encoding="utf-8")
