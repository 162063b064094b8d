"""clingo (Potassco's ASP system): its grounder evaluates stratified Datalog bottom-up.

Layer: bench — may import anything public from deltalog packages and peers.
Relations (only those the workload reads) become facts (`e(1,2).`, names with dots as
`place_name`, strings quoted) added as text at load; a workload is its ASP rules,
grounded once, and the answer size is the number of ground atoms of its answer
predicate. clingo's integers are 32-bit, so an integer of 2**30 or more (LDBC ids,
millisecond dates) becomes the pair term `(v >> 30, v & (2**30 - 1))`: clingo orders
integers before tuples and tuples lexicographically, so comparisons keep their meaning.
Not incremental here (clingo's multi-shot solving could be, with more work).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from bench.answers import Answer
from bench.ldbc import Relations
from bench.peers.base import Peer
from bench.workloads import Params, Workload

__all__ = ["ClingoPeer"]

SMALL = 1 << 30

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
        """knows(A, B) :- person_knows_person(A, B, D), A < B, {start} <= D, D <= {end}.
        knows(B, A) :- person_knows_person(A, B, D), B < A, {start} <= D, D <= {end}.
        local(P) :- place_name(C, {country}), place_type(C, "country"),
            place_isPartOf_place(Y, C), person_isLocatedIn_place(P, Y).
        ans(A, B, C) :- knows(A, B), knows(B, C), knows(A, C), local(A), local(B), local(C).""",
        "ans",
        3,
    ),
}


class ClingoPeer(Peer):
    name = "clingo"
    module = "clingo"
    distribution = "clingo"
    workloads: ClassVar[frozenset[str]] = frozenset(PROGRAMS)

    def __init__(self) -> None:
        import clingo

        self._ctl: Any = clingo.Control(["--warn=none"])

    def load(self, relations: Relations) -> None:
        for name, table in relations.items():
            cols = [_terms(c) for c in table.columns]
            args = cols[0]
            for col in cols[1:]:
                args = np.char.add(np.char.add(args, ","), col)
            predicate = name.replace(".", "_")
            self._ctl.add("base", [], "".join(f"{predicate}({a}).\n" for a in args.tolist()))

    def run(self, workload: Workload, params: Params) -> Answer:
        rules, predicate, arity = PROGRAMS[workload.name]
        values = {k: _quote(v) if isinstance(v, str) else _int(v) for k, v in params.items()}
        self._ctl.add("base", [], rules.format(**values))
        self._ctl.ground([("base", [])])
        return Answer(sum(1 for _ in self._ctl.symbolic_atoms.by_signature(predicate, arity)))


def _quote(text: str) -> str:
    """A clingo string term."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _int(value: object) -> str:
    """An integer as a clingo term (see the module); other values as they are."""
    if not isinstance(value, int):
        return str(value)
    if value <= -SMALL:
        raise ValueError(f"{value} does not fit clingo's integers")
    return str(value) if value < SMALL else f"({value >> 30},{value & (SMALL - 1)})"


def _terms(column: pa.ChunkedArray) -> np.ndarray:
    """The column's values as clingo terms: integers as `_int`, strings quoted."""
    if pa.types.is_integer(column.type):
        values = np.asarray(column.to_numpy(), dtype=np.int64)
        if values.size == 0 or (values.min() > -SMALL and values.max() < SMALL):
            return values.astype(str)
        return np.array([_int(int(v)) for v in values.tolist()], dtype=object).astype(str)
    return np.array([_quote(str(v)) for v in column.to_pylist()], dtype=object).astype(str)
