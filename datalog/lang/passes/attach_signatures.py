"""Pass: every call of a user-defined functor carries its declared signature.

Layer: datalog. Rewrites the normalized rules and facts so that each `@name(...)`
call holds its `UserFunctor` (parameter and result types); type inference and
the evaluators read the types from the call itself. A call of an undeclared
functor is left bare (`check_names` reports it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from datalog.lang.ast import Call, Literal, Rule, Term, UserFunctor
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.variables import map_term, map_terms


def attach_signatures(ctx: CheckContext) -> None:
    if not ctx.signatures:
        return
    ctx.rules = [signed_rule(rule, ctx.signatures) for rule in ctx.rules]
    ctx.facts = [signed_rule(fact, ctx.signatures) for fact in ctx.facts]


def signed_rule(rule: Rule, signatures: Mapping[str, UserFunctor]) -> Rule:
    def sign(term: Term) -> Term:
        return _signed(term, signatures)

    head = replace(rule.head, args=tuple(map_term(arg, sign) for arg in rule.head.args))
    return replace(rule, head=head, body=map_terms(rule.body, sign))


def signed_body(
    body: Sequence[Literal], signatures: Mapping[str, UserFunctor]
) -> tuple[Literal, ...]:
    if not signatures:
        return tuple(body)
    return map_terms(body, lambda term: _signed(term, signatures))


def _signed(term: Term, signatures: Mapping[str, UserFunctor]) -> Term:
    if isinstance(term, Call) and term.function.startswith("@"):
        signature = signatures.get(term.function[1:])
        if signature is not None:
            return replace(term, functor=signature)
    return term
