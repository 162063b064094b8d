"""Pass: only the database defines the reserved `deltalog.*` relations.

Layer: datalog. Imports the AST, errors and `datalog.lang.system`. A `.decl` (other
than the database's own), a rule or fact head, a subsumptive clause or an
`.input` in the `deltalog.` namespace is an error at its span; reading the
relations in bodies and queries is allowed. The same definitions of a name
beginning with `__` (the engine's internal relations, as `__unit__`) are errors
too. `declare_relations` skips the refused declarations, so a refused one is
reported once. The database's own declarations come first in every program; equal
ones later are a user's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from datalog.lang.ast import Decl, Program, Span
from datalog.lang.errors import DatalogSemanticError
from datalog.lang.passes.context import CheckContext
from datalog.lang.system import (
    internal_message,
    is_internal,
    is_reserved,
    is_system_decl,
    reserved_message,
)


def check_reserved_names(ctx: CheckContext) -> None:
    for name, span in _definitions(ctx.program):
        if is_reserved(name):
            ctx.report(DatalogSemanticError, reserved_message(name), span)
        elif is_internal(name):
            ctx.report(DatalogSemanticError, internal_message(name), span)


def _definitions(program: Program) -> Iterator[tuple[str, Span]]:
    """What `program` defines: declarations (but the database's own), rule and fact
    heads, subsumed relations and `.input`s, each with its span."""
    yield from ((d.name, d.span) for d in refused_decls(program.decls))
    yield from ((r.head.name, r.head.span) for r in program.rules)
    yield from ((s.dominated.name, s.dominated.span) for s in program.subsumptions)
    yield from ((d.relation, d.span) for d in program.directives if d.kind == "input")


def refused_decls(decls: Iterable[Decl]) -> list[Decl]:
    """The declarations in the reserved namespace but the database's own (the first
    declaration of each reserved name, if it is the database's), and those of
    internal names."""
    seen: set[str] = set()
    refused = []
    for decl in decls:
        if is_internal(decl.name):
            refused.append(decl)
        elif is_reserved(decl.name):
            if decl.name in seen or not is_system_decl(decl):
                refused.append(decl)
            seen.add(decl.name)
    return refused
