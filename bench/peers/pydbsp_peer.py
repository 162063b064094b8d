"""pydbsp, a pure-Python DBSP (incremental view maintenance) library.

Layer: bench — may import anything public from deltalog packages and peers.
pydbsp requires Python >= 3.12; where it is not installed the suite reports it as
unavailable. No workload is wired to it yet: its API builds circuits of Z-set
operators by hand, and that translation is future work (listed in docs/benchmarks.md).
"""

from __future__ import annotations

from typing import ClassVar

from bench.answers import Answer
from bench.ldbc import Relations
from bench.peers.base import Peer
from bench.workloads import Params, Workload

__all__ = ["PydbspPeer"]


class PydbspPeer(Peer):
    name = "pydbsp"
    module = "pydbsp"
    distribution = "pydbsp"
    requires = "Python >= 3.12"
    workloads: ClassVar[frozenset[str]] = frozenset()

    def load(self, relations: Relations) -> None:
        raise NotImplementedError("pydbsp is not wired to any workload")

    def run(self, workload: Workload, params: Params) -> Answer:
        raise NotImplementedError("pydbsp is not wired to any workload")
