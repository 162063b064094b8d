"""An atom of a rule body as the planner reads it: its distinct variables, the
positions that repeat a variable or hold a constant (filters on the relation's
columns), and the expressions in argument position (deferred as equalities).

Layer: datalog (planner). Imports `differential` and the datalog language.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from datalog.eval.expressions import DTYPES
from datalog.lang.ast import Atom, ColumnType, Comparison, Const, Literal, Var, Wildcard
from datalog.plan.binding import Compiler
from differential.dataflow import Stream
from differential.operators.linear import filter_rows


@dataclass
class AtomView:
    """An atom's positions: its distinct variables, filters and deferred expressions."""

    atom: Atom
    compiler: Compiler
    vars: tuple[str, ...]
    positions: list[int]
    equal_columns: list[tuple[int, int]]
    constants: list[tuple[int, Const]]
    deferred: list[Literal]

    @property
    def filtered(self) -> bool:
        return bool(self.equal_columns or self.constants)

    @staticmethod
    def of(atom: Atom, compiler: Compiler) -> AtomView:
        view = AtomView(atom, compiler, (), [], [], [], [])
        names: list[str] = []
        for pos, arg in enumerate(atom.args):
            if isinstance(arg, Var) and arg.name in names:
                view.equal_columns.append((view.positions[names.index(arg.name)], pos))
            elif isinstance(arg, Var):
                names.append(arg.name)
                view.positions.append(pos)
            elif isinstance(arg, Const):
                view.constants.append((pos, arg))
            elif not isinstance(arg, Wildcard):
                kind = _column_type(compiler, atom.name, pos)
                name = compiler.fresh_var(kind, "_e")
                names.append(name)
                view.positions.append(pos)
                view.deferred.append(Comparison("=", Var(name), arg, arg.span))
        view.vars = tuple(names)
        return view

    def stream(self) -> Stream:
        source = self.compiler.sources.collection(self.atom.name)
        if not self.filtered:
            return source
        equal, constants = self.equal_columns, self._constant_values()

        def mask(cols: tuple[np.ndarray, ...]) -> np.ndarray:
            keep = np.ones(len(cols[0]), dtype=bool)
            for a, b in equal:
                keep &= cols[a] == cols[b]
            for pos, value in constants:
                keep &= cols[pos] == value
            return keep

        return filter_rows(source, mask)

    def _constant_values(self) -> list[tuple[int, object]]:
        out: list[tuple[int, object]] = []
        for pos, const in self.constants:
            kind = _column_type(self.compiler, self.atom.name, pos)
            if kind == "symbol":
                out.append((pos, self.compiler.symbols.intern(str(const.value))))
            else:
                out.append((pos, np.asarray(const.value).astype(DTYPES[kind])))
        return out

    def describe(self) -> str:
        args = []
        for arg in self.atom.args:
            args.append(
                arg.name if isinstance(arg, Var) else "_" if isinstance(arg, Wildcard) else "…"
            )
        return f"({', '.join(args)})"


def _column_type(compiler: Compiler, relation: str, pos: int) -> ColumnType:
    return compiler.sources.schema.types(relation)[pos]
