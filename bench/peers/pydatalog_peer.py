"""pyDatalog, a pure-Python Datalog engine (SLG resolution, tabled), on graph workloads.

Layer: bench — may import anything public from deltalog packages and peers.
Facts are asserted one by one with `pyDatalog.assert_fact`; rules are loaded as text
and the answer is `pyDatalog.ask(query)`. Pure Python: expect it only to finish on
the small graphs. Not incremental here.
"""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

import numpy as np

from bench.answers import Answer
from bench.ldbc import Relations
from bench.peers.base import Peer
from bench.workloads import Params, Workload

__all__ = ["PyDatalogPeer"]

PROGRAMS = {
    "reach": ("reach(Y) <= reach(X) & e(X, Y)", "reach(Y)"),
    "tc": ("tc(X, Y) <= e(X, Y)\ntc(X, Z) <= tc(X, Y) & e(Y, Z)", "tc(X, Y)"),
    "triangles": ("", "e(A, B) & e(B, C) & e(A, C)"),
}


def _pydatalog() -> Any:
    """`pyDatalog.pyDatalog` (untyped, so imported dynamically)."""
    return importlib.import_module("pyDatalog.pyDatalog")


class PyDatalogPeer(Peer):
    name = "pydatalog"
    module = "pyDatalog"
    distribution = "pyDatalog"
    workloads: ClassVar[frozenset[str]] = frozenset(PROGRAMS)
    max_facts = 40_000

    def load(self, relations: Relations) -> None:
        engine = _pydatalog()
        edges = relations["e"]
        src = np.asarray(edges.column(0).to_numpy(), dtype=np.int64).tolist()
        dst = np.asarray(edges.column(1).to_numpy(), dtype=np.int64).tolist()
        for a, b in zip(src, dst, strict=True):
            engine.assert_fact("e", a, b)

    def run(self, workload: Workload, params: Params) -> Answer:
        engine = _pydatalog()
        rules, query = PROGRAMS[workload.name]
        if rules:
            engine.load(rules)
        if workload.name == "reach":
            engine.assert_fact("reach", params["source"])
        answer = engine.ask(query)
        return Answer(0 if answer is None else len(set(answer.answers)))
