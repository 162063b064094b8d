"""Provenance: why a tuple holds, as a proof tree of minimal height (docs/adr/0018).

Layer: datalog (API). Imports the language, the checker, `datalog.eval.heights` and the
database's base relations; `Database.why` is a thin wrapper around `why`.

Nothing is recorded during normal evaluation. On demand, `why` reads the base
relations the queried relation depends on as of the current epoch (under the
database's lock) or of a past one (`as_of`, with that epoch's rules; see
`datalog.db.history`), computes every tuple's minimal height over them
(`datalog.eval.heights`, plain Python, semi-naive) and rebuilds a proof top-down: for a
tuple of height h it takes the first rule instance (rules in program order) whose
positive premises all have heights below h, which makes the proof's height h.
Negated atoms become `!r(...)` leaves and aggregates leaves with their value;
comparisons and arithmetic are satisfied by the instance and not shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import numpy as np

from datalog.db.history import EpochView, Past
from datalog.db.states import Reading, States
from datalog.eval.functors import bind_program
from datalog.eval.heights import HeightSolver, Prepared, Table, minimal_heights, prepare
from datalog.eval.reference import Env, Row, Solver
from datalog.eval.rows import to_rows
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import (
    Aggregate,
    Atom,
    Call,
    ColumnType,
    Comparison,
    Const,
    Negation,
    Rule,
    Term,
    Var,
    Wildcard,
)
from datalog.lang.checks import CheckedProgram, check_query, dependencies
from datalog.lang.errors import DatalogSemanticError, FactNotFoundError, UnsupportedError
from datalog.lang.functions import Value
from datalog.lang.parser import parse_query
from datalog.lang.passes.variables import aggregates_in, literal_terms, map_term, subterms
from datalog.lang.pretty import format_rule, format_term
from datalog.lang.schema import Schema

__all__ = ["Derivation", "Fact", "RuleSource", "format_fact", "rule_source", "target", "why"]

Kind = Literal["base", "rule", "negation", "aggregate"]


@dataclass(frozen=True)
class Fact:
    """A tuple with its relation; in a negation leaf, `None` stands for `_`."""

    relation: str
    values: tuple[Value | None, ...]
    text: str = field(compare=False)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class RuleSource:
    """A rule as it was checked (disjunctions split), and where it was defined: line
    and column in the text of the `define` that held it."""

    text: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.text}  [line {self.line}]"


@dataclass(eq=False)
class Derivation:
    """One step of a proof: a fact and the rule instance that derives it from its
    `premises` (`rule` None: a base fact, inserted or given in the program), or a
    leaf checked against the current state: a negated atom (`!r(...)`, kind
    `negation`) or an aggregate with its value (kind `aggregate`, `fact` None)."""

    kind: Kind
    text: str
    fact: Fact | None = None
    rule: RuleSource | None = None
    premises: list[Derivation] = field(default_factory=list)
    height: int | None = None  # of a fact: 0 for a base fact, 1 + max premise height

    def lines(self) -> list[str]:
        """The printed tree: one line per step, premises indented under their fact."""
        out: list[str] = []
        stack: list[tuple[Derivation, int]] = [(self, 0)]
        while stack:  # iterative: a proof may be deeper than Python's recursion limit
            node, depth = stack.pop()
            out.append("  " * depth + node.line())
            stack.extend((p, depth + 1) for p in reversed(node.premises))
        return out

    def line(self) -> str:
        if self.kind == "rule":
            return f"{self.text}  <- {self.rule}"
        return f"{self.text}  (base fact)" if self.kind == "base" else self.text

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return f"Derivation({self.text!r}, height={self.height}, premises={len(self.premises)})"

    def to_dict(self) -> dict[str, Any]:
        """The tree as JSON-able nested objects `{kind, fact, relation, values, rule,
        height, premises}` (what the server sends)."""
        top = self.own_dict()
        stack = [(self, top)]
        while stack:
            node, out = stack.pop()
            for premise in node.premises:
                child = premise.own_dict()
                out["premises"].append(child)
                stack.append((premise, child))
        return top

    def own_dict(self) -> dict[str, Any]:
        """This step alone, as `to_dict` gives it, with no premises yet."""
        rule = self.rule
        return {
            "kind": self.kind,
            "fact": self.text,
            "relation": None if self.fact is None else self.fact.relation,
            "values": None if self.fact is None else list(self.fact.values),
            "rule": None if rule is None else vars(rule).copy(),
            "height": self.height,
            "premises": [],
        }


def why(past: Past, reading: Reading, text: str, as_of: object | None = None) -> Derivation:
    """A proof of minimal height that the ground fact `text` holds now, or at the end
    of epoch `as_of` (call it under the database's lock; `reading` reads that epoch)."""
    view = past.view(as_of)
    relation, row = target(view.checked, text)
    checked = bind_program(view.checked, past.functors, [relation])
    needed = dependencies(checked, [relation])
    base = _base(view, past.symbols, needed)
    final = _subsumed(reading, checked, needed)
    tables = minimal_heights(checked, base, needed, demand=(relation, row), allowed=final)
    if row not in tables[relation].heights:
        fact = format_fact(relation, row, checked.schema.types(relation))
        if row in final.get(relation, ()):
            raise UnsupportedError(
                f"`{fact}` holds, but every derivation of it uses tuples that subsumption "
                "removed since (ADR 0017's inflationary semantics): it has no proof from "
                "the tuples that hold now"
            )
        when = f"now (epoch {view.epoch})" if as_of is None else f"at epoch {view.epoch}"
        raise FactNotFoundError(
            f"`{fact}` does not hold: the tuple is not in `{relation}` {when}; "
            "`why_not` explains why"
        )
    rules: dict[str, list[Prepared]] = {}
    for rule in checked.rules:
        if rule.head.name in needed:
            prepared = prepare(rule, checked.types_of(rule), checked.schema)
            rules.setdefault(rule.head.name, []).append(prepared)
    return _Prover(tables, rules, checked.schema).prove(relation, row)


def target(program: CheckedProgram, text: str, what: str = "why") -> tuple[str, Row]:
    """The relation and values of the ground fact `text`; the usual errors (unknown
    relation, arity, types) with positions, and one for a variable or wildcard."""
    query = parse_query(text)
    literal = query.body[0] if len(query.body) == 1 else None
    if not isinstance(literal, Atom):
        span = query.body[0].span if query.body else query.span
        message = f"`{what}` explains one fact, such as `reach(1, 4)`"
        raise DatalogSemanticError(message, span, text)
    check_query(query, program.schema)
    kinds = program.schema.types(literal.name)
    solver = Solver({}, program.schema, {}, {})
    values: list[Value] = []
    for arg, kind in zip(literal.args, kinds, strict=True):
        value = None if _open_term(arg) else solver.value(arg, {}, kind)
        if value is None:
            message = f"`{what}` needs a ground fact: `{format_term(arg)}` is not a constant"
            raise DatalogSemanticError(message, arg.span, text)
        values.append(value)
    return literal.name, tuple(values)


def _open_term(term: Term) -> bool:
    """Whether a term has no value by itself (a variable, `_`, an aggregate or a
    user-defined functor call, which `why` does not run)."""
    return any(
        isinstance(t, Var | Wildcard | Aggregate) or (isinstance(t, Call) and t.functor)
        for t in subterms(term)
    )


def _subsumed(reading: Reading, checked: CheckedProgram, needed: set[str]) -> dict[str, set[Row]]:
    """The tuples that hold of each needed relation of a stratum with subsumption: a
    proof may use only those (a subsumed tuple was removed; without the bound, a
    cycle of ever longer paths never ends)."""
    states = States(reading, None)
    found: dict[str, set[Row]] = {}
    for stratum in checked.strata:
        if stratum.relations & checked.dominances.keys():
            for name in stratum.relations & needed:
                found[name] = set(states[name].lookup((), ()))
    return found


def _base(view: EpochView, symbols: SymbolTable, relations: set[str]) -> dict[str, list[Row]]:
    """The tuples of each relation's input (inserted or program facts) at the view's epoch."""
    base: dict[str, list[Row]] = {}
    for name in relations:
        state = view.state(name)
        info = view.checked.schema.relations.get(name)
        if state is None or info is None:
            continue
        present = np.flatnonzero(state.diffs > 0)
        columns = [column[present] for column in state.columns][: info.arity]
        base[name] = to_rows(columns, info.types, symbols, len(present))
    return base


class _Prover:
    """Rebuilds proofs top-down from minimal heights, sharing the steps of a fact
    that several premises need."""

    def __init__(
        self, tables: Mapping[str, Table], rules: Mapping[str, list[Prepared]], schema: Schema
    ) -> None:
        self.tables, self.rules, self.schema = tables, rules, schema
        self.done: dict[tuple[str, Row], Derivation] = {}

    def prove(self, relation: str, row: Row) -> Derivation:
        root = self._node(relation, row)
        self.done[(relation, row)] = root
        pending = [(root, relation, row)] if root.kind == "rule" else []
        while pending:  # iterative: a proof may be deeper than Python's recursion limit
            node, name, values = pending.pop()
            prepared, solver, env = self._instance(name, values)
            node.rule = _source(prepared)
            for premise, fresh in self._premises(prepared, solver, env):
                node.premises.append(premise)
                if fresh and premise.kind == "rule" and premise.fact is not None:
                    pending.append((premise, premise.fact.relation, premise.fact.values))  # type: ignore[arg-type]
        return root

    def _node(self, relation: str, row: Row) -> Derivation:
        height = self.tables[relation].heights[row]
        text = format_fact(relation, row, self.schema.types(relation))
        kind: Kind = "base" if height == 0 else "rule"
        return Derivation(kind, text, Fact(relation, row, text), height=height)

    def _instance(self, relation: str, row: Row) -> tuple[Prepared, HeightSolver, Env]:
        """The first rule instance deriving `row` from premises of lower heights."""
        height = self.tables[relation].heights[row]
        for prepared in self.rules.get(relation, []):
            env = _bind_head(prepared.head, row)
            if env is None:
                continue
            solver = HeightSolver(self.tables, self.schema, prepared, height - 1)
            for found in solver.solve(prepared.body, env):
                if solver.head_row(prepared.head, found) == row:
                    return prepared, solver, found
        raise RuntimeError(f"no rule instance derives {relation}{row} at height {height}")

    def _premises(
        self, prepared: Prepared, solver: HeightSolver, env: Env
    ) -> list[tuple[Derivation, bool]]:
        """The steps under one rule instance, in body order: each positive atom's fact
        (and whether it is new to this proof), negation and aggregate leaves."""
        out: list[tuple[Derivation, bool]] = []
        for literal in prepared.body:
            if isinstance(literal, Atom):
                row = _atom_row(solver, literal, env)
                key = (literal.name, row)
                fresh = key not in self.done
                if fresh:
                    self.done[key] = self._node(literal.name, row)
                out.append((self.done[key], fresh))
            elif isinstance(literal, Negation):
                out.append((self._negation(solver, literal, env), False))
            elif isinstance(literal, Comparison):
                leaves = _aggregates(solver, literal_terms(literal), env, _bound_name(literal))
                out += [(leaf, False) for leaf in leaves]
        out += [(leaf, False) for leaf in _aggregates(solver, prepared.head.args, env)]
        return out

    def _negation(self, solver: HeightSolver, literal: Negation, env: Env) -> Derivation:
        atom = literal.atom
        kinds = self.schema.types(atom.name)
        values = tuple(
            None if isinstance(arg, Wildcard) else solver.value(arg, env, kind)
            for arg, kind in zip(atom.args, kinds, strict=True)
        )
        text = "!" + format_fact(atom.name, values, kinds)
        return Derivation("negation", text, Fact(atom.name, values, text))


def _bind_head(head: Atom, row: Row) -> Env | None:
    """The head's plain variables bound to `row` (None if they conflict)."""
    env: Env = {}
    for arg, value in zip(head.args, row, strict=True):
        if isinstance(arg, Var) and env.setdefault(arg.name, value) != value:
            return None
    return env


def _atom_row(solver: Solver, atom: Atom, env: Env) -> Row:
    kinds = solver.schema.types(atom.name)
    values = [solver.value(arg, env, kind) for arg, kind in zip(atom.args, kinds, strict=True)]
    assert all(v is not None for v in values), "a matched atom has every value"
    return tuple(values)  # type: ignore[arg-type]


def _bound_name(literal: Comparison) -> str:
    """`n = ` for `n = <aggregate>` (either way round), to head its leaf."""
    sides = (literal.left, literal.right)
    if literal.op == "=" and any(isinstance(side, Aggregate) for side in sides):
        names = [side.name for side in sides if isinstance(side, Var)]
        return f"{names[0]} = " if names else ""
    return ""


def _aggregates(
    solver: HeightSolver, terms: Sequence[Term], env: Env, prefix: str = ""
) -> list[Derivation]:
    """A leaf per aggregate in `terms`: the aggregate, its group's values substituted,
    and the value it has now."""
    leaves = []
    for term in terms:
        for aggregate in aggregates_in(term):
            group = solver.groups.get(id(aggregate), frozenset())
            value = solver.aggregate(aggregate, env)
            shown = map_term(
                aggregate, partial(_constant, group=group, env=env, types=solver.types)
            )
            text = f"{prefix}{format_term(shown)} = {format_value(value, None)}"
            leaves.append(Derivation("aggregate", text))
    return leaves


def _constant(term: Term, group: frozenset[str], env: Env, types: Mapping[str, ColumnType]) -> Term:
    if isinstance(term, Var) and term.name in group:
        return Const(env[term.name], types.get(term.name, "number"), term.span)
    return term


def _source(prepared: Prepared) -> RuleSource:
    return rule_source(prepared.rule)


def rule_source(rule: Rule) -> RuleSource:
    """The rule as checked, pretty-printed, with its line and column."""
    return RuleSource(format_rule(rule), rule.span.line, rule.span.column)


def format_fact(relation: str, values: Sequence[Value | None], kinds: Sequence[ColumnType]) -> str:
    shown = ", ".join(format_value(v, k) for v, k in zip(values, kinds, strict=True))
    return f"{relation}({shown})"


def format_value(value: Value | None, kind: ColumnType | None) -> str:
    if value is None:
        return "_"
    if isinstance(value, str):
        return format_term(Const(value, "symbol"))
    if isinstance(value, float) or kind == "float":
        return repr(float(value))
    return str(value)
