"""The benchmark harness: percentiles, memory and tables."""

from __future__ import annotations

import pytest

from bench.common import format_table, peak_rss_mb, percentiles, stopwatch, timed


def test_percentiles_of_a_sample() -> None:
    stats = percentiles([float(v) for v in range(1, 101)])
    assert stats["p50"] == pytest.approx(50.5)
    assert stats["p99"] == pytest.approx(99.01)
    assert stats["max"] == 100.0


def test_percentiles_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        percentiles([])


def test_timed_and_stopwatch_measure_nonnegative_seconds() -> None:
    result, seconds = timed(lambda: 42)
    assert result == 42 and seconds >= 0.0
    with stopwatch() as sw:
        sum(range(1000))
    assert sw.seconds >= 0.0


def test_peak_rss_is_plausible() -> None:
    assert 1.0 < peak_rss_mb() < 1_000_000.0


def test_format_table_is_markdown_with_numbers_right_aligned() -> None:
    table = format_table([["reach", 1.23456, 1000], ["tc|x", 2.0, 7]], ["query", "s", "n"])
    assert table.splitlines() == [
        "| query |     s |     n |",
        "|-------|------:|------:|",
        "| reach | 1.235 | 1,000 |",
        "| tc\\|x |     2 |     7 |",
    ]
