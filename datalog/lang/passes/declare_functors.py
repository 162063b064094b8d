"""Pass: collect the user-defined functors (`.functor`) with their erased types.

Layer: datalog. Reports duplicate declarations, unknown parameter or result
types (with a did-you-mean) and `stateful` functors, which are refused: a functor
here is a pure Python function of its arguments, called again whenever
incremental maintenance re-derives or retracts a row (see ADR 0015).
"""

from __future__ import annotations

from datalog.lang.ast import ColumnType, FunctorDecl, Span, UserFunctor
from datalog.lang.errors import (
    DuplicateDeclarationError,
    UnknownNameError,
    UnsupportedError,
    did_you_mean,
)
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.resolve_types import PRIMITIVE_TYPES, column_type


def declare_functors(ctx: CheckContext) -> None:
    for decl in ctx.program.functors:
        if decl.name in ctx.functors:
            first = ctx.functors[decl.name].span
            where = f" (first declared at line {first.line})" if first.line else ""
            message = f"functor `@{decl.name}` is declared twice{where}"
            ctx.report(DuplicateDeclarationError, message, decl.span)
            continue
        ctx.functors[decl.name] = decl
        if decl.stateful:
            message = (
                f"stateful functors are not supported (`@{decl.name}` is declared "
                "`stateful`): a functor must be a pure function of its arguments"
            )
            ctx.report(UnsupportedError, message, decl.span)
            continue
        signature = _signature(ctx, decl)
        if signature is not None:
            ctx.signatures[decl.name] = signature


def _signature(ctx: CheckContext, decl: FunctorDecl) -> UserFunctor | None:
    params: list[ColumnType] = []
    for param in decl.params:
        kind = _type(ctx, param.type, decl, param.span)
        if kind is not None:
            params.append(kind)
    result = _type(ctx, decl.result, decl, decl.span)
    if result is None or len(params) != len(decl.params):
        return None
    return UserFunctor(decl.name, tuple(params), result)


def _type(ctx: CheckContext, name: str, decl: FunctorDecl, span: Span) -> ColumnType | None:
    resolved = column_type(ctx, name)
    if resolved is None and not any(t.name == name for t in ctx.program.types):
        hint = did_you_mean(name, [*PRIMITIVE_TYPES, *ctx.type_names])
        message = f"unknown type `{name}` in functor `@{decl.name}`{hint}"
        ctx.report(UnknownNameError, message, span)
    return resolved
