"""The semantic checker: a parsed program or query in, a checked one out.

Layer: datalog. May import the datalog language modules (ast, errors, schema,
functions, strata, passes) and the budget check of `differential.dataflow`; never
`joins` or `server`.

`check_program` expands components (`instantiate_components`), then runs the
passes of `PASSES` in order over the AST, collects every error and raises them
together (`errors.raise_all`). The result holds the schema
(primitive column types), the rules normalized (no disjunction, facts apart),
the strata in evaluation order and the type of every variable of every rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from datalog.lang.ast import ColumnType, Directive, Literal, Pragma, Program, Query, Rule
from datalog.lang.errors import RangeRestrictionError, TypeMismatchError, ordered_errors, raise_all
from datalog.lang.passes.attach_signatures import attach_signatures, signed_body
from datalog.lang.passes.check_arity import check_arity, check_clause_arity
from datalog.lang.passes.check_directives import check_directives
from datalog.lang.passes.check_generators import check_clause_generators, check_generators
from datalog.lang.passes.check_names import check_clause_names, check_names
from datalog.lang.passes.check_patterns import check_clause_patterns, check_patterns
from datalog.lang.passes.check_range_restriction import check_clause, check_range_restriction
from datalog.lang.passes.check_reserved_names import check_reserved_names
from datalog.lang.passes.check_subsumptions import check_subsumptions
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.declare_functors import declare_functors
from datalog.lang.passes.declare_relations import declare_relations
from datalog.lang.passes.fold_facts import fold_facts
from datalog.lang.passes.infer_types import Types, infer_clause_types, infer_types
from datalog.lang.passes.instantiate_components import instantiate_components
from datalog.lang.passes.lift_aggregates import lift_body
from datalog.lang.passes.normalize_disjunctions import (
    check_aggregate_disjunctions,
    expand_body,
    normalize_disjunctions,
)
from datalog.lang.passes.resolve_casts import cast_body, resolve_casts
from datalog.lang.passes.resolve_types import resolve_types
from datalog.lang.passes.scope_aggregates import scope_aggregates
from datalog.lang.passes.stratify_rules import stratify_rules
from datalog.lang.passes.variables import occurrences
from datalog.lang.schema import Schema
from datalog.lang.strata import Stratum, reads
from datalog.lang.subsumption import Dominance, dominances_by_relation
from differential.dataflow import check_budget

__all__ = [
    "PASSES",
    "CheckedProgram",
    "CheckedQuery",
    "Stratum",
    "check_program",
    "check_query",
    "dependencies",
]

PASSES: tuple[Callable[[CheckContext], None], ...] = (
    resolve_types,
    check_reserved_names,
    declare_relations,
    declare_functors,
    normalize_disjunctions,
    attach_signatures,
    resolve_casts,
    check_names,
    check_directives,
    check_generators,
    check_patterns,
    check_arity,
    check_range_restriction,
    infer_types,
    fold_facts,
    check_subsumptions,
)


@dataclass(frozen=True)
class CheckedProgram:
    """A program that passed every check. `variable_types[i]` types `rules[i]`;
    `dominances` holds the subsumptive clauses of each subsumed relation."""

    schema: Schema
    rules: tuple[Rule, ...]
    facts: tuple[Rule, ...]
    strata: tuple[Stratum, ...]
    directives: tuple[Directive, ...]
    variable_types: tuple[Mapping[str, ColumnType], ...]
    source: str = field(default="", compare=False, repr=False)
    dominances: Mapping[str, tuple[Dominance, ...]] = field(default_factory=dict)
    pragmas: tuple[Pragma, ...] = ()  # as written, in order (the planner reads some)
    _types_by_rule: dict[Rule, Mapping[str, ColumnType]] = field(
        init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        by_rule = dict(zip(self.rules, self.variable_types, strict=True))
        object.__setattr__(self, "_types_by_rule", by_rule)

    def types_of(self, rule: Rule) -> Mapping[str, ColumnType]:
        """The variable types of one of `rules` (facts have no variables)."""
        return self._types_by_rule.get(rule, {})


@dataclass(frozen=True)
class CheckedQuery:
    """A checked query: its alternative bodies (one unless it had disjunctions),
    the answer variables in order of first appearance and their types."""

    bodies: tuple[tuple[Literal, ...], ...]
    answer_vars: tuple[str, ...]
    answer_types: tuple[ColumnType, ...]
    variable_types: tuple[Mapping[str, ColumnType], ...]  # one per body
    schema: Schema = field(default_factory=Schema, compare=False, repr=False)
    source: str = field(default="", compare=False, repr=False)


def check_program(program: Program) -> CheckedProgram:
    """Check `program`; raise every error found together, or return it checked.

    Components are expanded first (their errors are raised alone: the other
    checks would only repeat them as unknown relations)."""
    program = instantiate_components(program)
    ctx = CheckContext(program)
    for check in PASSES:
        check_budget()  # each pass is linear in the program: a huge one stops between them
        check(ctx)
    strata = stratify_rules(ctx)
    raise_all(ordered_errors(ctx.errors, program.source))
    dominances = dominances_by_relation(ctx.dominances)
    return CheckedProgram(
        schema=Schema(ctx.relations, ctx.signatures, ctx.type_names),
        rules=tuple(ctx.rules),
        facts=tuple(ctx.facts),
        strata=strata,
        directives=program.directives,
        variable_types=tuple(ctx.variable_types),
        source=program.source,
        dominances=dominances,
        pragmas=program.pragmas,
    )


def dependencies(checked: CheckedProgram, relations: Iterable[str]) -> set[str]:
    """`relations` and every relation they read, transitively."""
    graph = reads(checked.rules)
    found: set[str] = set()
    pending = list(relations)
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending.extend(graph.get(name, ()))
    return found


def check_query(query: Query, schema: Schema) -> CheckedQuery:
    """Check a query against `schema`; raise every error found together."""
    ctx = CheckContext(Program(source=query.source))
    ctx.relations = dict(schema.relations)
    ctx.declarations = {name: info.decl for name, info in schema.relations.items()}
    ctx.signatures = dict(schema.functors)
    ctx.type_names = dict(schema.type_names)
    check_clause_names(ctx, query.body)
    check_clause_arity(ctx, query.body)
    check_aggregate_disjunctions(ctx, query.body)
    check_clause_patterns(ctx, (), query.body)
    answer_vars = _answer_variables(query.body)
    bodies = [
        cast_body(ctx, signed_body(scope_aggregates(lift_body(body)), schema.functors))
        for body in expand_body(query.body)
    ]
    types = []
    for body in bodies:
        check_clause_generators(ctx, (), body)
        check_clause(ctx, None, body)
        _check_answers_bound(ctx, query, body, answer_vars)
        types.append(infer_clause_types(ctx, body))
    answer_types = _answer_types(ctx, query, answer_vars, types)
    raise_all(ordered_errors(ctx.errors, query.source))
    return CheckedQuery(
        tuple(bodies), answer_vars, answer_types, tuple(types), schema, query.source
    )


def _answer_variables(body: Sequence[Literal]) -> tuple[str, ...]:
    """Named variables outside aggregate bodies, in order of first appearance."""
    names = (var.name for var, scope in occurrences((), body) if not scope)
    return tuple(dict.fromkeys(names))


def _check_answers_bound(
    ctx: CheckContext, query: Query, body: Sequence[Literal], answer_vars: tuple[str, ...]
) -> None:
    present = {var.name for var, _ in occurrences((), body)}
    for name in answer_vars:
        if name not in present:
            message = f"answer variable `{name}` is not bound in every alternative of the query"
            ctx.report(RangeRestrictionError, message, query.span)


def _answer_types(
    ctx: CheckContext, query: Query, answer_vars: tuple[str, ...], types: list[Types]
) -> tuple[ColumnType, ...]:
    found: list[ColumnType] = []
    for name in answer_vars:
        kinds = [t[name] for t in types if name in t]
        if len(set(kinds)) > 1:
            message = (
                f"answer variable `{name}` is {kinds[0]} in one alternative "
                f"and {kinds[-1]} in another"
            )
            ctx.report(TypeMismatchError, message, query.span)
        found.append(kinds[0] if kinds else "number")
    return tuple(found)
