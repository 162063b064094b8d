"""Pass: expand disjunctions into several rules, set facts apart, lift and scope
aggregates.

Layer: datalog. `h :- a, (b ; c), d.` becomes `h :- a, b, d.` and `h :- a, c, d.`
(distributing the disjunction over the conjunction, recursively). A disjunction
inside an aggregate body cannot be distributed and is rejected.
"""

from __future__ import annotations

from collections.abc import Sequence

from datalog.lang.ast import Aggregate, Atom, Decl, Disjunction, Literal, Rule, Var, Wildcard
from datalog.lang.errors import UnsupportedError
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.lift_aggregates import lift_aggregates
from datalog.lang.passes.scope_aggregates import scope_aggregates
from datalog.lang.passes.variables import nodes


def normalize_disjunctions(ctx: CheckContext) -> None:
    for rule in ctx.program.rules:
        if rule.is_fact:
            ctx.facts.append(rule)
            continue
        check_aggregate_disjunctions(ctx, (rule.head, *rule.body))
        for body in expand_body(rule.body):
            head, lifted = lift_aggregates(rule.head, body)
            ctx.rules.append(Rule(head, scope_aggregates(lifted), rule.span))
    for decl in ctx.program.decls:
        if "eqrel" in decl.qualifiers and decl.arity == 2:
            ctx.rules.extend(equivalence_rules(decl))


def equivalence_rules(decl: Decl) -> list[Rule]:
    """An `eqrel` relation is the reflexive, symmetric and transitive closure of what
    is inserted into it or derived for it: three rules over it say so, and the
    engine maintains them like any recursion (retractions included)."""
    x, y, z = Var("x", decl.span), Var("y", decl.span), Var("z", decl.span)

    def atom(a: Var, b: Var | Wildcard) -> Atom:
        return Atom(decl.name, (a, b), decl.span)

    return [
        Rule(atom(x, x), (atom(x, Wildcard(decl.span)),), decl.span),
        Rule(atom(y, x), (atom(x, y),), decl.span),
        Rule(atom(x, z), (atom(x, y), atom(y, z)), decl.span),
    ]


def check_aggregate_disjunctions(ctx: CheckContext, literals: Sequence[Literal]) -> None:
    """Reject disjunctions inside aggregate bodies (they cannot be distributed)."""
    for aggregate in nodes((), literals):
        if isinstance(aggregate, Aggregate) and _has_disjunction(aggregate.body):
            message = (
                "a disjunction inside an aggregate body is not supported; "
                "define a helper relation for it"
            )
            ctx.report(UnsupportedError, message, aggregate.span)


# The most bodies one rule or query may expand to: each is planned and evaluated
# apart, and `(a ; b)` written n times makes 2**n of them.
MAX_ALTERNATIVES = 1024


def expand_body(body: Sequence[Literal]) -> list[tuple[Literal, ...]]:
    """The alternative bodies of a body, with no top-level disjunction left; an
    `UnsupportedError` at the disjunction that takes them past `MAX_ALTERNATIVES`."""
    _count_alternatives(body)
    return _expanded(body)


def _count_alternatives(body: Sequence[Literal]) -> int:
    total = 1
    for literal in body:
        if isinstance(literal, Disjunction):
            total *= sum(_count_alternatives(alternative) for alternative in literal.alternatives)
            if total > MAX_ALTERNATIVES:
                message = (
                    f"this disjunction makes the body expand to more than {MAX_ALTERNATIVES} "
                    "alternatives; define a helper relation for some of it"
                )
                raise UnsupportedError(message, literal.span)
    return total


def _expanded(body: Sequence[Literal]) -> list[tuple[Literal, ...]]:
    results: list[tuple[Literal, ...]] = [()]
    for literal in body:
        if isinstance(literal, Disjunction):
            options = [b for alternative in literal.alternatives for b in _expanded(alternative)]
        else:
            options = [(literal,)]
        results = [done + option for done in results for option in options]
    return results


def _has_disjunction(body: Sequence[Literal]) -> bool:
    return any(isinstance(literal, Disjunction) for literal in body)
