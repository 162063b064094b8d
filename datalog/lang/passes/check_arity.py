"""Pass: every atom has as many arguments as its relation has columns.

Layer: datalog. Also checks the argument counts of functors and that aggregates
have a target exactly when they need one (`count` has none).
"""

from __future__ import annotations

from collections.abc import Sequence

from datalog.lang.ast import Aggregate, Atom, Call, Literal
from datalog.lang.errors import ArityError
from datalog.lang.functions import FUNCTORS
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.variables import nodes


def check_arity(ctx: CheckContext) -> None:
    for rule in ctx.program.rules:
        check_clause_arity(ctx, (rule.head, *rule.body))


def check_clause_arity(ctx: CheckContext, literals: Sequence[Literal]) -> None:
    """Check the atoms, functor calls and aggregates of one clause."""
    for node in nodes((), literals):
        if isinstance(node, Atom):
            check_atom_arity(ctx, node)
        elif isinstance(node, Call):
            check_call_arity(ctx, node)
        elif isinstance(node, Aggregate):
            check_aggregate_target(ctx, node)


def check_atom_arity(ctx: CheckContext, atom: Atom) -> None:
    decl = ctx.declarations.get(atom.name)
    if decl is None or decl.arity == len(atom.args):
        return
    message = (
        f"arity mismatch: `{atom.name}` is declared with {_count(decl.arity, 'column')} "
        f"but used with {_count(len(atom.args), 'argument')}"
    )
    ctx.report(ArityError, message, atom.span)


def check_call_arity(ctx: CheckContext, call: Call) -> None:
    if call.function.startswith("@"):
        arity = ctx.functor_arity(call.function[1:])
        if arity is not None and arity != len(call.args):
            message = (
                f"arity mismatch: `{call.function}` is declared with "
                f"{_count(arity, 'argument')} but is given {len(call.args)}"
            )
            ctx.report(ArityError, message, call.span)
        return
    functor = FUNCTORS.get(call.function)
    if functor is None:
        return
    given = len(call.args)
    if functor.min_args <= given and (functor.max_args is None or given <= functor.max_args):
        return
    if functor.max_args == functor.min_args:
        wanted = _count(functor.min_args, "argument")
    else:
        wanted = f"at least {_count(functor.min_args, 'argument')}"
    message = f"arity mismatch: `{call.function}` takes {wanted} but is given {given}"
    ctx.report(ArityError, message, call.span)


def check_aggregate_target(ctx: CheckContext, aggregate: Aggregate) -> None:
    if aggregate.function == "count" and aggregate.target is not None:
        ctx.report(ArityError, "`count` takes no target: write `count : { body }`", aggregate.span)
    elif aggregate.function != "count" and aggregate.target is None:
        name = aggregate.function
        message = f"`{name}` needs a target: write `{name} x : {{ body }}`"
        ctx.report(ArityError, message, aggregate.span)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
