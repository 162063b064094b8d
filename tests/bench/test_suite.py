"""The benchmark suite end to end on tiny data: cross-checks pass, and a wrong peer fails.

Layer: bench (tests). Each run starts subprocesses; the whole module takes ~15 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.suite import Run, check, main

pytest.importorskip("duckdb")
pytest.importorskip("matplotlib")


def test_quick_suite_agrees_and_writes_the_report(tmp_path: Path) -> None:
    argv = ["--quick", "--only", "triangles", "--systems", "deltalog,duckdb"]
    assert main([*argv, "--modes", "initial,single", "--out", str(tmp_path)]) == 0
    runs = json.loads((tmp_path / "results.json").read_text())
    assert {(r["system"], r["mode"]) for r in runs} == {
        ("deltalog", "initial"),
        ("deltalog", "single"),
        ("duckdb", "initial"),
        ("duckdb", "single"),
    }
    assert all(r["status"] == "ok" and r["peak_mb"] > 0 for r in runs)
    assert len({r["data"]["answer"] for r in runs}) == 1
    single = [r["data"] for r in runs if r["mode"] == "single"]
    assert all(d["mid"] < d["answer"] and d["updates"] == 20 for d in single)
    text = (tmp_path / "results.md").read_text()
    assert "All systems that finished agree" in text and "p99 ms" in text
    assert (tmp_path / "initial_time.png").stat().st_size > 0


def test_a_wrong_peer_fails_loudly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    systems = "duckdb,wrong=tests.bench.fake_peer:WrongPeer"
    argv = ["--quick", "--only", "triangles", "--systems", systems, "--modes", "initial"]
    assert main([*argv, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "MISMATCH" in err and "wrong initial=" in err
    assert "MISMATCHES" in (tmp_path / "results.md").read_text()


def test_check_compares_midpoints_and_ignores_failures() -> None:
    def run(system: str, mode: str, status: str = "ok", **data: int) -> Run:
        return Run("tc", "d", system, mode, status, data=dict(data))

    agree = [
        run("a", "initial", answer=5),
        run("b", "initial", answer=5),
        run("a", "single", answer=5, initial=5, mid=3),
        run("b", "single", answer=5, initial=5, mid=3),
        run("c", "initial", "timeout (1 s)"),
    ]
    assert check(agree) == []
    wrong_mid = [*agree[:3], run("b", "single", answer=5, initial=5, mid=4)]
    (problem,) = check(wrong_mid)
    assert "after the single retractions" in problem


def test_scaled_datasets_and_unsupported_cells() -> None:
    from bench.datasets import scaled
    from bench.suite import Options, run_suite

    assert scaled("powerlaw-u-2000", 2.5) == "powerlaw-u-5000"
    assert scaled("dag-50000", 4) == "dag-200000"
    assert scaled("ldbc-sf0.01", 4) == "ldbc-sf0.04"
    assert scaled("snap-u:CA-GrQc", 4) == "" and scaled("ldbc-sample", 4) == ""
    picky = "picky=tests.bench.fake_peer:PickyPeer"
    opts = Options([("triangles", "powerlaw-u-2000")], [picky], ["initial"], 30.0, 1, 1, 1, 1.0)
    (run,) = run_suite(opts)
    assert (run.system, run.status) == ("picky", "unsupported: not translated here")


def test_streams_are_skipped_after_an_initial_timeout() -> None:
    from bench.suite import Options, _recompute_skip

    opts = Options([], [], [], 1.0, 30, 2, 1000, 20.0)
    slow = Run("tc", "d", "pathway", "initial", "timeout (120 s)")
    assert _recompute_skip(opts, "native", slow, "single") == "skipped: the initial run timed out"
    fast = Run("tc", "d", "duckdb", "initial", data={"run_s": 1.0})
    assert _recompute_skip(opts, "recompute", fast, "single") == "skipped: re-runs would take ~60 s"
    assert _recompute_skip(opts, "native", fast, "single") == ""
