"""The best candidate bindings of a rule for a tuple it does not derive (docs/adr/0045).

Layer: datalog (API). Plain Python on the reference evaluator's `Solver` (scalar
semantics, aggregates, generators, functors bound as for the engine), reading the
relations through `datalog.db.states`; never `joins`.

A rule is tried against a *pattern*: the asked tuple, or an atom some explanation
found missing, whose columns are values or unbound (equal when the atom repeated a
variable there). The head is unified with it first: a variable takes the value, a
constant must equal it, and a computed argument (`x + 1`) or two unbound columns
that must be equal become *head checks*, comparisons placed after the body.

The body is then evaluated in the reference evaluator's order: repeatedly the first
item (body literals in the rule's order, then the head checks) whose inputs are
bound. Which variables are bound after each item does not depend on their values,
so the order is fixed. A *candidate binding* is a binding of the variables of a
prefix of that order under which every item of the prefix holds. The *best* one
satisfies the longest prefix; among equally long ones it is the first in the
lexicographic order of what successive items matched: an atom's tuples compared in
value order (`datalog.db.pacing.sort_key`: numbers before symbols, numbers by value,
symbols by their strings), a generator's values likewise. Several tuples of an atom
that bind its named variables alike are one candidate (its smallest tuple is
shown). The first item that fails under the best binding is the premise that fails.
A depth-first search in that order finds the best binding first; it stops at a
binding that fails only at the last item, which no other can beat.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from datalog.db.pacing import sort_key
from datalog.db.states import States
from datalog.eval.reference import Env, Row, Solver
from datalog.lang.ast import (
    Atom,
    ColumnType,
    Comparison,
    Const,
    Literal,
    Negation,
    Rule,
    Var,
    Wildcard,
)
from datalog.lang.functions import Value
from datalog.lang.passes.variables import aggregate_groups, term_variables
from datalog.lang.schema import Schema
from differential.dataflow import remaining

__all__ = ["Outcome", "Pattern", "StateSolver", "Step", "best_candidates", "head_checks"]

CHECK_EVERY = 256  # search steps between two looks at the budget


@dataclass(frozen=True)
class Pattern:
    """Tuples of `relation` with `values` where not None, equal in each `same` group."""

    relation: str
    values: tuple[Value | None, ...]
    same: tuple[tuple[int, ...], ...] = ()


@dataclass
class Step:
    """One item of the evaluation order that holds: the binding after it and, for an
    atom, the smallest tuple it matched with that binding."""

    index: int | None  # the literal's position in the body (None: a head check)
    literal: Literal
    env: Env
    witness: Row | None = None


@dataclass
class Outcome:
    """The best candidate binding: the items that hold under it, in evaluation order,
    and the first that fails (None: the whole body holds and derives `env`'s head)."""

    steps: list[Step] = field(default_factory=list)
    env: Env = field(default_factory=dict)
    failed: tuple[int | None, Literal] | None = None


class StateSolver(Solver):
    """The reference solver reading relations from `States` (indexed lookups)."""

    def __init__(
        self,
        states: States,
        schema: Schema,
        types: Mapping[str, ColumnType],
        groups: Mapping[int, frozenset[str]],
    ) -> None:
        super().__init__({}, schema, types, groups)
        self.states = states

    def match_atom(self, atom: Atom, env: Env) -> Iterator[Env]:
        for extended, _ in self.matches(atom, env):
            yield extended

    def matches(self, atom: Atom, env: Env) -> Iterator[tuple[Env, Row]]:
        """Each tuple matching `atom` under `env` (in value order) with the binding."""
        expected: list[Value | None] = []
        positions: list[int] = []
        key: list[Value] = []
        for i, (arg, kind) in enumerate(zip(atom.args, self.schema.types(atom.name), strict=True)):
            if isinstance(arg, Wildcard) or (isinstance(arg, Var) and arg.name not in env):
                expected.append(None)
                continue
            value = env[arg.name] if isinstance(arg, Var) else self.value(arg, env, kind)
            if value is None:
                return  # an argument without a value: no tuple matches
            expected.append(None if isinstance(arg, Var) else value)
            positions.append(i)
            key.append(value)
        for row in self.states[atom.name].lookup(tuple(positions), key):
            extended = self.unify(atom.args, expected, row, env)
            if extended is not None:
                yield extended, row


def head_checks(
    rule: Rule, pattern: Pattern, schema: Schema
) -> tuple[Env, list[Comparison]] | None:
    """The head of `rule` unified with `pattern`: its variables' values and the checks
    left for after the body (None: the head cannot give a tuple of the pattern)."""
    env: Env = {}
    checks: list[Comparison] = []
    kinds = schema.types(rule.head.name)
    solver = Solver({}, schema, {}, {})
    for arg, value, kind in zip(rule.head.args, pattern.values, kinds, strict=True):
        if value is None:
            continue
        if isinstance(arg, Var):
            if env.setdefault(arg.name, value) != value:
                return None
        elif isinstance(arg, Const):
            if solver.value(arg, {}, kind) != value:
                return None
        else:
            checks.append(Comparison("=", Const(value, kind), arg, arg.span))
    for group in pattern.same:
        first = rule.head.args[group[0]]
        for position in group[1:]:
            other = rule.head.args[position]
            if other != first:
                checks.append(Comparison("=", first, other, other.span))
    return env, checks


def best_candidates(
    solver: StateSolver, rule: Rule, env: Env, checks: Sequence[Comparison], derivable: bool
) -> Outcome:
    """The best candidate binding of `rule`'s body (module docstring) from the head's
    `env`. `derivable`: the whole body may hold (a subsumed relation's tuple is
    derived and then removed); otherwise a binding failing only at the last item ends
    the search."""
    items = [*((i, lit) for i, lit in enumerate(rule.body)), *((None, c) for c in checks)]
    search = _Search(solver, items, len(items) if derivable else len(items) - 1)
    search.run(tuple(range(len(items))), env, [])
    assert search.best is not None, "a search records the empty prefix at least"
    return search.best


class _Search:
    """The depth-first search for the best candidate binding."""

    def __init__(self, solver: StateSolver, items: list[tuple[int | None, Literal]], stop: int):
        self.solver, self.items, self.stop = solver, items, stop
        self.best: Outcome | None = None
        self.depth = -1
        self.visited = 0

    def run(self, pending: tuple[int, ...], env: Env, steps: list[Step]) -> bool:
        """Search from `env` (after `steps`); True once nothing can beat the best."""
        self.visited += 1
        if self.visited % CHECK_EVERY == 0:
            remaining()  # stops here once a budget is spent (`Database.budget`)
        if not pending:
            self.best, self.depth = Outcome(list(steps), env, None), len(steps)
            return True
        at = next((i for i in pending if self.solver.ready(self.items[i][1], env)), None)
        if at is None:
            raise RuntimeError(f"no literal of {self.items} can be evaluated; was it checked?")
        index, literal = self.items[at]
        rest = tuple(i for i in pending if i != at)
        found = list(self.extensions(literal, env))
        if not found:
            if len(steps) > self.depth:
                self.best, self.depth = Outcome(list(steps), env, (index, literal)), len(steps)
            return len(steps) >= self.stop
        for extended, witness in found:
            steps.append(Step(index, literal, extended, witness))
            if self.run(rest, extended, steps):
                return True
            steps.pop()
        return False

    def extensions(self, literal: Literal, env: Env) -> Iterator[tuple[Env, Row | None]]:
        """What `literal` extends `env` to, one per distinct binding, in value order."""
        if isinstance(literal, Atom):
            new = _new_variables(literal, env)
            seen: set[Row] = set()
            for extended, row in self.solver.matches(literal, env):
                bound = tuple(extended[name] for name in new)
                if bound not in seen:
                    seen.add(bound)
                    yield extended, row
        elif isinstance(literal, Negation):
            yield from ((extended, None) for extended in self.solver.apply(literal, env))
        else:
            found = list(self.solver.apply(literal, env))
            names = sorted(set(found[0]) - set(env)) if found else []
            found.sort(key=lambda e: sort_key(tuple(e[name] for name in names)))
            yield from ((extended, None) for extended in found)


def _new_variables(atom: Atom, env: Env) -> list[str]:
    """The named variables `atom` binds, in order of first occurrence."""
    names = [var.name for arg in atom.args if isinstance(arg, Var) for var in term_variables(arg)]
    return [name for name in dict.fromkeys(names) if name not in env]


def rule_solver(states: States, rule: Rule, types: Mapping[str, ColumnType]) -> StateSolver:
    """A solver for `rule`'s body (its variable types and aggregate groups)."""
    groups = aggregate_groups(rule.head.args, rule.body)
    return StateSolver(states, states.schema, types, groups)
