"""An atom of a rule body: its shape (planned by `order_joins`: distinct variables,
filters on repeated variables and constants, expressions in argument position
deferred as equalities) and the stream of its relation's matching tuples (lowered).

Layer: datalog (planner). Imports `differential` and the datalog language.
"""

from __future__ import annotations

import numpy as np

from datalog.eval.expressions import DTYPES
from datalog.lang.ast import Atom, Comparison, Const, Var, Wildcard
from datalog.lang.schema import Schema
from datalog.plan.binding import Compiler
from datalog.plan.lifting import Namer
from datalog.plan.plan import AtomShape
from differential.dataflow import Stream
from differential.operators.linear import filter_rows


def shape_of(atom: Atom, schema: Schema, fresh: Namer | None = None) -> AtomShape:
    """`atom`'s positions; an argument computed from others gets a fresh variable
    (from `fresh`, which an atom without such arguments does not need)."""
    names: list[str] = []
    positions: list[int] = []
    equal: list[tuple[int, int]] = []
    constants: list[tuple[int, Const]] = []
    deferred: list[Comparison] = []
    for pos, arg in enumerate(atom.args):
        if isinstance(arg, Var) and arg.name in names:
            equal.append((positions[names.index(arg.name)], pos))
        elif isinstance(arg, Var):
            names.append(arg.name)
            positions.append(pos)
        elif isinstance(arg, Const):
            constants.append((pos, arg))
        elif not isinstance(arg, Wildcard):
            assert fresh is not None, "an argument computed from others needs a fresh variable"
            name = fresh(schema.types(atom.name)[pos], "_e")
            names.append(name)
            positions.append(pos)
            deferred.append(Comparison("=", Var(name), arg, arg.span))
    pattern = _describe(atom)
    return AtomShape(
        tuple(names), tuple(positions), tuple(equal), tuple(constants), tuple(deferred), pattern
    )


def _describe(atom: Atom) -> str:
    args = [
        arg.name if isinstance(arg, Var) else "_" if isinstance(arg, Wildcard) else "…"
        for arg in atom.args
    ]
    return f"({', '.join(args)})"


def atom_stream(relation: str, shape: AtomShape, compiler: Compiler) -> Stream:
    """`relation`'s tuples that match an atom's repeated variables and constants."""
    source = compiler.sources.collection(relation)
    if not shape.filtered:
        return source
    equal, constants = shape.equal_columns, _constant_values(relation, shape, compiler)

    def mask(cols: tuple[np.ndarray, ...]) -> np.ndarray:
        keep = np.ones(len(cols[0]), dtype=bool)
        for a, b in equal:
            keep &= cols[a] == cols[b]
        for pos, value in constants:
            keep &= cols[pos] == value
        return keep

    return filter_rows(source, mask)


def _constant_values(
    relation: str, shape: AtomShape, compiler: Compiler
) -> list[tuple[int, object]]:
    out: list[tuple[int, object]] = []
    kinds = compiler.sources.schema.types(relation)
    for pos, const in shape.constants:
        if kinds[pos] == "symbol":
            out.append((pos, compiler.symbols.intern(str(const.value))))
        else:
            out.append((pos, np.asarray(const.value).astype(DTYPES[kinds[pos]])))
    return out
