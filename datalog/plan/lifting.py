"""Aggregates lifted out of a body and wildcards named: the rewrites that give a
body's literals the variables the join passes order (`choose_join`, `order_joins`).

Layer: datalog.plan. Imports the language only.

Soufflé semantics: the variables of an aggregate's body that also occur outside it
group it. Each aggregate of a comparison becomes a fresh variable (`_agg#n`)
computed by its `Lifted` aggregation, and each `_` of a positive atom of an
aggregate's body a fresh variable (`_w#n`), so every assignment the aggregate
ranges over has multiplicity one. Both keep every literal at its position.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from datalog.lang.ast import Aggregate, Atom, ColumnType, Comparison, Literal, Term, Var, Wildcard
from datalog.lang.passes.term_types import resolve_type
from datalog.lang.passes.variables import aggregate_groups, replace_aggregates
from datalog.lang.schema import Schema

# A fresh variable of a type, named after a prefix (`_agg`, `_w`, `_e`, ...).
Namer = Callable[[ColumnType, str], str]


@dataclass(frozen=True)
class Lifted:
    """One aggregate of a body, lifted out as `result = aggregate`."""

    term: Aggregate
    result: str
    groups: frozenset[str]


def lift_aggregates(
    body: Sequence[Literal],
    groups: Mapping[int, frozenset[str]],
    types: Mapping[str, ColumnType],
    fresh: Namer,
) -> tuple[list[Literal], list[Lifted]]:
    """The body with each aggregate replaced by a fresh variable, and the aggregations."""
    found: list[Lifted] = []

    def lifted(term: Aggregate) -> Term:
        name = fresh(aggregate_type(term, types), "_agg")
        found.append(Lifted(term, name, groups.get(id(term), frozenset())))
        return Var(name, term.span)

    def lift(term: Term) -> Term:
        return replace_aggregates(term, lifted)  # iterative: sums nest 400 deep

    out: list[Literal] = []
    for lit in body:
        if isinstance(lit, Comparison):
            out.append(replace(lit, left=lift(lit.left), right=lift(lit.right)))
        else:
            out.append(lit)
    return out, found


def groups_of(head: Sequence[Term], body: Sequence[Literal]) -> dict[int, frozenset[str]]:
    """`aggregate_groups`, skipped for a body without a comparison (where aggregates
    are: the checker lifted the head's into the body), which is most of them."""
    if not any(isinstance(lit, Comparison) for lit in body):
        return {}
    return aggregate_groups(head, body)


def aggregate_type(term: Aggregate, types: Mapping[str, ColumnType]) -> ColumnType:
    if term.function == "count":
        return "number"
    if term.function == "mean":
        return "float"
    assert term.target is not None
    return resolve_type(term.target, types)


def name_wildcards(body: Sequence[Literal], schema: Schema, fresh: Namer) -> tuple[Literal, ...]:
    """An aggregate's body with each `_` of a positive atom a fresh variable."""
    return tuple(_named(lit, schema, fresh) for lit in body)


def _named(lit: Literal, schema: Schema, fresh: Namer) -> Literal:
    if not isinstance(lit, Atom):
        return lit
    kinds = schema.types(lit.name)
    args = tuple(
        Var(fresh(kinds[i], "_w")) if isinstance(a, Wildcard) else a for i, a in enumerate(lit.args)
    )
    return replace(lit, args=args)
