"""Pass: only the database defines the reserved `deltalog.*` relations.

Layer: datalog. Imports the AST, errors and `datalog.system`. A `.decl` (other
than the database's own), a rule or fact head, a subsumptive clause or an
`.input` in the `deltalog.` namespace is an error at its span; reading the
relations in bodies and queries is allowed. `declare_relations` skips the
refused declarations, so a refused one is reported once.
"""

from __future__ import annotations

from collections.abc import Iterator

from datalog.ast import Decl, Program, Span
from datalog.errors import DatalogSemanticError
from datalog.passes.context import CheckContext
from datalog.system import is_reserved, is_system_decl, reserved_message


def check_reserved_names(ctx: CheckContext) -> None:
    for name, span in _definitions(ctx.program):
        if is_reserved(name):
            ctx.report(DatalogSemanticError, reserved_message(name), span)


def _definitions(program: Program) -> Iterator[tuple[str, Span]]:
    """What `program` defines: declarations (not the database's own), rule and fact
    heads, subsumed relations and `.input`s, each with its span."""
    yield from ((d.name, d.span) for d in program.decls if not is_system_decl(d))
    yield from ((r.head.name, r.head.span) for r in program.rules)
    yield from ((s.dominated.name, s.dominated.span) for s in program.subsumptions)
    yield from ((d.relation, d.span) for d in program.directives if d.kind == "input")


def refused_decl(decl: Decl) -> bool:
    """A user's declaration in the reserved namespace."""
    return is_reserved(decl.name) and not is_system_decl(decl)
