"""Choosing and building delta queries (worst-case optimal joins) for rule bodies.

Layer: datalog (planner). Imports `joins` and `differential`.

A body qualifies when it has enough positive atoms over one or two distinct
variables (no constants, wildcards, expressions or repeated variables) that are
connected through their variables: three or more under the `auto` plan, two or
more when the query forces `wcoj`. Those atoms, and the comparisons over their
variables, become one `DeltaQueryOp`; everything else in the body (other atoms,
negations, aggregates, bindings) is applied to its output join-at-a-time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np

from datalog.ast import Atom, Comparison, Var
from datalog.ast import Literal as BodyLiteral
from datalog.expressions import evaluate_comparison
from datalog.passes.variables import term_variables
from joins.delta_query import DeltaQueryOp, Pattern, plan_pipeline
from joins.extenders import PredicateExtender, Prefixes

if TYPE_CHECKING:
    from datalog.plan.body import Binding, BodyCompiler

JoinPlan = Literal["auto", "wcoj", "binary"]


def _eligible(lit: BodyLiteral) -> bool:
    if not isinstance(lit, Atom) or not 1 <= len(lit.args) <= 2:
        return False
    names = [a.name for a in lit.args if isinstance(a, Var)]
    return len(names) == len(lit.args) and len(set(names)) == len(names)


def delta_query(c: BodyCompiler, pending: list[BodyLiteral]) -> Binding | None:
    """Replace the qualifying atoms of `pending` by one delta query; None if none qualify."""
    from datalog.plan.body import Binding

    atoms = [lit for lit in pending if _eligible(lit)]
    needed = 2 if c.join_plan == "wcoj" else 3
    if len(atoms) < needed or not any(len(a.args) == 2 for a in atoms):  # type: ignore[union-attr]
        return None
    patterns = [_pattern(c, a) for a in atoms]  # type: ignore[arg-type]
    bound = {v for p in patterns for v in p.vars}
    comparisons = [
        lit
        for lit in pending
        if isinstance(lit, Comparison) and {v.name for v in _vars(lit)} <= bound
    ]
    predicates = [_predicate(c, cmp) for cmp in comparisons]
    try:
        for i in range(len(patterns)):
            plan_pipeline(patterns, predicates, i)
    except ValueError:
        return None
    out_vars = tuple(dict.fromkeys(v for p in patterns for v in p.vars))
    op = DeltaQueryOp(c.sources.scope, patterns, predicates, out_vars)
    for lit in (*atoms, *comparisons):
        pending.remove(lit)
    c.notes.append(f"delta query (worst-case optimal) over {op.describe()[12:-1]}")
    c.notes.extend(f"  {line}" for line in op.explain())
    return Binding(op.output, out_vars)


def _vars(cmp: Comparison) -> list[Var]:
    return [*term_variables(cmp.left), *term_variables(cmp.right)]


def _pattern(c: BodyCompiler, atom: Atom) -> Pattern:
    names = tuple(a.name for a in atom.args if isinstance(a, Var))
    src = c.sources
    if len(names) == 1:
        return Pattern(
            atom.name, names, src.arrangement(atom.name, [0], 1), size=src.size(atom.name)
        )
    return Pattern(
        atom.name,
        names,
        src.arrangement(atom.name, [0, 1], 2),
        src.arrangement(atom.name, [0, 1], 1),
        src.arrangement(atom.name, [1, 0], 1),
        src.size(atom.name),
    )


def _predicate(c: BodyCompiler, cmp: Comparison) -> PredicateExtender:
    types, symbols = c.types, c.symbols
    needs = frozenset(v.name for v in _vars(cmp))

    def holds(prefixes: Prefixes) -> np.ndarray:
        columns = {v: prefixes.column(v) for v in needs}
        return evaluate_comparison(cmp, columns, types, symbols, size=len(prefixes))

    return PredicateExtender(needs, holds, str(cmp))
