"""Minimal proof heights: the evaluation behind `Database.why` (docs/adr/0018).

Layer: datalog. Plain Python on the reference evaluator's `Solver` (hash indexes
added); never `differential` or `joins`. Runs only when someone asks `why`, so
normal evaluation annotates nothing.

The height of a tuple is 0 for a base tuple (inserted by a transaction or a fact of
the program) and otherwise 1 + the largest height among the positive premises of its
lowest rule instance, as in Soufflé's provenance. Negated atoms and aggregates read
complete lower strata and add nothing to it.

`minimal_heights` evaluates the strata in order. Inside a stratum, round L solves
every rule with one positive atom restricted to the tuples of height exactly L - 1
and the others to heights below L (semi-naive by height), so a tuple first appears
in the round equal to its minimal height. The rounds stop when a round finds nothing
and no relation the stratum reads holds a tuple of height L or more.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, KeysView, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from datalog.eval.reference import Env, Row, Solver
from datalog.lang.ast import (
    Aggregate,
    Atom,
    ColumnType,
    Literal,
    Negation,
    Rule,
    Term,
    Var,
    Wildcard,
)
from datalog.lang.checks import CheckedProgram
from datalog.lang.functions import Value
from datalog.lang.passes.variables import aggregate_groups
from datalog.lang.schema import Schema
from differential.dataflow import remaining

Rows = Sequence[Row] | KeysView[Row]

__all__ = ["HeightSolver", "Prepared", "Table", "invariant_columns", "minimal_heights", "prepare"]


class Table:
    """One relation's tuples with their minimal heights, listed by height and
    hash-indexed (lazily) by the columns a lookup binds. Rows are only added
    between rounds, never while a solver iterates them."""

    def __init__(self) -> None:
        self.heights: dict[Row, int] = {}
        self.levels: list[list[Row]] = []
        self.indexes: dict[tuple[int, ...], dict[Row, list[Row]]] = {}

    def add(self, row: Row, height: int) -> None:
        if row in self.heights:
            return
        self.heights[row] = height
        while len(self.levels) <= height:
            self.levels.append([])
        self.levels[height].append(row)
        for positions, index in self.indexes.items():
            index.setdefault(tuple(row[p] for p in positions), []).append(row)

    @property
    def top(self) -> int:
        """The largest height held (-1 when empty)."""
        return len(self.levels) - 1

    def level(self, height: int) -> Sequence[Row]:
        return self.levels[height] if 0 <= height < len(self.levels) else ()

    def lookup(self, positions: tuple[int, ...], key: Row) -> Rows:
        """The rows whose columns at `positions` equal `key`."""
        if not positions:
            return self.heights.keys()
        index = self.indexes.get(positions)
        if index is None:
            index = {}
            for row in self.heights:
                index.setdefault(tuple(row[p] for p in positions), []).append(row)
            self.indexes[positions] = index
        return index.get(key, ())


@dataclass(frozen=True)
class Prepared:
    """A checked rule ready to solve: each `_` of a top-level positive atom named (so a
    premise's full tuple is in the solution), with its variable types and groups."""

    rule: Rule
    head: Atom
    body: tuple[Literal, ...]
    types: Mapping[str, ColumnType]
    groups: Mapping[int, frozenset[str]]
    seed: Mapping[str, Value] = field(default_factory=dict)  # variables bound by demand

    @property
    def positives(self) -> tuple[Atom, ...]:
        return tuple(literal for literal in self.body if isinstance(literal, Atom))


def prepare(rule: Rule, types: Mapping[str, ColumnType], schema: Schema) -> Prepared:
    named = dict(types)
    body: list[Literal] = []
    for literal in rule.body:
        if isinstance(literal, Atom):
            args: list[Term] = []
            for arg, kind in zip(literal.args, schema.types(literal.name), strict=True):
                if isinstance(arg, Wildcard):
                    arg = Var(f"_#{len(named)}")
                    named[arg.name] = kind
                args.append(arg)
            literal = replace(literal, args=tuple(args))
        body.append(literal)
    groups = aggregate_groups(rule.head.args, body)
    return Prepared(rule, rule.head, tuple(body), named, groups)


class HeightSolver(Solver):
    """Solves a body against `tables`: positive atoms see only tuples of height at
    most `limit` (`delta`, one atom of the body, exactly `limit`); negations and
    aggregates see the complete relations."""

    def __init__(
        self,
        tables: Mapping[str, Table],
        schema: Schema,
        prepared: Prepared,
        limit: int | None,
        delta: Atom | None = None,
    ) -> None:
        super().__init__({}, schema, prepared.types, prepared.groups)
        self.tables, self.limit, self.delta = tables, limit, delta

    @contextmanager
    def _complete(self) -> Iterator[None]:
        saved, self.limit = self.limit, None
        try:
            yield
        finally:
            self.limit = saved

    def solve(self, body: Sequence[Literal], env: Env) -> Iterator[Env]:
        """As the reference solver, but taking the cheapest ready literal first: a
        filter, then the atom with the fewest unbound and most bound columns (a hash
        lookup on the bound ones), the `delta` atom first among equals."""
        if not body:
            yield env
            return
        ready = [i for i, literal in enumerate(body) if self.ready(literal, env)]
        if not ready:
            raise RuntimeError(f"no literal of {body} can be evaluated; was it checked?")
        index = min(ready, key=lambda i: self._cost(body[i], env))
        rest = (*body[:index], *body[index + 1 :])
        for extended in self.apply(body[index], env):
            yield from self.solve(rest, extended)

    def _cost(self, literal: Literal, env: Env) -> int:
        """How many tuples matching `literal` would scan (-1 for a filter)."""
        if not isinstance(literal, Atom):
            return -1
        found = self._candidates(literal, env)
        return 0 if found is None else len(found[0])

    def apply(self, literal: Literal, env: Env) -> Iterator[Env]:
        if not isinstance(literal, Negation):
            yield from super().apply(literal, env)
            return
        with self._complete():
            found = any(True for _ in self.match_atom(literal.atom, env))
        if not found:
            yield env

    def aggregate(self, term: Aggregate, env: Env) -> Value | None:
        with self._complete():
            return super().aggregate(term, env)

    def match_atom(self, atom: Atom, env: Env) -> Iterator[Env]:
        found = self._candidates(atom, env)
        table = self.tables.get(atom.name)
        if found is None or table is None:
            return
        rows, expected = found
        heights, limit = table.heights, self.limit
        exact = atom is self.delta and limit is not None  # only tuples of height `limit`
        for row in rows:
            height = heights[row]
            if limit is None or (height == limit if exact else height <= limit):
                extended = self.unify(atom.args, expected, row, env)
                if extended is not None:
                    yield extended

    def _candidates(self, atom: Atom, env: Env) -> tuple[Rows, list[Value | None]] | None:
        """The tuples to scan for `atom` (a superset of its matches: the smaller of the
        hash lookup on its bound columns and, for `delta`, its height's list) and
        the values `unify` checks besides variables; None when an argument has no
        value (the binding is dropped)."""
        expected: list[Value | None] = []
        positions: list[int] = []  # the columns the lookup binds, and their values
        key: list[Value] = []
        for i, (arg, kind) in enumerate(zip(atom.args, self.schema.types(atom.name), strict=True)):
            value = env.get(arg.name) if isinstance(arg, Var) else None
            if not isinstance(arg, Var | Wildcard):
                value = self.value(arg, env, kind)
                if value is None:
                    return None
            expected.append(None if isinstance(arg, Var) else value)
            if value is not None:
                positions.append(i)
                key.append(value)
        table = self.tables.get(atom.name)
        if table is None:
            return (), expected
        rows = table.lookup(tuple(positions), tuple(key))
        if atom is self.delta and self.limit is not None:
            level = table.level(self.limit)
            rows = level if len(level) < len(rows) else rows
        return rows, expected


def minimal_heights(
    checked: CheckedProgram,
    base: Mapping[str, Iterable[Row]],
    relations: Iterable[str],
    demand: tuple[str, Row] | None = None,
    allowed: Mapping[str, Collection[Row]] | None = None,
) -> dict[str, Table]:
    """The minimal height of every tuple of `relations` (closed under dependencies)
    over the `base` tuples, which have height 0.

    With a `demand` (a relation and the tuple asked about), the demanded relation is
    restricted to the tuples that agree with it on its invariant columns (see
    `invariant_columns`): `reach(1, y)` only, say, for `reach(1, 4)`. Only tuples
    that agree there can be premises of the demanded tuple, so its height and
    proofs are unchanged.

    `allowed` restricts relations to the tuples that hold (those of strata with
    subsumption: a subsumed tuple is not a premise, and ever longer paths around a
    cycle would otherwise never end)."""
    allowed = allowed or {}
    tables = {name: Table() for name in relations}
    fixed = _fixed_columns(checked, demand)
    for name, rows in base.items():
        for row in rows:
            wanted = demand is None or name != demand[0] or _agrees(row, demand[1], fixed)
            if wanted and _holds(allowed, name, row):
                tables[name].add(row, 0)
    for stratum in checked.strata:
        if stratum.relations & tables.keys():
            rules = [prepare(r, checked.types_of(r), checked.schema) for r in stratum.rules]
            if demand is not None and demand[0] in stratum.relations:
                seeded = (_seeded(rule, demand[1], fixed) for rule in rules)
                rules = [rule for rule in seeded if rule is not None]
            _evaluate_stratum(rules, tables, checked.schema, allowed)
    return tables


def invariant_columns(rules: Sequence[Rule], relation: str) -> list[int]:
    """The columns of `relation` that each of its rules copies unchanged from every
    occurrence of `relation` in its body (column 0 of `reach` in the linear
    transitive closure): a tuple's proofs only use tuples of `relation` with the
    same values there. None when some other relation of its stratum is defined."""
    own = [rule for rule in rules if rule.head.name == relation]
    if len(own) != len(rules):
        return []
    found = []
    for column in range(len(own[0].head.args) if own else 0):
        heads = [rule.head.args[column] for rule in own]
        if all(
            isinstance(head, Var)
            and all(atom.args[column] == head for atom in _atoms_of(rule, relation))
            for head, rule in zip(heads, own, strict=True)
        ):
            found.append(column)
    return found


def _atoms_of(rule: Rule, relation: str) -> list[Atom]:
    return [lit for lit in rule.body if isinstance(lit, Atom) and lit.name == relation]


def _fixed_columns(checked: CheckedProgram, demand: tuple[str, Row] | None) -> list[int]:
    if demand is None:
        return []
    for stratum in checked.strata:
        if demand[0] in stratum.relations:
            return invariant_columns(stratum.rules, demand[0])
    return []


def _holds(allowed: Mapping[str, Collection[Row]], name: str, row: Row) -> bool:
    return name not in allowed or row in allowed[name]


def _agrees(row: Row, wanted: Row, columns: Sequence[int]) -> bool:
    return all(row[i] == wanted[i] for i in columns)


def _seeded(rule: Prepared, wanted: Row, columns: Sequence[int]) -> Prepared | None:
    """`rule` with its head's invariant variables bound to the demanded values (None
    when one variable would need two: the rule derives no tuple that agrees)."""
    seed: Env = {}
    for i in columns:
        name = rule.head.args[i].name  # type: ignore[union-attr]
        if seed.setdefault(name, wanted[i]) != wanted[i]:
            return None
    return replace(rule, seed=seed)


def _evaluate_stratum(
    rules: list[Prepared],
    tables: dict[str, Table],
    schema: Schema,
    allowed: Mapping[str, Collection[Row]],
) -> None:
    reads = {atom.name for rule in rules for atom in rule.positives}
    level = 1
    while True:
        new: dict[tuple[str, Row], None] = {}
        for rule in rules:
            remaining()  # stops here once a budget is spent (`Database.budget`)
            name = rule.head.name
            for row in _round(rule, tables, schema, level):
                if row not in tables[name].heights and _holds(allowed, name, row):
                    new[(name, row)] = None
        for name, row in new:
            tables[name].add(row, level)
        if not new and all(tables[name].top < level for name in reads):
            return
        level += 1


def _round(
    rule: Prepared, tables: Mapping[str, Table], schema: Schema, level: int
) -> Iterator[Row]:
    """The head rows of `rule`'s instances whose highest positive premise has
    height `level - 1` (for a rule without positive atoms: all, in round 1)."""
    positives = rule.positives
    if not positives:
        if level == 1:
            yield from _heads(HeightSolver(tables, schema, rule, 0), rule, rule.body)
        return
    for atom in dict.fromkeys(positives):
        table = tables.get(atom.name)
        if table is None or not table.level(level - 1):
            continue
        body = (atom, *(literal for literal in rule.body if literal is not atom))
        yield from _heads(HeightSolver(tables, schema, rule, level - 1, atom), rule, body)


def _heads(solver: HeightSolver, rule: Prepared, body: tuple[Literal, ...]) -> Iterator[Row]:
    for env in solver.solve(body, dict(rule.seed)):
        row = solver.head_row(rule.head, env)
        if row is not None:
            yield row
