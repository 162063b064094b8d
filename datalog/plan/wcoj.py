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

from datalog.ast import Atom, Comparison, Const, Var, Wildcard
from datalog.ast import Literal as BodyLiteral
from datalog.expressions import evaluate_comparison
from datalog.passes.variables import term_variables
from datalog.pretty import format_literal
from differential.operators.arrange import ArrangeOp
from differential.operators.linear import project
from joins.delta_query import DeltaQueryOp, Pattern
from joins.extenders import PredicateExtender, Prefixes
from joins.order import variable_order

if TYPE_CHECKING:
    from datalog.plan.body import Binding, BodyCompiler

JoinPlan = Literal["auto", "wcoj", "binary"]


def _eligible(lit: BodyLiteral) -> bool:
    """A positive atom over one or two distinct variables (constants, `_` allowed)."""
    if not isinstance(lit, Atom):
        return False
    if not all(isinstance(a, Var | Const | Wildcard) for a in lit.args):
        return False
    return 1 <= len({a.name for a in lit.args if isinstance(a, Var)}) <= 2


def _variables(atom: Atom) -> tuple[str, ...]:
    return tuple(dict.fromkeys(a.name for a in atom.args if isinstance(a, Var)))


def delta_query(c: BodyCompiler, pending: list[BodyLiteral]) -> Binding | None:
    """Replace the qualifying atoms of `pending` by one delta query; None if none qualify."""
    from datalog.plan.body import Binding

    atoms = [lit for lit in pending if isinstance(lit, Atom) and _eligible(lit)]
    needed = 2 if c.join_plan == "wcoj" else 3
    var_lists = [_variables(a) for a in atoms]
    if len(atoms) < needed or not any(len(v) == 2 for v in var_lists):
        return None
    if any(variable_order(var_lists, i, [0] * len(atoms)) is None for i in range(len(atoms))):
        return None  # not connected through binary bindings: join-at-a-time instead
    patterns = [_pattern(c, a) for a in atoms]
    bound = {v for p in patterns for v in p.vars}
    comparisons = [
        lit
        for lit in pending
        if isinstance(lit, Comparison) and {v.name for v in _vars(lit)} <= bound
    ]
    predicates = [_predicate(c, cmp) for cmp in comparisons]
    out_vars = tuple(dict.fromkeys(v for p in patterns for v in p.vars))
    op = DeltaQueryOp(c.sources.scope, patterns, predicates, out_vars)
    used: list[BodyLiteral] = [*atoms, *comparisons]
    for lit in used:
        pending.remove(lit)
    c.notes.append(f"delta query (worst-case optimal) over {op.describe()[12:-1]}")
    c.notes.extend(f"  {line}" for line in op.explain())
    return Binding(op.output, out_vars)


def _vars(cmp: Comparison) -> list[Var]:
    return [*term_variables(cmp.left), *term_variables(cmp.right)]


def _pattern(c: BodyCompiler, atom: Atom) -> Pattern:
    """The binding's arrangements: shared ones for a plain atom of a relation,
    private ones over the filtered projection when the atom has constants,
    wildcards or a repeated variable (so `e(a, 3)` or `e(a, a)` is a unary binding)."""
    from datalog.plan.body import AtomView

    names = _variables(atom)
    src = c.sources
    size = src.size(atom.name)
    plain = len(names) == len(atom.args)
    if not plain:
        view = AtomView.of(atom, c)
        stream = project(view.stream(), view.positions)
        by_both = ArrangeOp(stream, len(names))
        if len(names) == 1:
            return Pattern(atom.name, names, by_both, size=size)
        by_first = ArrangeOp(stream, 1)
        by_second = ArrangeOp(project(stream, [1, 0]), 1)
        return Pattern(atom.name, names, by_both, by_first, by_second, size)
    if len(names) == 1:
        return Pattern(atom.name, names, src.arrangement(atom.name, [0], 1), size=size)
    return Pattern(
        atom.name,
        names,
        src.arrangement(atom.name, [0, 1], 2),
        src.arrangement(atom.name, [0, 1], 1),
        src.arrangement(atom.name, [1, 0], 1),
        size,
    )


def _predicate(c: BodyCompiler, cmp: Comparison) -> PredicateExtender:
    types, symbols = c.types, c.symbols
    needs = frozenset(v.name for v in _vars(cmp))

    def holds(prefixes: Prefixes) -> np.ndarray:
        columns = {v: prefixes.column(v) for v in needs}
        return evaluate_comparison(cmp, columns, types, symbols, size=len(prefixes))

    return PredicateExtender(needs, holds, format_literal(cmp))
