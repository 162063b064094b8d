"""Pass: every `as(x, type)` knows the primitive type it converts to.

Layer: datalog. Rewrites the normalized rules and facts (and, through `cast_body`,
query bodies) so that each `Cast` carries the primitive type its type name erases
to; the evaluators read it from the node. An unknown type name is an
`UnknownNameError` with a did-you-mean. Whether the conversion is defined for the
value's type is checked with the other types (`infer_types`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from datalog.lang.ast import Cast, Literal, Rule, Term
from datalog.lang.errors import UnknownNameError, did_you_mean
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.resolve_types import PRIMITIVE_TYPES, column_type
from datalog.lang.passes.variables import map_term, map_terms


def resolve_casts(ctx: CheckContext) -> None:
    ctx.rules = [_rule(ctx, rule) for rule in ctx.rules]
    ctx.facts = [_rule(ctx, fact) for fact in ctx.facts]


def cast_body(ctx: CheckContext, body: Sequence[Literal]) -> tuple[Literal, ...]:
    """`body` with the type of each `as` resolved (unknown ones reported)."""
    return map_terms(body, lambda term: _resolved(ctx, term))


def _rule(ctx: CheckContext, rule: Rule) -> Rule:
    head = replace(
        rule.head, args=tuple(map_term(a, lambda t: _resolved(ctx, t)) for a in rule.head.args)
    )
    return replace(rule, head=head, body=cast_body(ctx, rule.body))


def _resolved(ctx: CheckContext, term: Term) -> Term:
    if not isinstance(term, Cast) or term.kind is not None:
        return term
    kind = column_type(ctx, term.type)
    if kind is None:
        hint = did_you_mean(term.type, [*PRIMITIVE_TYPES, *ctx.type_names])
        ctx.report(UnknownNameError, f"unknown type `{term.type}` in `as`{hint}", term.span)
        return term
    return replace(term, kind=kind)
