"""The state the checker's passes share while checking one program.

Layer: datalog. Imports the AST, errors and schema. Passes read what earlier
passes built (type names, relations, normalized rules) and append errors; no
pass raises, so every error of a program is reported together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from datalog.lang.ast import Atom, ColumnType, Decl, FunctorDecl, Program, Rule, Span, UserFunctor
from datalog.lang.errors import DatalogError
from datalog.lang.schema import RelationInfo
from datalog.lang.subsumption import Dominance


@dataclass
class CheckContext:
    program: Program
    errors: list[DatalogError] = field(default_factory=list)
    type_names: dict[str, ColumnType] = field(default_factory=dict)
    declarations: dict[str, Decl] = field(default_factory=dict)  # first of each name
    relations: dict[str, RelationInfo] = field(default_factory=dict)  # fully typed ones
    rules: list[Rule] = field(default_factory=list)  # normalized, no facts
    facts: list[Rule] = field(default_factory=list)
    variable_types: list[dict[str, ColumnType]] = field(default_factory=list)
    functors: dict[str, FunctorDecl] = field(default_factory=dict)  # first of each name
    signatures: dict[str, UserFunctor] = field(default_factory=dict)  # fully typed ones
    dominances: list[Dominance] = field(default_factory=list)  # checked subsumptive clauses

    def report(self, error_type: type[DatalogError], message: str, span: Span) -> None:
        self.errors.append(error_type(message, span, self.program.source))

    def known(self, atom: Atom) -> RelationInfo | None:
        """The relation of `atom` if it is declared with the atom's arity."""
        info = self.relations.get(atom.name)
        if info is None or info.arity != len(atom.args):
            return None
        return info

    def functor_arity(self, name: str) -> int | None:
        """The arity of the user-defined functor `name` (no `@`), None if undeclared."""
        if name in self.signatures:
            return len(self.signatures[name].params)
        decl = self.functors.get(name)
        return None if decl is None else len(decl.params)

    def clauses(self) -> list[Rule]:
        """Every normalized clause: rules, then facts."""
        return self.rules + self.facts
