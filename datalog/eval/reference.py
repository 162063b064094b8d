"""The reference evaluator: the oracle every engine answer is compared with.

Layer: datalog. Plain Python, naive bottom-up evaluation with set semantics
(DESIGN §10). Imports only the datalog language modules, the scalar
semantics of `datalog.lang.functions` and `datalog.eval.functor_calls` for user functors
(a program with functors is bound first: `datalog.eval.functors.bind_program`);
never numpy-vectorized code, `differential` or `joins`. Slow on purpose:
obviously correct matters more than speed.

Values are Python int (number, unsigned), float and str (symbol). Each stratum
is evaluated to fixpoint by re-deriving every rule from the current relations
until nothing new appears. A body is solved literal by literal, always taking
the first literal whose inputs are bound (checked programs always have one).

A stratum with subsumed relations starts from nothing instead: each round adds
the facts and what the rules derive, then removes every dominated tuple
(`dominated`, pairwise over the relation), until a round changes nothing.

Aggregates (Soufflé semantics): the variables of the aggregate body that occur
outside it group it; the aggregate ranges over the SET of distinct satisfying
assignments of its body's variables, each `_` of a positive atom counting as
its own anonymous variable. `count` and `sum` of nothing are 0; `min`, `max`
and `mean` of nothing have no value (the rule does not fire); `mean` is a float;
`sum` wraps like the type it sums (float sums add the values in sorted order).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence

from datalog.eval.functor_calls import call_values
from datalog.lang import functions
from datalog.lang.ast import (
    BUILTIN_PREDICATES,
    Aggregate,
    Atom,
    BinOp,
    Call,
    Cast,
    ColumnType,
    Comparison,
    Const,
    Literal,
    Neg,
    Negation,
    Rule,
    Term,
    Var,
    Wildcard,
)
from datalog.lang.checks import CheckedProgram, CheckedQuery
from datalog.lang.errors import TransactionError
from datalog.lang.functions import Value
from datalog.lang.passes.check_generators import generator_binding
from datalog.lang.passes.term_types import comparison_type, resolve_type
from datalog.lang.passes.variables import aggregate_groups, needed, ready
from datalog.lang.schema import RelationInfo, Schema
from datalog.lang.subsumption import Dominance, dominated_var, dominating_var

Row = tuple[Value, ...]
Relations = dict[str, set[Row]]
Env = dict[str, Value]


def evaluate(checked: CheckedProgram, facts: Mapping[str, Iterable[Sequence[Value]]]) -> Relations:
    """Every relation of `checked`: base `facts`, program facts and derived tuples."""
    relations: Relations = {name: set() for name in checked.schema}
    for name, rows in facts.items():
        info = checked.schema.get(name)
        if info is None:
            raise TransactionError(f"unknown relation `{name}`")
        relations[name].update(coerce_row(info, row) for row in rows)
    for fact in checked.facts:
        solver = Solver(relations, checked.schema, {}, {})
        row = solver.head_row(fact.head, {})
        if row is not None:
            relations[fact.head.name].add(row)
    for stratum in checked.strata:
        rules = [(rule, checked.types_of(rule)) for rule in stratum.rules]
        if stratum.relations & checked.dominances.keys():
            _subsuming_fixpoint(rules, relations, checked, stratum.relations)
            continue
        while _derive_once(rules, relations, checked.schema):
            pass
    return relations


def _subsuming_fixpoint(
    rules: list[tuple[Rule, Mapping[str, ColumnType]]],
    relations: Relations,
    checked: CheckedProgram,
    members: Iterable[str],
) -> None:
    """A stratum with subsumed relations, from nothing: each round adds the facts and
    what the rules derive from the current tuples, then removes the dominated tuples
    of the subsumed relations; until a round changes nothing."""
    facts = {name: set(relations[name]) for name in members}
    current: dict[str, set[Row]] = {name: set() for name in members}
    while True:
        relations.update({name: set(rows) | facts[name] for name, rows in current.items()})
        _derive_once(rules, relations, checked.schema)
        for name, dominances in checked.dominances.items():
            if name in current:
                relations[name] -= dominated(relations[name], dominances)
        if all(relations[name] == current[name] for name in current):
            return
        current = {name: set(relations[name]) for name in current}


def answer(checked: CheckedQuery, relations: Mapping[str, set[Row]]) -> set[Row]:
    """The answer of a checked query against computed `relations`."""
    found: set[Row] = set()
    for body, types in zip(checked.bodies, checked.variable_types, strict=True):
        solver = Solver(relations, checked.schema, types, aggregate_groups((), body))
        for env in solver.solve(body, {}):
            found.add(tuple(env[name] for name in checked.answer_vars))
    return found


def coerce_row(info: RelationInfo, row: Sequence[Value]) -> Row:
    """A user-supplied row as values of the relation's column types."""
    if len(row) != info.arity:
        raise TransactionError(f"`{info.name}` has {info.arity} columns, got a row of {len(row)}")
    return tuple(
        _coerce(info.name, value, kind) for value, kind in zip(row, info.types, strict=True)
    )


def _coerce(name: str, value: Value, kind: ColumnType) -> Value:
    if kind == "symbol" and isinstance(value, str):
        return value
    if kind == "float" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind in functions.INTEGER_TYPES and isinstance(value, int) and not isinstance(value, bool):
        return functions.wrap(value, kind)
    raise TransactionError(f"`{name}` expects a {kind}, got {value!r}")


def _derive_once(
    rules: list[tuple[Rule, Mapping[str, ColumnType]]], relations: Relations, schema: Schema
) -> bool:
    """Apply every rule once to the current relations; whether anything was new."""
    derived: list[tuple[str, Row]] = []
    for rule, types in rules:
        solver = Solver(relations, schema, types, aggregate_groups(rule.head.args, rule.body))
        for env in solver.solve(rule.body, {}):
            row = solver.head_row(rule.head, env)
            if row is not None:
                derived.append((rule.head.name, row))
    new = False
    for name, row in derived:
        if row not in relations[name]:
            relations[name].add(row)
            new = True
    return new


def dominated(rows: set[Row], dominances: Sequence[Dominance]) -> set[Row]:
    """The rows some other row beats under any of `dominances` (one relation's
    subsumptive clauses): it dominates the row, and either the row does not
    dominate it or it is the lesser of the two (`datalog.lang.subsumption`)."""

    def dominates(low: Row, high: Row) -> bool:
        return any(_dominates(d, low, high) for d in dominances)

    return {
        row
        for row in rows
        for other in rows
        if other != row and dominates(row, other) and (other < row or not dominates(other, row))
    }


def _dominates(dominance: Dominance, low: Row, high: Row) -> bool:
    """Whether `high` dominates `low` under one normalized clause."""
    if any(low[i] != high[i] for i in dominance.group):
        return False
    env: Env = {dominated_var(i): v for i, v in enumerate(low)}
    env.update({dominating_var(i): v for i, v in enumerate(high)})
    solver = Solver({}, Schema(), dominance.types, {})
    return all(any(True for _ in solver.compare(c, env)) for c in dominance.condition)


class Solver:
    """Solves bodies against fixed relations, given the types of the variables."""

    def __init__(
        self,
        relations: Mapping[str, set[Row]],
        schema: Schema,
        types: Mapping[str, ColumnType],
        groups: Mapping[int, frozenset[str]],
    ) -> None:
        self.relations = relations
        self.schema = schema
        self.types = types
        self.groups = groups
        self.fresh = itertools.count()

    def solve(self, body: Sequence[Literal], env: Env) -> Iterator[Env]:
        """Every extension of `env` that satisfies all of `body`."""
        if not body:
            yield env
            return
        index = next((i for i, lit in enumerate(body) if self.ready(lit, env)), None)
        if index is None:
            raise RuntimeError(f"no literal of {body} can be evaluated; was it checked?")
        rest = (*body[:index], *body[index + 1 :])
        for extended in self.apply(body[index], env):
            yield from self.solve(rest, extended)

    def needs(self, term: Term) -> set[str]:
        return needed(term, self.groups)

    def ready(self, literal: Literal, env: Env) -> bool:
        return ready(literal, env.keys(), self.groups)

    def apply(self, literal: Literal, env: Env) -> Iterator[Env]:
        if isinstance(literal, Atom):
            yield from self.match_atom(literal, env)
        elif isinstance(literal, Negation):
            if not any(True for _ in self.match_atom(literal.atom, env)):
                yield env
        else:
            assert isinstance(literal, Comparison)
            yield from self.compare(literal, env)

    def match_atom(self, atom: Atom, env: Env) -> Iterator[Env]:
        kinds = self.schema.types(atom.name)
        expected: list[Value | None] = []
        for arg, kind in zip(atom.args, kinds, strict=True):
            if isinstance(arg, Var | Wildcard):
                expected.append(None)
                continue
            value = self.value(arg, env, kind)
            if value is None:
                return  # an argument without a value: the binding is dropped
            expected.append(value)
        for row in list(self.relations.get(atom.name, ())):
            extended = self.unify(atom.args, expected, row, env)
            if extended is not None:
                yield extended

    def unify(
        self, args: Sequence[Term], expected: list[Value | None], row: Row, env: Env
    ) -> Env | None:
        extended = dict(env)
        for arg, want, value in zip(args, expected, row, strict=True):
            if isinstance(arg, Var):
                if extended.setdefault(arg.name, value) != value:
                    return None
            elif not isinstance(arg, Wildcard) and want != value:
                return None
        return extended

    def compare(self, comparison: Comparison, env: Env) -> Iterator[Env]:
        generated = generator_binding(comparison)
        if generated is not None:
            yield from self.generate(*generated, env)
            return
        left, right, op = comparison.left, comparison.right, comparison.op
        for side, other in ((left, right), (right, left)):
            if op == "=" and isinstance(side, Var) and side.name not in env:
                value = self.value(other, env, self.types.get(side.name))
                if value is not None:
                    yield {**env, side.name: value}
                return
        if op in BUILTIN_PREDICATES:
            shared: ColumnType = "symbol"
        else:
            shared = comparison_type(left, right, self.types)
        lv, rv = self.value(left, env, shared), self.value(right, env, shared)
        if lv is not None and rv is not None and functions.compare(op, lv, rv):
            yield env

    def generate(self, target: Var, call: Call, env: Env) -> Iterator[Env]:
        """`x = range(...)`: one extension per value (`x` bound: `env` if it is one)."""
        kind = self.types.get(target.name) or resolve_type(call, self.types)
        args = [self.evaluate(arg, env, kind) for arg in call.args]
        present = [arg for arg in args if arg is not None]
        if len(present) < len(args):
            return
        for value in functions.range_values(present, kind):
            if target.name not in env:
                yield {**env, target.name: value}
            elif env[target.name] == value:
                yield env

    def head_row(self, head: Atom, env: Env) -> Row | None:
        row: list[Value] = []
        for arg, kind in zip(head.args, self.schema.types(head.name), strict=True):
            value = self.value(arg, env, kind)
            if value is None:
                return None
            row.append(value)
        return tuple(row)

    def value(self, term: Term, env: Env, expected: ColumnType | None) -> Value | None:
        """The value of `term` where its context expects `expected`; None: no value."""
        return self.evaluate(term, env, resolve_type(term, self.types, expected))

    def evaluate(self, term: Term, env: Env, kind: ColumnType) -> Value | None:
        if isinstance(term, Var):
            return env[term.name]
        if isinstance(term, Const):
            return functions.constant(term.value, kind)
        if isinstance(term, BinOp):
            left = self.evaluate(term.left, env, kind)
            right = self.evaluate(term.right, env, kind)
            if left is None or right is None:
                return None
            return functions.arithmetic(term.op, left, right, kind)
        if isinstance(term, Neg):
            operand = self.evaluate(term.operand, env, kind)
            return None if operand is None else functions.negate(operand, kind)
        if isinstance(term, Call):
            return self.call(term, env, kind)
        if isinstance(term, Cast):
            assert term.kind is not None, "a checked cast knows its type"
            source = resolve_type(term.value, self.types)
            value = self.evaluate(term.value, env, source)
            return None if value is None else functions.convert(value, source, term.kind)
        if isinstance(term, Aggregate):
            return self.aggregate(term, env)
        raise ValueError("`_` has no value")

    def call(self, term: Call, env: Env, kind: ColumnType) -> Value | None:
        if term.functor is not None:  # user-defined: bind the program first (`functors`)
            values = [
                self.evaluate(a, env, p)
                for a, p in zip(term.args, term.functor.params, strict=True)
            ]
            present = [value for value in values if value is not None]
            return call_values(term, present) if len(present) == len(values) else None
        functor = functions.FUNCTORS[term.function]
        args: list[Value] = []
        for index, arg in enumerate(term.args):
            param = functor.param(index) if functor.params is not None else kind
            value = self.evaluate(arg, env, param or resolve_type(arg, self.types))
            if value is None:
                return None
            args.append(value)
        return functions.call(term.function, args, kind)

    def aggregate(self, term: Aggregate, env: Env) -> Value | None:
        group = self.groups.get(id(term), frozenset())
        outer = {name: env[name] for name in group}
        body = [self.name_wildcards(literal) for literal in term.body]
        assignments = {
            tuple(sorted(item for item in solution.items() if item[0] not in outer))
            for solution in self.solve(body, dict(outer))
        }
        if term.function == "count":
            return len(assignments)
        assert term.target is not None
        kind = resolve_type(term.target, self.types)
        values = []
        for assignment in assignments:
            value = self.evaluate(term.target, {**outer, **dict(assignment)}, kind)
            if value is not None:
                values.append(value)
        return reduce_values(term.function, values, kind)

    def name_wildcards(self, literal: Literal) -> Literal:
        """`_` in a positive atom becomes a fresh variable, so it counts as a position."""
        if not isinstance(literal, Atom):
            return literal
        args = tuple(
            Var(f"_#{next(self.fresh)}") if isinstance(arg, Wildcard) else arg
            for arg in literal.args
        )
        return Atom(literal.name, args, literal.span)


def reduce_values(function: str, values: list[Value], kind: ColumnType) -> Value | None:
    """`sum`, `mean`, `min` or `max` of the target values of distinct assignments."""
    if function == "sum":
        if kind == "float":
            return float(sum(sorted(float(v) for v in values)))
        return functions.wrap(sum(int(v) for v in values), kind)
    if not values:
        return None
    if function == "mean":
        if kind == "float":
            return float(sum(sorted(float(v) for v in values))) / len(values)
        return sum(int(v) for v in values) / len(values)
    return min(values) if function == "min" else max(values)
