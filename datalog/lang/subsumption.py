"""Subsumptive clauses in a normal form the planner and the reference evaluator share.

Layer: datalog (language). Imports only the AST and the variable walkers.

`r(x, d1) <= r(x, d2) :- d2 <= d1.` removes a tuple of `r` (the *dominated* one)
while another tuple (the *dominating* one) satisfies the condition. A clause is
normalized into a `Dominance`: its variables renamed to the columns they stand
for (`dominated_var(i)` is column i of the dominated tuple, `dominating_var(i)` of the
dominating one); constants and repeated variables in the atoms become equalities;
the positions holding one variable in both atoms are the *group*: only tuples that
agree on them compete.

Semantics (ADR 0017): a present tuple `t` is removed iff some other present tuple
`u` *beats* it: `u` dominates `t` and either `t` does not dominate `u` or `u`
comes first in the order of values (symbols ordered as strings). A tuple never
dominates itself, and of tuples dominating each other exactly one, the least,
survives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from datalog.lang.ast import NOWHERE, ColumnType, Comparison, Const, Span, Subsumption, Term, Var
from datalog.lang.passes.variables import map_term

__all__ = [
    "Dominance",
    "dominances_by_relation",
    "dominated_var",
    "dominating_var",
    "normalize",
    "shared_group",
]


def dominated_var(i: int) -> str:
    """The variable standing for column `i` of the dominated tuple."""
    return f"#d{i}"


def dominating_var(i: int) -> str:
    """The variable standing for column `i` of the dominating tuple."""
    return f"#w{i}"


@dataclass(frozen=True)
class Dominance:
    """One subsumptive clause of `relation`, normalized (see the module docstring)."""

    relation: str
    kinds: tuple[ColumnType, ...]
    group: tuple[int, ...]
    condition: tuple[Comparison, ...]
    span: Span = field(default=NOWHERE, compare=False)

    @property
    def types(self) -> dict[str, ColumnType]:
        """The column type of every renamed variable."""
        found: dict[str, ColumnType] = {}
        for i, kind in enumerate(self.kinds):
            found[dominated_var(i)] = found[dominating_var(i)] = kind
        return found

    def condition_within(self, key: Sequence[int]) -> tuple[Comparison, ...]:
        """The condition for tuples grouped only by `key` (a subset of `group`): the
        clause's other group positions must then hold equal values."""
        extra = tuple(_equal(Var(dominated_var(i)), Var(dominating_var(i))) for i in self.group)
        return tuple(c for i, c in zip(self.group, extra, strict=True) if i not in key) + (
            self.condition
        )


def shared_group(dominances: Sequence[Dominance]) -> tuple[int, ...]:
    """The positions every clause of one relation groups by: they key its reduce."""
    common = set(dominances[0].group)
    for dominance in dominances[1:]:
        common &= set(dominance.group)
    return tuple(sorted(common))


def normalize(clause: Subsumption, kinds: Sequence[ColumnType]) -> Dominance:
    """`clause` (checked: one relation, variables, constants and `_` as arguments,
    comparisons as its body) as a `Dominance`."""
    low, high = clause.dominated.args, clause.dominating.args
    group = tuple(
        i
        for i, (a, b) in enumerate(zip(low, high, strict=True))
        if isinstance(a, Var) and isinstance(b, Var) and a.name == b.name
    )
    renamed: dict[str, str] = {}
    equalities: list[Comparison] = []
    for i in group:
        _occurrence(low[i], dominated_var(i), renamed, equalities)
    for atom, name in ((clause.dominated, dominated_var), (clause.dominating, dominating_var)):
        for i, arg in enumerate(atom.args):
            if i not in group:
                _occurrence(arg, name(i), renamed, equalities)

    def rename(term: Term) -> Term:
        return Var(renamed[term.name], term.span) if isinstance(term, Var) else term

    condition = [
        Comparison(c.op, map_term(c.left, rename), map_term(c.right, rename), c.span)
        for c in clause.body
        if isinstance(c, Comparison)
    ]
    return Dominance(
        clause.dominated.name, tuple(kinds), group, (*equalities, *condition), clause.span
    )


def _occurrence(
    arg: Term, column: str, renamed: dict[str, str], equalities: list[Comparison]
) -> None:
    """Record the argument at `column`: a variable's first occurrence names it; a
    later one, or a constant, is an equality."""
    if isinstance(arg, Var):
        if arg.name in renamed:
            equalities.append(_equal(Var(column), Var(renamed[arg.name])))
        else:
            renamed[arg.name] = column
    elif isinstance(arg, Const):
        equalities.append(_equal(Var(column), arg))


def _equal(left: Term, right: Term) -> Comparison:
    return Comparison("=", left, right)


def dominances_by_relation(dominances: Sequence[Dominance]) -> Mapping[str, tuple[Dominance, ...]]:
    """The clauses of each subsumed relation, in program order."""
    found: dict[str, tuple[Dominance, ...]] = {}
    for dominance in dominances:
        found[dominance.relation] = (*found.get(dominance.relation, ()), dominance)
    return found
