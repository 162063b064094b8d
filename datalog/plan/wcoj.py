"""Building the delta query (worst-case optimal join) `choose_join` chose for a body.

Layer: datalog (planner). Imports `joins` and `differential`.

The step (`datalog.plan.plan.DeltaQuery`) names its atoms (bindings over one or two
variables), its negations (negated bindings: they validate, and their relations'
changes start pipelines), its constants (`x = c`: they propose `x` or validate
it) and its comparisons (predicates). This builds one `DeltaQueryOp` over them and
records the step with the operator's pipelines, whose variable orders read the
relations' sizes (`joins.order`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from datalog.eval.expressions import evaluate_comparison
from datalog.lang.ast import Atom, Comparison
from datalog.lang.pretty import format_literal
from datalog.plan.atoms import atom_stream, shape_of
from datalog.plan.binding import Binding, Compiler
from datalog.plan.choose import comparison_vars, variables
from datalog.plan.plan import DeltaQuery, JoinPlan
from differential.operators.arrange import ArrangeOp
from differential.operators.linear import project
from differential.tuning import TUNING
from joins.delta_query import DeltaQueryOp, Pattern
from joins.extenders import PredicateExtender, Prefixes

__all__ = ["JoinPlan", "delta_query"]


def delta_query(c: Compiler, step: DeltaQuery) -> Binding:
    """The step's delta query, built in `c`'s scope; the step is recorded with its
    pipelines."""
    patterns = [_pattern(c, a) for a in step.atoms] + [_negated(c, a) for a in step.negations]
    for pattern, text in zip(patterns, step.bindings[: len(patterns)], strict=True):
        pattern.text = text
    predicates = [_predicate(c, cmp) for cmp in step.comparisons]
    out_vars = tuple(dict.fromkeys(v for a in step.atoms for v in variables(a)))
    if step.keep and TUNING.narrow_prefixes:  # the head's only: others not gathered
        out_vars = step.keep
    op = DeltaQueryOp(c.sources.scope, patterns, predicates, out_vars, list(step.constants))
    c.steps.append(replace(step, pipelines=tuple(op.explain())))
    return Binding(op.output, out_vars)


def _pattern(c: Compiler, atom: Atom) -> Pattern:
    """The binding's arrangements: shared ones for a plain atom of a relation,
    private ones over the filtered projection when the atom has constants,
    wildcards or a repeated variable (so `e(a, 3)` or `e(a, a)` is a unary binding)."""
    names = variables(atom)
    src = c.sources
    size = src.size(atom.name)
    plain = len(names) == len(atom.args)
    if not plain:
        shape = shape_of(atom, src.schema)
        stream = project(atom_stream(atom.name, shape, c), shape.positions)
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


def _negated(c: Compiler, atom: Atom) -> Pattern:
    """A negated binding over the set of the atom's variable tuples: the shared
    arrangement of a plain atom of a set relation, else a private arrangement of
    the distinct filtered projection (`!e(a, _)`, `!e(a, 3)`, a multiset input)."""
    names = variables(atom)
    src = c.sources
    multiset = src.is_base(atom.name) and src.schema[atom.name].semantics == "multiset"
    if len(names) == len(atom.args) and not multiset:
        identity = list(range(len(names)))
        return Pattern(
            atom.name, names, src.arrangement(atom.name, identity, len(names)), negated=True
        )
    shape = shape_of(atom, src.schema)
    present = c.distinct(Binding(project(atom_stream(atom.name, shape, c), shape.positions), names))
    return Pattern(atom.name, names, ArrangeOp(present.stream, len(names)), negated=True)


def _predicate(c: Compiler, cmp: Comparison) -> PredicateExtender:
    types, symbols = c.types, c.symbols
    needs = frozenset(v.name for v in comparison_vars(cmp))

    def holds(prefixes: Prefixes) -> np.ndarray:
        columns = {v: prefixes.column(v) for v in needs}
        return evaluate_comparison(cmp, columns, types, symbols, size=len(prefixes))

    return PredicateExtender(needs, holds, format_literal(cmp))
