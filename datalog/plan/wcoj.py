"""Choosing and building delta queries (worst-case optimal joins) for rule bodies.

Layer: datalog (planner). Imports `joins` and `differential`.

A body qualifies when it has enough positive atoms over one or two distinct
variables (constants, wildcards and repeated variables allowed) that are
connected through their variables: three or more under the `auto` plan, two or
more when the query forces `wcoj`. Those atoms become one `DeltaQueryOp`, with

- every negation over their variables (constants and wildcards allowed) as a
  negated binding: it validates, and its relation's changes start a pipeline;
- every `x = c` (a variable equated to a value without variables) as a
  constant, which proposes `x` (count one) or validates it;
- every other comparison over their variables as a predicate.

Everything else in the body (other atoms, aggregates, bindings) is applied to
its output join-at-a-time.
"""

from __future__ import annotations

import numpy as np

from datalog.eval.expressions import DTYPES, evaluate_comparison, evaluate_term
from datalog.lang.ast import (
    Atom,
    BinOp,
    Call,
    Cast,
    Comparison,
    Const,
    Neg,
    Negation,
    Term,
    Var,
    Wildcard,
)
from datalog.lang.ast import Literal as BodyLiteral
from datalog.lang.passes.check_generators import generator_binding
from datalog.lang.passes.term_types import comparison_type
from datalog.lang.passes.variables import nodes, term_variables
from datalog.lang.pretty import format_literal, format_term
from datalog.plan.atoms import AtomView
from datalog.plan.binding import Binding, Compiler
from datalog.plan.plan import Binary, DeltaQuery, JoinPlan
from differential.operators.arrange import ArrangeOp
from differential.operators.linear import project
from joins.delta_query import Constant, DeltaQueryOp, Pattern
from joins.extenders import PredicateExtender, Prefixes
from joins.pipeline import orderable

__all__ = ["JoinPlan", "delta_query"]


def _eligible(lit: BodyLiteral) -> bool:
    """A positive atom over one or two distinct variables (constants, `_` allowed)."""
    if not isinstance(lit, Atom):
        return False
    if not all(isinstance(a, Var | Const | Wildcard) for a in lit.args):
        return False
    return 1 <= len({a.name for a in lit.args if isinstance(a, Var)}) <= 2


def _variables(atom: Atom) -> tuple[str, ...]:
    return tuple(dict.fromkeys(a.name for a in atom.args if isinstance(a, Var)))


def delta_query(c: Compiler, pending: list[BodyLiteral]) -> Binding | None:
    """Replace the qualifying literals of `pending` by one delta query; None if none qualify."""
    atoms = [lit for lit in pending if isinstance(lit, Atom) and _eligible(lit)]
    needed = 2 if c.join_plan == "wcoj" else 3
    var_lists = [_variables(a) for a in atoms]
    if len(atoms) < needed:
        if c.join_plan == "wcoj" and len([p for p in pending if isinstance(p, Atom)]) > 1:
            c.steps.append(Binary("these atoms take no delta query"))
        return None
    bound = {v for vars_ in var_lists for v in vars_}
    constants = [
        (lit, const)
        for lit in pending
        if isinstance(lit, Comparison)
        and generator_binding(lit) is None
        and (const := _constant(c, lit, bound)) is not None
    ]
    fixed = [const.var for _, const in constants]
    no = [False] * len(atoms)
    if any(orderable(var_lists, no, fixed, i) is None for i in range(len(atoms))):
        if c.join_plan == "wcoj":  # not connected through binary bindings
            c.steps.append(Binary("the atoms are not connected"))
        return None
    negations = [
        lit
        for lit in pending
        if isinstance(lit, Negation)
        and _negatable(lit.atom, bound)
        and orderable([*var_lists, _variables(lit.atom)], [*no, True], fixed, len(atoms))
        is not None
    ]
    patterns = [_pattern(c, a) for a in atoms] + [_negated(c, n.atom) for n in negations]
    shown: list[BodyLiteral] = [*atoms, *negations]
    for pattern, lit in zip(patterns, shown, strict=True):
        pattern.text = format_literal(lit)
    taken = {id(lit) for lit, _ in constants}
    comparisons = [
        lit
        for lit in pending
        if isinstance(lit, Comparison)
        and generator_binding(lit) is None
        and id(lit) not in taken
        and {v.name for v in _vars(lit)} <= bound
    ]
    predicates = [_predicate(c, cmp) for cmp in comparisons]
    out_vars = tuple(dict.fromkeys(v for vars_ in var_lists for v in vars_))
    op = DeltaQueryOp(
        c.sources.scope, patterns, predicates, out_vars, [const for _, const in constants]
    )
    used: list[BodyLiteral] = [*atoms, *negations, *(lit for lit, _ in constants), *comparisons]
    for lit in used:
        pending.remove(lit)
    bindings = [p.show() for p in patterns] + [const.show() for _, const in constants]
    c.steps.append(DeltaQuery(tuple(bindings), tuple(op.explain())))
    return Binding(op.output, out_vars)


def _negatable(atom: Atom, bound: set[str]) -> bool:
    """A negated atom over variables of the delta query (constants and `_` allowed)."""
    if not all(isinstance(a, Var | Const | Wildcard) for a in atom.args):
        return False
    names = _variables(atom)
    return bool(names) and set(names) <= bound


def _constant(c: Compiler, cmp: Comparison, bound: set[str]) -> Constant | None:
    """`x = value` (either side) for a delta-query variable `x`, the value in `x`'s type."""
    if cmp.op != "=":
        return None
    for var, term in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
        if isinstance(var, Var) and var.name in bound and _closed(term):
            kind = c.types.get(var.name)
            if kind is None or comparison_type(cmp.left, cmp.right, c.types) != kind:
                return None
            values, valid = evaluate_term(term, {}, c.types, c.symbols, kind, size=1)
            if valid is not None and not valid[0]:
                return None  # no value (say 1/0): the predicate drops every row
            value = np.asarray(values).astype(DTYPES[kind], copy=False)[0]
            return Constant(var.name, value, format_term(term))
    return None


def _closed(term: Term) -> bool:
    """A term without variables, wildcards or aggregates."""
    return all(isinstance(n, Const | BinOp | Neg | Call | Cast) for n in nodes([term], []))


def _vars(cmp: Comparison) -> list[Var]:
    return [*term_variables(cmp.left), *term_variables(cmp.right)]


def _pattern(c: Compiler, atom: Atom) -> Pattern:
    """The binding's arrangements: shared ones for a plain atom of a relation,
    private ones over the filtered projection when the atom has constants,
    wildcards or a repeated variable (so `e(a, 3)` or `e(a, a)` is a unary binding)."""
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


def _negated(c: Compiler, atom: Atom) -> Pattern:
    """A negated binding over the set of the atom's variable tuples: the shared
    arrangement of a plain atom of a set relation, else a private arrangement of
    the distinct filtered projection (`!e(a, _)`, `!e(a, 3)`, a multiset input)."""
    names = _variables(atom)
    src = c.sources
    multiset = src.is_base(atom.name) and src.schema[atom.name].semantics == "multiset"
    if len(names) == len(atom.args) and not multiset:
        identity = list(range(len(names)))
        return Pattern(
            atom.name, names, src.arrangement(atom.name, identity, len(names)), negated=True
        )
    view = AtomView.of(atom, c)
    present = c.distinct(Binding(project(view.stream(), view.positions), names))
    return Pattern(atom.name, names, ArrangeOp(present.stream, len(names)), negated=True)


def _predicate(c: Compiler, cmp: Comparison) -> PredicateExtender:
    types, symbols = c.types, c.symbols
    needs = frozenset(v.name for v in _vars(cmp))

    def holds(prefixes: Prefixes) -> np.ndarray:
        columns = {v: prefixes.column(v) for v in needs}
        return evaluate_comparison(cmp, columns, types, symbols, size=len(prefixes))

    return PredicateExtender(needs, holds, format_literal(cmp))
