"""The reserved `deltalog.*` relations: their names and declarations.

Layer: datalog (language). Imports only the AST. Every program holds these
declarations first (the database adds them); the checker refuses any other use of
the `deltalog.` namespace as a definition: another `.decl`, a rule or fact head, a
subsumptive clause or an `.input`. Reading them in rule bodies and queries is the
point. `datalog.db.introspection` keeps their contents. Names beginning with `__` are
the engine's internal relations (`__unit__`): no program may define one at all.
"""

from __future__ import annotations

from datalog.lang.ast import Column, Decl

PREFIX = "deltalog."
RELATION = "deltalog.relation"
ARRANGEMENT = "deltalog.arrangement"
DATAFLOW = "deltalog.dataflow"


def _decl(name: str, *columns: tuple[str, str]) -> Decl:
    return Decl(name, tuple(Column(column, kind) for column, kind in columns))


DECLS: tuple[Decl, ...] = (
    _decl(RELATION, ("name", "symbol"), ("tuples", "number")),
    _decl(
        ARRANGEMENT,
        ("name", "symbol"),
        ("tuples", "number"),
        ("batches", "number"),
        ("readers", "number"),
    ),
    _decl(DATAFLOW, ("query", "symbol"), ("operators", "number"), ("subscribers", "number")),
)
NAMES = frozenset(decl.name for decl in DECLS)
ARITIES = {decl.name: decl.arity for decl in DECLS}


def is_reserved(name: str) -> bool:
    """Whether `name` lies in the namespace only the database defines."""
    return name.startswith(PREFIX)


INTERNAL_PREFIX = "__"  # the engine's own relations, as `__unit__` (one empty tuple)
UNIT = "__unit__"  # one empty tuple: what a body with no positive atom joins with


def is_internal(name: str) -> bool:
    """Whether `name` lies in the namespace of the engine's own internal relations,
    which no program may declare, derive or load (they would alias them)."""
    return name.startswith(INTERNAL_PREFIX)


def internal_message(name: str) -> str:
    return (
        f"`{name}` is reserved: names beginning with `{INTERNAL_PREFIX}` belong to the "
        "engine's own relations; choose another name"
    )


def is_system_decl(decl: Decl) -> bool:
    """Whether `decl` declares a reserved relation as the database does (equal up to
    position; programs rewritten from a checked one, as the magic-set one, copy it)."""
    return decl in DECLS


def reserved_message(name: str) -> str:
    return (
        f"`{name}` is reserved: the database maintains the `deltalog.*` relations "
        "(introspection); they can be read in queries and rule bodies, "
        "never declared, derived, loaded or written"
    )
