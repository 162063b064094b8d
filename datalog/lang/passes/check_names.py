"""Pass: every relation and functor a program uses exists.

Layer: datalog. An atom (head, body, negation, aggregate body) or directive naming
an undeclared relation, or a call of an unknown functor, is an
`UnknownNameError` with a did-you-mean and the span of the use (an engine's
internal name, as `__unit__`, is said to be reserved instead). Soufflé's
`autoinc()` and `nil` are `UnsupportedError`s saying why (ADR 0027).
"""

from __future__ import annotations

from collections.abc import Sequence

from datalog.lang.ast import Atom, Call, Literal, Var
from datalog.lang.errors import (
    DatalogSemanticError,
    UnknownNameError,
    UnsupportedError,
    did_you_mean,
)
from datalog.lang.functions import AGGREGATE_FUNCTIONS, FUNCTORS
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.variables import nodes
from datalog.lang.system import internal_message, is_internal

# Soufflé's names Deltalog refuses (never reads as a variable or an unknown functor).
NIL = "nil"
_NIL_MESSAGE = "`nil` (Soufflé's empty record) is not supported: Deltalog has no records"
_AUTOINC_MESSAGE = (
    "`autoinc()` is not supported: its numbers follow the order of evaluation, so a "
    "retraction would renumber other rows; number rows with `ord(s)` or a rank "
    "`count : { item(y), y < x }`"
)


def check_names(ctx: CheckContext) -> None:
    for rule in ctx.program.rules:
        check_clause_names(ctx, (rule.head, *rule.body))
    for directive in ctx.program.directives:
        if directive.relation not in ctx.declarations:
            hint = did_you_mean(directive.relation, ctx.declarations)
            message = f"unknown relation `{directive.relation}` in `.{directive.kind}`{hint}"
            ctx.report(UnknownNameError, message, directive.span)


def check_clause_names(ctx: CheckContext, literals: Sequence[Literal]) -> None:
    """Check the relations and functors of one clause (head atom first, if any)."""
    for node in nodes((), literals):
        if isinstance(node, Atom):
            check_relation_name(ctx, node)
        elif isinstance(node, Call):
            check_functor_name(ctx, node)
        elif isinstance(node, Var) and node.name == NIL:
            ctx.report(UnsupportedError, _NIL_MESSAGE, node.span)


def check_relation_name(ctx: CheckContext, atom: Atom) -> None:
    if atom.name not in ctx.declarations and is_internal(atom.name):  # never declared
        ctx.report(DatalogSemanticError, internal_message(atom.name), atom.span)
    elif atom.name not in ctx.declarations:
        hint = did_you_mean(atom.name, ctx.declarations)
        ctx.report(UnknownNameError, f"unknown relation `{atom.name}`{hint}", atom.span)


def check_functor_name(ctx: CheckContext, call: Call) -> None:
    if call.function.startswith("@"):
        check_user_functor_name(ctx, call)
        return
    if call.function in FUNCTORS:
        return
    if call.function == "autoinc":
        ctx.report(UnsupportedError, _AUTOINC_MESSAGE, call.span)
        return
    if call.function in AGGREGATE_FUNCTIONS:
        message = (
            f"`{call.function}` is an aggregate, not a functor; "
            f"write `{call.function} x : {{ body }}`"
        )
    else:
        message = f"unknown functor `{call.function}`{did_you_mean(call.function, FUNCTORS)}"
    ctx.report(UnknownNameError, message, call.span)


def check_user_functor_name(ctx: CheckContext, call: Call) -> None:
    name = call.function[1:]
    if ctx.functor_arity(name) is not None:
        return
    declared = [f"@{n}" for n in (*ctx.functors, *ctx.signatures)]
    hint = (
        did_you_mean(call.function, declared) or f"; declare it with `.functor {name}(...): type`"
    )
    message = f"unknown functor `{call.function}`{hint}"
    ctx.report(UnknownNameError, message, call.span)
