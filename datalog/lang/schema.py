"""The schema of a program: every declared relation with its primitive column types.

Layer: datalog. Imports only the AST and the errors. A `Schema` is built by the
checker (`datalog.lang.checks`) from `.decl`s after `.type` names are erased to their
primitive bases, so every consumer sees only number/unsigned/float/symbol.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from datalog.lang.ast import NOWHERE, ColumnType, Decl, Semantics, Span, UserFunctor
from datalog.lang.errors import UnknownNameError, did_you_mean


@dataclass(frozen=True)
class RelationInfo:
    """One declared relation: its name, primitive column types and input semantics."""

    name: str
    types: tuple[ColumnType, ...]
    column_names: tuple[str, ...]
    semantics: Semantics
    decl: Decl = field(compare=False, repr=False)

    @property
    def arity(self) -> int:
        return len(self.types)


@dataclass(frozen=True)
class Schema:
    """Relation name -> `RelationInfo`, in declaration order; the user-defined
    functors (`.functor`, name without `@` -> signature); and the `.type` names with
    the primitive types they erase to (for `as(x, T)` in queries)."""

    relations: Mapping[str, RelationInfo] = field(default_factory=dict)
    functors: Mapping[str, UserFunctor] = field(default_factory=dict)
    type_names: Mapping[str, ColumnType] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "relations", MappingProxyType(dict(self.relations)))
        object.__setattr__(self, "functors", MappingProxyType(dict(self.functors)))
        object.__setattr__(self, "type_names", MappingProxyType(dict(self.type_names)))

    def __contains__(self, name: object) -> bool:
        return name in self.relations

    def __iter__(self) -> Iterator[str]:
        return iter(self.relations)

    def __len__(self) -> int:
        return len(self.relations)

    def __getitem__(self, name: str) -> RelationInfo:
        return self.require(name)

    def get(self, name: str) -> RelationInfo | None:
        return self.relations.get(name)

    def require(self, name: str, span: Span = NOWHERE) -> RelationInfo:
        """The relation `name`, or an `UnknownNameError` with a did-you-mean."""
        info = self.relations.get(name)
        if info is None:
            hint = did_you_mean(name, self.relations)
            raise UnknownNameError(f"unknown relation `{name}`{hint}", span)
        return info

    def arity(self, name: str) -> int:
        return self.require(name).arity

    def types(self, name: str) -> tuple[ColumnType, ...]:
        return self.require(name).types

    def names(self) -> tuple[str, ...]:
        return tuple(self.relations)
