"""Pass: erase `.type` names to their primitive base column types.

Layer: datalog. `.type Id <: number`, `.type Name = symbol` and unions
`.type T = A | B` all erase to one of number/unsigned/float/symbol; a union of
different bases, a cycle or an unknown base is an error.
"""

from __future__ import annotations

from datalog.ast import ColumnType, TypeDecl
from datalog.errors import (
    DuplicateDeclarationError,
    TypeMismatchError,
    UnknownNameError,
    did_you_mean,
)
from datalog.functions import NUMERIC_TYPES
from datalog.passes.context import CheckContext

PRIMITIVE_TYPES: tuple[ColumnType, ...] = (*NUMERIC_TYPES, "symbol")


def resolve_types(ctx: CheckContext) -> None:
    declared: dict[str, TypeDecl] = {}
    for decl in ctx.program.types:
        if decl.name in declared or decl.name in PRIMITIVE_TYPES:
            message = f"type `{decl.name}` is declared twice"
            ctx.report(DuplicateDeclarationError, message, decl.span)
            continue
        declared[decl.name] = decl
    for name in declared:
        resolved = _erase(ctx, name, declared, ())
        if resolved is not None:
            ctx.type_names[name] = resolved


def _erase(
    ctx: CheckContext, name: str, declared: dict[str, TypeDecl], path: tuple[str, ...]
) -> ColumnType | None:
    for primitive in PRIMITIVE_TYPES:
        if name == primitive:
            return primitive
    decl = declared[name]
    if name in path:
        cycle = " -> ".join((*path[path.index(name) :], name))
        ctx.report(TypeMismatchError, f"type `{name}` is defined in a cycle ({cycle})", decl.span)
        return None
    found: set[ColumnType] = set()
    for base in decl.bases:
        if base not in declared and base not in PRIMITIVE_TYPES:
            if not path:
                hint = did_you_mean(base, [*PRIMITIVE_TYPES, *declared])
                ctx.report(UnknownNameError, f"unknown type `{base}`{hint}", decl.span)
            continue
        resolved = _erase(ctx, base, declared, (*path, name))
        if resolved is not None:
            found.add(resolved)
    if len(found) > 1:
        if not path:
            kinds = " and ".join(sorted(found))
            ctx.report(TypeMismatchError, f"type `{name}` mixes {kinds}", decl.span)
        return None
    return found.pop() if found else None


def column_type(ctx: CheckContext, name: str) -> ColumnType | None:
    """The primitive type a column type name erases to, None if unknown."""
    for primitive in PRIMITIVE_TYPES:
        if name == primitive:
            return primitive
    return ctx.type_names.get(name)
