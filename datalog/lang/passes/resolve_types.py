"""Pass: erase `.type` names to their primitive base column types.

Layer: datalog. `.type Id <: number`, `.type Name = symbol` and unions
`.type T = A | B` all erase to one of number/unsigned/float/symbol; a union of
different bases, a cycle or an unknown base is an error. Each type is erased once,
and the walk is iterative: a chain of thousands of subtypes, or unions whose bases
share bases (which a walk per path would visit exponentially often), take time
linear in the declarations.
"""

from __future__ import annotations

from collections.abc import Iterator

from datalog.lang.ast import ColumnType, TypeDecl
from datalog.lang.errors import (
    DuplicateDeclarationError,
    TypeMismatchError,
    UnknownNameError,
    did_you_mean,
)
from datalog.lang.functions import NUMERIC_TYPES
from datalog.lang.passes.context import CheckContext

PRIMITIVE_TYPES: tuple[ColumnType, ...] = (*NUMERIC_TYPES, "symbol")


def resolve_types(ctx: CheckContext) -> None:
    declared: dict[str, TypeDecl] = {}
    for decl in ctx.program.types:
        if decl.name in declared or decl.name in PRIMITIVE_TYPES:
            message = f"type `{decl.name}` is declared twice"
            ctx.report(DuplicateDeclarationError, message, decl.span)
            continue
        declared[decl.name] = decl
    erased: dict[str, ColumnType | None] = {}
    for name in declared:
        _Eraser(ctx, declared, erased).erase(name)
    for name in declared:
        resolved = erased.get(name)
        if resolved is not None:
            ctx.type_names[name] = resolved


class _Eraser:
    """A depth-first walk from one type through its bases, without recursion (a chain
    of thousands of subtypes is fine), each type erased once (`erased` is shared)."""

    def __init__(
        self,
        ctx: CheckContext,
        declared: dict[str, TypeDecl],
        erased: dict[str, ColumnType | None],
    ) -> None:
        self.ctx, self.declared, self.erased = ctx, declared, erased
        self.path: list[str] = []  # the types being erased, outermost first
        self.bases: list[Iterator[str]] = []  # the bases each still has to look at
        self.found: list[set[ColumnType]] = []  # the primitive types each reached
        self.cyclic: set[str] = set()

    def erase(self, root: str) -> None:
        if root not in self.erased:
            self._enter(root)
        while self.path:
            base = next(self.bases[-1], None)
            if base is None:
                self._leave()
            elif base in PRIMITIVE_TYPES:
                self.found[-1].add(base)
            elif base in self.erased:
                resolved = self.erased[base]
                if resolved is not None:
                    self.found[-1].add(resolved)
            elif base in self.path:
                self._cycle(self.path[self.path.index(base) :])
            else:
                self._enter(base)

    def _enter(self, name: str) -> None:
        self.path.append(name)
        self.bases.append(iter(self._known_bases(self.declared[name])))
        self.found.append(set())

    def _known_bases(self, decl: TypeDecl) -> list[str]:
        known = []
        for base in decl.bases:
            if base in self.declared or base in PRIMITIVE_TYPES:
                known.append(base)
            else:
                hint = did_you_mean(base, [*PRIMITIVE_TYPES, *self.declared])
                self.ctx.report(UnknownNameError, f"unknown type `{base}`{hint}", decl.span)
        return known

    def _leave(self) -> None:
        name, found = self.path.pop(), self.found.pop()
        self.bases.pop()
        resolved = found.pop() if len(found) == 1 and name not in self.cyclic else None
        if len(found) > 1:
            kinds = " and ".join(sorted(found))
            message = f"type `{name}` mixes {kinds}"
            self.ctx.report(TypeMismatchError, message, self.declared[name].span)
        self.erased[name] = resolved
        if resolved is not None and self.found:
            self.found[-1].add(resolved)

    def _cycle(self, members: list[str]) -> None:
        """Each type of the cycle is reported, the cycle read from it."""
        for at, name in enumerate(members):
            cycle = " -> ".join((*members[at:], *members[:at], name))
            message = f"type `{name}` is defined in a cycle ({cycle})"
            self.ctx.report(TypeMismatchError, message, self.declared[name].span)
        self.cyclic.update(members)


def column_type(ctx: CheckContext, name: str) -> ColumnType | None:
    """The primitive type a column type name erases to, None if unknown."""
    for primitive in PRIMITIVE_TYPES:
        if name == primitive:
            return primitive
    return ctx.type_names.get(name)
