"""A tiny benchmark harness: timing, percentiles, memory and markdown tables.

Layer: bench — may import anything public from deltalog packages and peers.
Benchmarks report numbers; they never assert times.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

T = TypeVar("T")

# The shared datasets: `../shared/data` beside the repository, or $DELTALOG_DATA.
# README "Benchmarks" says where to get them when they are not there.
DATA_DIR = Path(
    os.environ.get("DELTALOG_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)

__all__ = [
    "DATA_DIR",
    "Stopwatch",
    "format_table",
    "peak_rss_mb",
    "percentiles",
    "print_table",
    "stopwatch",
    "timed",
]


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """Call `fn()` once; return its result and the wall-clock seconds it took."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


@dataclass
class Stopwatch:
    """Seconds measured by `stopwatch()`; valid once the `with` block has ended."""

    seconds: float = 0.0


@contextmanager
def stopwatch() -> Iterator[Stopwatch]:
    """Time a `with` block: `with stopwatch() as sw: ...; print(sw.seconds)`."""
    sw = Stopwatch()
    start = time.perf_counter()
    try:
        yield sw
    finally:
        sw.seconds = time.perf_counter() - start


def percentiles(samples: Sequence[float] | np.ndarray) -> dict[str, float]:
    """The p50, p99 and max of `samples` (e.g. per-transaction latencies)."""
    values = np.asarray(samples, dtype=np.float64)
    if values.size == 0:
        raise ValueError("percentiles of an empty sample")
    p50, p99 = np.percentile(values, [50.0, 99.0])
    return {"p50": float(p50), "p99": float(p99), "max": float(values.max())}


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS reports bytes.
    per_mib = 1024 * 1024 if sys.platform == "darwin" else 1024
    return peak / per_mib


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    return str(value).replace("|", "\\|")


def format_table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> str:
    """A markdown table; numbers are right-aligned, floats shown to 4 significant digits."""
    cells = [[_cell(v) for v in row] for row in rows]
    if any(len(row) != len(headers) for row in cells):
        raise ValueError("every row needs one cell per header")
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    numeric = [all(_is_number(row[i]) for row in rows) and bool(rows) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        padded = (
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        )
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if n else ("-" * (w + 2))
            for w, n in zip(widths, numeric, strict=True)
        )
        + "|"
    )
    return "\n".join([line(headers), rule, *(line(r) for r in cells)])


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def print_table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> None:
    """Print `format_table(rows, headers)` followed by a blank line."""
    print(format_table(rows, headers), end="\n\n")
