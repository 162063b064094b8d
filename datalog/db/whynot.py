"""Why not: why a tuple is absent, as the first failing premise of each rule that
could derive it (docs/adr/0045).

Layer: datalog (API). Imports the language, `datalog.db.states` (the relations at one
epoch, as the engine computes them), `datalog.db.candidates` (the best candidate
bindings of a rule) and `datalog.db.provenance` (the shared fact and rule forms);
`Database.why_not` is a thin wrapper around `why_not`.

For an absent tuple, every rule whose head unifies with it is tried
(`datalog.db.candidates`): under its best candidate binding, the premises that hold, in
evaluation order, and the first that fails: a missing tuple (an atom no tuple
matches), a negated atom that holds, a comparison that is false, a functor or
aggregate without a value or with another value, or, for a subsumed relation, the
tuple that beats the derived one. A missing atom of a derived relation is explained
the same way, in turn, down to `depth` levels; an atom already explained in the tree
is not explained again, and the tree holds at most `size` rule attempts (in the
order it is printed), so the answer is bounded and always the same for the same
state. Nothing is recorded during normal evaluation: the relations are read when
asked (`datalog.db.states`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from datalog.db.candidates import (
    Outcome,
    Pattern,
    StateSolver,
    Step,
    best_candidates,
    head_checks,
    rule_solver,
)
from datalog.db.provenance import RuleSource, format_fact, format_value, rule_source, target
from datalog.db.states import Reading, States
from datalog.eval.functors import FunctorBinding, bind_program
from datalog.eval.heights import invariant_columns
from datalog.eval.reference import Env, Row, dominated
from datalog.lang.ast import (
    Atom,
    ColumnType,
    Comparison,
    Const,
    Negation,
    Rule,
    Term,
    Var,
    Wildcard,
)
from datalog.lang.checks import CheckedProgram
from datalog.lang.errors import FactHoldsError
from datalog.lang.functions import Value
from datalog.lang.passes.check_generators import generator_binding
from datalog.lang.passes.term_types import comparison_type
from datalog.lang.passes.variables import aggregates_in, literal_terms, map_terms
from datalog.lang.pretty import format_literal
from datalog.lang.subsumption import shared_group

__all__ = ["Attempt", "Premise", "WhyNot", "why_not"]

DEPTH = 3  # levels of nested explanations under the asked tuple, by default
SIZE = 100  # rule attempts in one explanation at most, by default

_Pending = tuple["WhyNot", Pattern, int]  # a tree to fill, its pattern and level
PremiseKind = Literal["atom", "negation", "comparison", "aggregate", "head", "subsumed"]


@dataclass(eq=False)
class Premise:
    """One premise of a rule attempt under its best candidate binding: `holds`, or the
    first that fails and why (`reason`). `values`: an atom's tuple (None where the
    binding leaves a column open; `same` lists columns that must be equal), or a
    negation's (None for `_`); `witness`: a tuple that holds against it (a failed
    negation's match, the tuple that subsumes a derived one); `because`: why no tuple
    matches a missing atom of a derived relation."""

    kind: PremiseKind
    text: str
    holds: bool
    index: int | None  # the literal's position in the rule body (None: the head)
    reason: str = ""
    relation: str | None = None
    values: tuple[Value | None, ...] | None = None
    same: tuple[tuple[int, ...], ...] = ()
    witness: tuple[Value, ...] | None = None
    value: Value | None = None  # an aggregate's value
    because: WhyNot | None = None

    def line(self) -> str:
        return f"{self.text}  {'holds' if self.holds else self.reason}"

    def own_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "text": self.text,
            "holds": self.holds,
            "index": self.index,
            "reason": self.reason,
            "relation": self.relation,
            "values": None if self.values is None else list(self.values),
            "same": [list(group) for group in self.same],
            "witness": None if self.witness is None else list(self.witness),
            "value": self.value,
            "because": None,
        }


@dataclass(eq=False)
class Attempt:
    """A rule whose head unifies with the absent tuple: its best candidate binding, the
    premises that hold under it (evaluation order) and, last, the one that fails."""

    rule: RuleSource
    binding: dict[str, Value]
    premises: list[Premise]

    @property
    def failed(self) -> Premise:
        return self.premises[-1]


@dataclass(eq=False)
class WhyNot:
    """Why no tuple of `relation` matches `values` (the asked fact: all values): an
    attempt per rule whose head unifies with it, or a `note` saying why there is none
    or why it is not explained here."""

    relation: str
    values: tuple[Value | None, ...]
    text: str
    same: tuple[tuple[int, ...], ...] = ()
    attempts: list[Attempt] = field(default_factory=list)
    note: str = ""

    def lines(self) -> list[str]:
        """The printed tree: the tuple, each rule tried, its premises, nested trees."""
        out = [f"{self.text}  does not hold" + (f": {self.note}" if self.note else "")]
        stack: list[tuple[WhyNot, int]] = [(self, 1)]
        while stack:  # iterative, as `Derivation.lines`
            node, depth = stack.pop()
            for attempt in node.attempts:
                out.append("  " * depth + str(attempt.rule))
                for premise in attempt.premises:
                    nested, line = premise.because, premise.line()
                    if nested is not None and nested.note:
                        line += f" ({nested.note})"
                    out.append("  " * (depth + 1) + line)
                    if nested is not None and nested.attempts:
                        out.extend(_nested(nested, depth + 2))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return f"WhyNot({self.text!r}, rules={len(self.attempts)})"

    def to_dict(self) -> dict[str, Any]:
        """The tree as JSON-able nested objects (what the server sends): `{kind:
        "absent", fact, relation, values, same, note, rules: [{rule, binding,
        premises: [{kind, text, holds, index, reason, relation, values, same,
        witness, value, because}]}]}`, `because` being such a tree or null."""
        return {
            "kind": "absent",
            "fact": self.text,
            "relation": self.relation,
            "values": list(self.values),
            "same": [list(group) for group in self.same],
            "note": self.note,
            "rules": [_attempt_dict(attempt) for attempt in self.attempts],
        }


def _nested(node: WhyNot, depth: int) -> list[str]:
    return [("  " * depth) + line[2:] for line in node.lines()[1:]]


def _attempt_dict(attempt: Attempt) -> dict[str, Any]:
    premises = []
    for premise in attempt.premises:
        out = premise.own_dict()
        if premise.because is not None:
            out["because"] = premise.because.to_dict()
        premises.append(out)
    return {"rule": vars(attempt.rule).copy(), "binding": dict(attempt.binding),
            "premises": premises}  # fmt: skip


def why_not(
    reading: Reading,
    functors: Mapping[str, FunctorBinding],
    text: str,
    depth: int = DEPTH,
    size: int = SIZE,
) -> WhyNot:
    """Why the ground fact `text` does not hold at `reading`'s epoch (call it under the
    database's lock); `FactHoldsError` if it does."""
    return explained(reading, functors, text, depth, size)[0]


def explained(
    reading: Reading,
    functors: Mapping[str, FunctorBinding],
    text: str,
    depth: int = DEPTH,
    size: int = SIZE,
) -> tuple[WhyNot, States]:
    """`why_not`, and the relations it read with the lookups it made in them (what
    `subscribe_why` checks an epoch against: `datalog.db.states.unchanged`)."""
    relation, row = target(reading.checked, text, "why_not")
    checked = bind_program(reading.checked, functors, [relation])
    states = States(reading, (relation, _demand(checked, relation, row)))
    if states[relation].lookup(tuple(range(len(row))), row):
        fact = format_fact(relation, row, checked.schema.types(relation))
        raise FactHoldsError(
            f"`{fact}` holds at epoch {reading.epoch}: `why` explains how it is derived"
        )
    return _Explainer(checked, states, depth, size).explain(Pattern(relation, row)), states


def _demand(checked: CheckedProgram, relation: str, row: Row) -> dict[int, Value]:
    """The asked tuple's values in its relation's invariant columns: the only tuples of
    the relation its explanation can look at agree with it there."""
    for stratum in checked.strata:
        if relation in stratum.relations:
            return {i: row[i] for i in invariant_columns(stratum.rules, relation)}
    return {}


class _Explainer:
    """Builds one explanation tree, in printing order, within its bounds."""

    def __init__(self, checked: CheckedProgram, states: States, depth: int, size: int) -> None:
        self.checked, self.states, self.depth, self.size = checked, states, depth, size
        self.rules: dict[str, list[Rule]] = {}
        for rule in checked.rules:
            self.rules.setdefault(rule.head.name, []).append(rule)
        self.seen: set[Pattern] = set()
        self.tried = 0

    def explain(self, pattern: Pattern) -> WhyNot:
        kinds = self.checked.schema.types(pattern.relation)
        root = WhyNot(pattern.relation, pattern.values,
                      format_fact(pattern.relation, pattern.values, kinds))  # fmt: skip
        stack = [(root, pattern, 0)]
        while stack:  # depth first, so the first mention of a tuple is the explained one
            node, wanted, level = stack.pop()
            children = self._fill(node, wanted, level)
            stack.extend(reversed(children))
        return root

    def _fill(
        self, node: WhyNot, pattern: Pattern, level: int
    ) -> list[tuple[WhyNot, Pattern, int]]:
        if pattern in self.seen:
            node.note = "explained above"
            return []
        if level > self.depth:
            node.note = f"not explained further: depth {self.depth}"
            return []
        if self.tried >= self.size:
            node.note = f"not explained: the explanation holds {self.size} rule attempts already"
            return []
        self.seen.add(pattern)
        rules = self.rules.get(pattern.relation, [])
        if not rules:
            node.note = f"no rule derives `{pattern.relation}`, and no such tuple was inserted"
            return []
        children: list[_Pending] = []
        for rule in rules:
            unified = head_checks(rule, pattern, self.checked.schema)
            if unified is None:
                continue
            env, checks = unified
            solver = rule_solver(self.states, rule, self.checked.types_of(rule))
            derivable = pattern.relation in self.checked.dominances
            outcome = best_candidates(solver, rule, env, checks, derivable)
            attempt = self._attempt(rule, solver, outcome, pattern)
            node.attempts.append(attempt)
            self.tried += 1
            failed = attempt.failed
            if failed.because is not None:
                children.append((failed.because, _pattern_of(failed), level + 1))
        if not node.attempts:
            node.note = "no rule's head matches it, and no such tuple was inserted"
        return children

    def _attempt(
        self, rule: Rule, solver: StateSolver, outcome: Outcome, pattern: Pattern
    ) -> Attempt:
        premises = [self._holding(solver, step) for step in outcome.steps]
        if outcome.failed is None:
            premises.append(self._derived(rule, solver, outcome.env, pattern))
        else:
            index, literal = outcome.failed
            premises.append(self._failing(solver, index, literal, outcome.env))
        binding = dict(outcome.env)
        return Attempt(rule_source(rule), binding, premises)

    # -- premises that hold -----------------------------------------------------------

    def _holding(self, solver: StateSolver, step: Step) -> Premise:
        literal, env = step.literal, step.env
        if isinstance(literal, Atom):
            assert step.witness is not None
            text = self._fact(literal.name, step.witness)
            return Premise("atom", text, True, step.index, relation=literal.name,
                           values=step.witness)  # fmt: skip
        if isinstance(literal, Negation):
            values = self._values(solver, literal.atom, env)
            text = "!" + self._fact(literal.atom.name, values)
            return Premise("negation", text, True, step.index, relation=literal.atom.name,
                           values=values)  # fmt: skip
        assert isinstance(literal, Comparison)
        kind, value = self._comparison_kind(solver, literal, env, step.index)
        return Premise(kind, _shown(literal, env, solver), True, step.index, value=value)

    # -- the premise that fails -------------------------------------------------------

    def _failing(self, solver: StateSolver, index: int | None, literal: Any, env: Env) -> Premise:
        if isinstance(literal, Atom):
            return self._missing(solver, index, literal, env)
        if isinstance(literal, Negation):
            atom = literal.atom
            values = self._values(solver, atom, env)
            witness = next(row for _, row in solver.matches(atom, env))
            text = "!" + self._fact(atom.name, values)
            reason = f"fails: {self._fact(atom.name, witness)} holds"
            return Premise("negation", text, False, index, reason, atom.name, values,
                           witness=witness)  # fmt: skip
        assert isinstance(literal, Comparison)
        kind, value = self._comparison_kind(solver, literal, env, index)
        reason = _comparison_reason(solver, literal, env, kind, value)
        return Premise(kind, _shown(literal, env, solver), False, index, reason, value=value)

    def _missing(self, solver: StateSolver, index: int | None, atom: Atom, env: Env) -> Premise:
        kinds = self.checked.schema.types(atom.name)
        values: list[Value | None] = []
        for arg, kind in zip(atom.args, kinds, strict=True):
            if isinstance(arg, Wildcard) or (isinstance(arg, Var) and arg.name not in env):
                values.append(None)
                continue
            value = solver.value(arg, env, kind)
            if value is None:
                reason = f"has no value: `{_shown_term(arg, env, solver)}` cannot be computed"
                return Premise("atom", _shown(atom, env, solver), False, index, reason, atom.name)
            values.append(value)
        same = _same(atom, env)
        text = _shown(atom, env, solver)
        premise = Premise("atom", text, False, index, "missing", atom.name, tuple(values), same)
        if any(rule.head.name == atom.name for rule in self.checked.rules):
            premise.because = WhyNot(atom.name, tuple(values), text, same)
        return premise

    def _derived(self, rule: Rule, solver: StateSolver, env: Env, pattern: Pattern) -> Premise:
        """The whole body holds: the head has no value, or its tuple is subsumed."""
        row = solver.head_row(rule.head, env)
        if row is None:
            text = format_literal(rule.head)
            return Premise("head", text, False, None, "has no value: a functor in it fails")
        relation = rule.head.name
        dominances = self.checked.dominances.get(relation, ())
        stored = self.states[relation]
        group = shared_group(dominances) if dominances else ()
        for other in stored.lookup(group, [row[i] for i in group]):
            if other != row and row in dominated({row, other}, dominances):
                where = ", ".join(f"line {d.span.line}" for d in dominances)
                reason = f"derived, but subsumed by {self._fact(relation, other)} ({where})"
                return Premise("subsumed", self._fact(relation, row), False, None, reason,
                               relation, row, witness=other)  # fmt: skip
        raise RuntimeError(f"{self._fact(relation, row)} is derived but not in `{relation}`")

    # -- helpers ----------------------------------------------------------------------

    def _fact(self, relation: str, values: tuple[Value | None, ...]) -> str:
        return format_fact(relation, values, self.checked.schema.types(relation))

    def _values(self, solver: StateSolver, atom: Atom, env: Env) -> tuple[Value | None, ...]:
        kinds = self.checked.schema.types(atom.name)
        return tuple(
            None if isinstance(arg, Wildcard) else solver.value(arg, env, kind)
            for arg, kind in zip(atom.args, kinds, strict=True)
        )

    def _comparison_kind(
        self, solver: StateSolver, literal: Comparison, env: Env, index: int | None
    ) -> tuple[PremiseKind, Value | None]:
        """A comparison's kind (`aggregate` when it holds one: with its value now)."""
        aggregates = [a for term in literal_terms(literal) for a in aggregates_in(term)]
        if aggregates:
            return "aggregate", solver.aggregate(aggregates[0], env)
        return ("head" if index is None else "comparison"), None


def _comparison_reason(
    solver: StateSolver, literal: Comparison, env: Env, kind: PremiseKind, value: Value | None
) -> str:
    """Why a comparison fails under `env`: false, no value, an aggregate's value."""
    if kind == "aggregate":
        if value is None:
            return "has no value: the aggregate's value is none (nothing matches)"
        return f"false: the aggregate's value is {format_value(value, None)}"
    generated = generator_binding(literal)
    if generated is not None:
        var, _ = generated
        return "false: the value is not generated" if var.name in env else "generates nothing"
    if literal.op == "=" and any(
        isinstance(side, Var) and side.name not in env for side in (literal.left, literal.right)
    ):
        return "has no value: a functor in it fails"  # `x = term` binding x
    shared = comparison_type(literal.left, literal.right, solver.types)
    lv, rv = solver.value(literal.left, env, shared), solver.value(literal.right, env, shared)
    if lv is None or rv is None:
        return "has no value: a functor in it fails"
    return "false"


def _same(atom: Atom, env: Env) -> tuple[tuple[int, ...], ...]:
    """Groups of columns holding the same unbound variable."""
    where: dict[str, list[int]] = {}
    for i, arg in enumerate(atom.args):
        if isinstance(arg, Var) and arg.name not in env:
            where.setdefault(arg.name, []).append(i)
    return tuple(tuple(group) for group in where.values() if len(group) > 1)


def _pattern_of(premise: Premise) -> Pattern:
    assert premise.relation is not None and premise.values is not None
    return Pattern(premise.relation, premise.values, premise.same)


def _shown(literal: Any, env: Env, solver: StateSolver) -> str:
    """The literal with the values `env` gives its variables."""
    return format_literal(map_terms((literal,), lambda term: _constant(term, env, solver))[0])


def _shown_term(term: Term, env: Env, solver: StateSolver) -> str:
    return _shown(Comparison("=", term, term), env, solver).partition(" = ")[0]


def _constant(term: Term, env: Env, solver: StateSolver) -> Term:
    if isinstance(term, Var) and term.name in env:
        value = env[term.name]
        return Const(value, solver.types.get(term.name) or _kind_of(value), term.span)
    return term


def _kind_of(value: Value) -> ColumnType:
    if isinstance(value, str):
        return "symbol"
    return "float" if isinstance(value, float) else "number"
