"""Pass: build the schema from `.decl`s.

Layer: datalog. Reports duplicate declarations, unknown column types (with a
did-you-mean) and `last_write_wins` on a relation that is not binary.
"""

from __future__ import annotations

from datalog.lang.ast import ColumnType, Decl
from datalog.lang.errors import (
    DatalogSemanticError,
    DuplicateDeclarationError,
    UnknownNameError,
    did_you_mean,
)
from datalog.lang.passes.check_reserved_names import refused_decls
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.resolve_types import PRIMITIVE_TYPES, column_type
from datalog.lang.schema import RelationInfo


def declare_relations(ctx: CheckContext) -> None:
    refused = refused_decls(ctx.program.decls)  # reported by `check_reserved_names`
    for decl in ctx.program.decls:
        if any(decl is r for r in refused):
            continue
        if decl.name in ctx.declarations:
            first = ctx.declarations[decl.name].span
            where = f" (first declared at line {first.line})" if first.line else ""
            message = f"relation `{decl.name}` is declared twice{where}"
            ctx.report(DuplicateDeclarationError, message, decl.span)
            continue
        ctx.declarations[decl.name] = decl
        if "eqrel" in decl.qualifiers and (
            decl.arity != 2 or decl.columns[0].type != decl.columns[1].type
        ):
            message = f"`eqrel` needs a binary relation of one type; `{decl.name}` is not"
            ctx.report(DatalogSemanticError, message, decl.span)
        info = _relation_info(ctx, decl)
        if info is not None:
            ctx.relations[decl.name] = info


def _relation_info(ctx: CheckContext, decl: Decl) -> RelationInfo | None:
    types: list[ColumnType] = []
    names: set[str] = set()
    for column in decl.columns:
        if column.name in names:
            message = f"column `{column.name}` of `{decl.name}` is declared twice"
            ctx.report(DuplicateDeclarationError, message, column.span)
        names.add(column.name)
        resolved = column_type(ctx, column.type)
        if resolved is None:
            if not _is_declared_type(ctx, column.type):
                hint = did_you_mean(column.type, [*PRIMITIVE_TYPES, *ctx.type_names])
                ctx.report(UnknownNameError, f"unknown type `{column.type}`{hint}", column.span)
            return None
        types.append(resolved)
    if decl.semantics == "last_write_wins" and decl.arity != 2:
        message = (
            f"`last_write_wins` needs a binary relation (entity, value); "
            f"`{decl.name}` has {decl.arity} columns"
        )
        ctx.report(DatalogSemanticError, message, decl.span)
    columns = tuple(column.name for column in decl.columns)
    return RelationInfo(decl.name, tuple(types), columns, decl.semantics, decl)


def _is_declared_type(ctx: CheckContext, name: str) -> bool:
    """A `.type` that exists but failed to resolve (already reported)."""
    return any(t.name == name for t in ctx.program.types)
