"""clingo (Potassco's ASP system): its grounder evaluates stratified Datalog bottom-up.

Layer: bench — may import anything public from deltalog packages and peers.
Relations become facts (`e(1,2).`, names with dots as `person_firstName`) added as
text at load; a workload is its ASP rules, grounded once, and the answer size is the
number of ground atoms of its answer predicate. Not incremental here (clingo's
multi-shot solving could be, with more work).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from bench.ldbc import Relations
from bench.peers.base import Peer
from bench.workloads import Params, Workload

__all__ = ["ClingoPeer"]

PROGRAMS = {
    "reach": ("reach(S) :- S = {source}. reach(Y) :- reach(X), e(X, Y).", "reach", 1),
    "tc": ("tc(X, Y) :- e(X, Y). tc(X, Z) :- tc(X, Y), e(Y, Z).", "tc", 2),
    "triangles": ("ans(A, B, C) :- e(A, B), e(B, C), e(A, C).", "ans", 3),
    "clique4": (
        "ans(A, B, C, D) :- e(A, B), e(A, C), e(A, D), e(B, C), e(B, D), e(C, D).",
        "ans",
        4,
    ),
    "bi11": (
        """knows(A, B) :- person_knows_person(A, B, _), A < B.
        knows(B, A) :- person_knows_person(A, B, _), B < A.
        local(P) :- person_isLocatedIn_place(P, C), place_isPartOf_place(C, {country}).
        ans(A, B, C) :- knows(A, B), knows(B, C), knows(A, C), local(A), local(B), local(C).""",
        "ans",
        3,
    ),
}
NEEDED = {"bi11": ("person_knows_person", "person_isLocatedIn_place", "place_isPartOf_place")}


class ClingoPeer(Peer):
    name = "clingo"
    module = "clingo"
    distribution = "clingo"
    workloads: ClassVar[frozenset[str]] = frozenset(PROGRAMS)

    def __init__(self) -> None:
        import clingo

        self._ctl: Any = clingo.Control(["--warn=none"])

    def load(self, relations: Relations) -> None:
        names = NEEDED["bi11"] if "e" not in relations else ("e",)
        for name in names:  # integer relations only: the workloads above need no strings
            cols = [
                np.asarray(c.to_numpy(), dtype=np.int64).astype(str)
                for c in relations[name].columns
            ]
            args = cols[0]
            for col in cols[1:]:
                args = np.char.add(np.char.add(args, ","), col)
            self._ctl.add("base", [], "".join(f"{name}({a}).\n" for a in args.tolist()))

    def run(self, workload: Workload, params: Params) -> int:
        rules, predicate, arity = PROGRAMS[workload.name]
        self._ctl.add("base", [], rules.format(**params))
        self._ctl.ground([("base", [])])
        return sum(1 for _ in self._ctl.symbolic_atoms.by_signature(predicate, arity))
