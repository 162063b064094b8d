"""bench_history measures what it says on a short stream (its figures are not asserted)."""

from __future__ import annotations

from bench.bench_history import rows_of, run_one


def test_one_setting_reports_the_state_trace_and_reads_only_kept_epochs() -> None:
    result = run_one("triangles", history=3, updates=5)
    assert result["commits"] == 10
    assert result["edges"] <= result["kept_updates"] <= result["edges"] + 20
    assert result["kept_bytes"] > 0 and "as_of_1_s" in result and "as_of_500_s" not in result
    assert str(rows_of([result])[0][-1]).endswith("/ - / -")
