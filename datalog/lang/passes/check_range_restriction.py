"""Pass: every variable is bound by a positive atom (range restriction).

Layer: datalog. A variable is bound when it is an argument of a positive atom,
or by an equality `x = expr` (or `expr = x`) whose other side's variables are
bound, transitively. Every variable of a head, a negation, a comparison, an
expression inside an atom and an aggregate target must be bound; the body of an
aggregate is checked the same way, with the variables that group it (those also
occurring outside it) counted as bound. Facts must be ground; `_` may only stand
for an atom argument in a body.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from datalog.lang.ast import (
    Aggregate,
    Atom,
    Comparison,
    Literal,
    Negation,
    Rule,
    Term,
    Var,
    Wildcard,
)
from datalog.lang.errors import DatalogSemanticError, RangeRestrictionError
from datalog.lang.passes.check_names import NIL
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.lift_aggregates import is_lifted
from datalog.lang.passes.variables import (
    aggregate_groups,
    aggregates_in,
    literal_terms,
    nodes,
    subterms,
    term_variables,
)

Groups = dict[int, frozenset[str]]
Unbound = Callable[[Var, str], None]


def check_range_restriction(ctx: CheckContext) -> None:
    for rule in ctx.rules:
        check_clause(ctx, rule.head, rule.body)
    for fact in ctx.facts:
        check_fact(ctx, fact)


def check_fact(ctx: CheckContext, fact: Rule) -> None:
    name = fact.head.name
    aggregates = [found for arg in fact.head.args for found in aggregates_in(arg)]
    for aggregate in aggregates:  # its body's variables are its own: not reported
        message = f"fact `{name}` contains an aggregate; write it as a rule with a body"
        ctx.report(DatalogSemanticError, message, aggregate.span)
    if aggregates:
        return
    for node in nodes(fact.head.args, ()):
        if isinstance(node, Var) and node.name != NIL:  # `nil`: refused by check_names
            message = f"fact `{name}` must be ground, but has variable `{node.name}`"
            ctx.report(RangeRestrictionError, message, node.span)
        elif isinstance(node, Wildcard):
            message = f"fact `{name}` must be ground, but has a wildcard `_`"
            ctx.report(RangeRestrictionError, message, node.span)


def check_clause(ctx: CheckContext, head: Atom | None, body: Sequence[Literal]) -> None:
    """Check one normalized rule body (and its head; None for a query)."""
    groups = aggregate_groups(head.args if head else (), body)
    reported: set[str] = set()

    def unbound(var: Var, where: str) -> None:
        # `nil` is refused by check_names; a lifted aggregate's variable is unbound
        # only when its aggregate's group is, which the aggregate reports
        if var.name not in reported and var.name != NIL and not is_lifted(var.name):
            reported.add(var.name)
            message = f"variable `{var.name}` in {where} is not bound by a positive atom"
            ctx.report(RangeRestrictionError, message, var.span)

    bound = bound_variables(body, frozenset(), groups)
    _check_literals(ctx, body, bound, groups, unbound)
    if head is not None:
        _check_head(ctx, head, bound, unbound)


def bound_variables(body: Sequence[Literal], initial: frozenset[str], groups: Groups) -> set[str]:
    """The variables a body binds, given `initial` bound already."""
    bound = set(initial)
    for literal in body:
        if isinstance(literal, Atom):
            bound.update(arg.name for arg in literal.args if isinstance(arg, Var))
    changed = True
    while changed:
        changed = False
        for literal in body:
            if not isinstance(literal, Comparison) or literal.op != "=":
                continue
            for side, other in ((literal.left, literal.right), (literal.right, literal.left)):
                if (
                    isinstance(side, Var)
                    and side.name not in bound
                    and needed_variables(other, groups) <= bound
                ):
                    bound.add(side.name)
                    changed = True
    return bound


def needed_variables(term: Term, groups: Groups) -> set[str]:
    """The variables that must be bound to evaluate `term`."""
    needed = {var.name for var in term_variables(term)}
    for aggregate in aggregates_in(term):
        needed |= groups.get(id(aggregate), frozenset())
    return needed


def _check_head(ctx: CheckContext, head: Atom, bound: set[str], unbound: Unbound) -> None:
    for node in nodes(head.args, ()):
        if isinstance(node, Wildcard):
            message = (
                f"wildcard `_` in the head of `{head.name}`; every head argument must be bound"
            )
            ctx.report(RangeRestrictionError, message, node.span)
    for arg in head.args:  # (aggregates were lifted into the body: `lift_aggregates`)
        _require(arg, bound, "the head", unbound)


def _check_literals(
    ctx: CheckContext, body: Sequence[Literal], bound: set[str], groups: Groups, unbound: Unbound
) -> None:
    for literal in body:
        if isinstance(literal, Atom):
            for arg in literal.args:
                if not isinstance(arg, Var | Wildcard):
                    _check_expression(ctx, arg, "an expression")
                    _require(arg, bound, "an expression", unbound)
        elif isinstance(literal, Negation):
            for arg in literal.atom.args:
                if not isinstance(arg, Wildcard):
                    _check_expression(ctx, arg, "a negation")
                _require(arg, bound, "a negation", unbound)
        elif isinstance(literal, Comparison):
            for side in (literal.left, literal.right):
                _check_expression(ctx, side, "a comparison")
                _require(side, bound, "a comparison", unbound)
        for term in literal_terms(literal):
            for aggregate in aggregates_in(term):
                _check_aggregate(ctx, aggregate, bound, groups, unbound)


def _check_aggregate(
    ctx: CheckContext, aggregate: Aggregate, outer: set[str], groups: Groups, unbound: Unbound
) -> None:
    group = groups.get(id(aggregate), frozenset())
    for name in sorted(group - outer):
        unbound(_first_variable(aggregate, name), "an aggregate")
    inner = bound_variables(aggregate.body, group, groups)
    _check_literals(ctx, aggregate.body, inner, groups, unbound)
    if aggregate.target is not None:
        _check_expression(ctx, aggregate.target, "an aggregate target")
        _require(aggregate.target, inner, "an aggregate target", unbound)


def _require(term: Term, bound: set[str], where: str, unbound: Unbound) -> None:
    for var in term_variables(term):
        if var.name not in bound:
            unbound(var, where)


def _check_expression(ctx: CheckContext, term: Term, where: str) -> None:
    for sub in subterms(term):
        if isinstance(sub, Wildcard):
            message = f"wildcard `_` in {where}; `_` can only be an argument of an atom"
            ctx.report(RangeRestrictionError, message, sub.span)


def _first_variable(aggregate: Aggregate, name: str) -> Var:
    target = () if aggregate.target is None else (aggregate.target,)
    for node in nodes(target, aggregate.body):
        if isinstance(node, Var) and node.name == name:
            return node
    return Var(name, aggregate.span)
