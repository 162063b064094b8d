"""A deliberately wrong peer for the suite's mismatch test: DuckDB's answers plus one.

Layer: bench (tests).
"""

from __future__ import annotations

from typing import ClassVar

from bench.answers import Answer
from bench.peers.duckdb_peer import DuckDBPeer
from bench.workloads import Params, Workload


class WrongPeer(DuckDBPeer):
    name = "wrong"

    def run(self, workload: Workload, params: Params) -> Answer:
        right = super().run(workload, params)
        return Answer(right.size + 1, right.digest)


class PickyPeer(DuckDBPeer):
    """DuckDB that declares triangles beyond it, to show how the report says so."""

    name = "picky"
    unsupported: ClassVar[dict[str, str]] = {"triangles": "not translated here"}
