"""The oracle of `why_not` explanations: each one checked against the reference state.

An explanation (its JSON form, `WhyNot.to_dict()`) is checked against `full`, every
relation as the reference evaluator computes it, independently of the engine and of
`datalog.db.candidates`:

- the asked pattern matches no tuple of `full`, and the rules tried are exactly the
  rules of its relation whose head unifies with it, in program order;
- each rule's best candidate binding, the premises shown as holding and the one
  shown as failing equal what a plain depth-first search over `full` finds (the
  reference `Solver`, relations scanned in sorted order, no early stop): the longest
  prefix of the evaluation order, the first in value order among equally long ones;
- every premise shown as holding holds in `full` under the binding, and the failing
  one fails: a missing atom matches no tuple, a failed negation's witness is in
  `full`, a comparison is false or has no value, a subsumed tuple is beaten by its
  witness;
- nested explanations are checked the same way; one not expanded says why, truly
  (explained above, or the depth or size limit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from datalog.eval import reference
from datalog.eval.reference import Env, Relations, Row
from datalog.lang.ast import (
    Aggregate,
    Atom,
    Comparison,
    Const,
    Literal,
    Negation,
    Rule,
    Var,
    Wildcard,
)
from datalog.lang.checks import CheckedProgram
from datalog.lang.functions import Value
from datalog.lang.passes.variables import aggregate_groups, literal_terms, subterms
from datalog.lang.pretty import format_rule

Json = dict[str, Any]


def order(row: Sequence[Value]) -> tuple[tuple[bool, Value], ...]:
    """Numbers before symbols, each by value (the documented tie-break order)."""
    return tuple((isinstance(v, str), v) for v in row)


def matches(row: Row, values: Sequence[Value | None], same: Sequence[Sequence[int]]) -> bool:
    return all(w is None or w == v for v, w in zip(row, values, strict=True)) and all(
        len({row[i] for i in group}) == 1 for group in same
    )


@dataclass
class Oracle:
    checked: CheckedProgram
    full: Relations
    depth: int = 3
    size: int = 100
    seen: list[tuple[str, tuple[Any, ...], tuple[tuple[int, ...], ...]]] = field(
        default_factory=list
    )
    tried: int = 0

    def check(self, tree: Json) -> None:
        """Check a whole explanation (the asked tuple at level 0)."""
        self.seen, self.tried = [], 0
        self._tree(tree, 0)
        assert self.tried <= self.size

    def _tree(self, tree: Json, level: int) -> None:
        relation, values = tree["relation"], tuple(tree["values"])
        same = tuple(tuple(g) for g in tree["same"])
        found = [r for r in self.full[relation] if matches(r, values, same)]
        assert not found, f"{tree['fact']} is said absent, but {found[0]} holds"
        key = (relation, values, same)
        note = tree["note"]
        if note == "explained above":
            assert key in self.seen, f"{tree['fact']}: explained above, but it was not"
            assert not tree["rules"]
            return
        assert key not in self.seen, f"{tree['fact']} explained twice"
        if note.startswith("not explained further"):
            assert level > self.depth and not tree["rules"]
            return
        assert level <= self.depth, f"{tree['fact']} explained deeper than {self.depth}"
        if note.startswith("not explained:"):
            assert self.tried >= self.size and not tree["rules"]
            return
        assert self.tried < self.size, f"{tree['fact']} explained beyond {self.size} rules"
        self.seen.append(key)
        rules = [r for r in self.checked.rules if r.head.name == relation]
        unified = [(r, u) for r in rules if (u := unify_head(self, r, values, same)) is not None]
        shown = [(a["rule"]["text"], a["rule"]["line"]) for a in tree["rules"]]
        assert shown == [(format_rule(r), r.span.line) for r, _ in unified], tree["fact"]
        assert bool(note) == (not unified), f"{tree['fact']}: note {note!r}"
        self.tried += len(unified)  # all of a tree's rules first, then what they nest
        for attempt, (rule, (env, checks)) in zip(tree["rules"], unified, strict=True):
            self._attempt(attempt, rule, env, checks, level)

    def _attempt(
        self, attempt: Json, rule: Rule, env: Env, checks: list[Comparison], level: int
    ) -> None:
        solver = rule_solver(self, rule)
        items: list[tuple[int | None, Literal]] = [
            *enumerate(rule.body),
            *((None, c) for c in checks),
        ]
        subsumed = rule.head.name in self.checked.dominances
        best = Search(self, solver, items).best(env)
        premises = attempt["premises"]
        context = f"{rule.head.name} rule {format_rule(rule)}"
        assert attempt["binding"] == best.env, f"{context}: binding"
        holding = [p for p in premises if p["holds"]]
        assert premises[: len(holding)] == holding and len(premises) == len(holding) + 1
        assert [p["index"] for p in holding] == [i for i, _, _ in best.steps], context
        for premise, (index, literal, witness) in zip(holding, best.steps, strict=True):
            if isinstance(literal, Atom):
                assert tuple(premise["values"]) == witness, context
                assert witness in self.full[literal.name]
            self._holds(solver, premise, literal, index, best.env)
        failed = premises[-1]
        if best.failed is None:
            assert subsumed, f"{context}: derives an absent tuple"
            self._subsumed(solver, rule, failed, best.env)
            return
        index, literal = best.failed
        assert failed["index"] == index, f"{context}: the failing premise"
        self._fails(solver, failed, literal, best.env)
        if failed["because"] is not None:
            self._tree(failed["because"], level + 1)

    def _holds(
        self, solver: reference.Solver, premise: Json, literal: Literal, index: int | None, env: Env
    ) -> None:
        if isinstance(literal, Atom):
            assert premise["kind"] == "atom"
            return
        if isinstance(literal, Negation):
            assert premise["kind"] == "negation"
            assert not any(True for _ in solver.match_atom(literal.atom, env)), premise["text"]
            return
        kind = "aggregate" if has_aggregate(literal) else "head" if index is None else "comparison"
        assert premise["kind"] == kind, premise["text"]
        assert any(True for _ in solver.apply(literal, env)), premise["text"]

    def _fails(self, solver: reference.Solver, premise: Json, literal: Literal, env: Env) -> None:
        assert not any(True for _ in solver.apply(literal, env)), f"{premise['text']} holds"
        if isinstance(literal, Atom):
            assert premise["kind"] == "atom"
            if premise["values"] is not None:  # (an argument without a value: none)
                values, same = premise["values"], premise["same"]
                assert not [r for r in self.full[literal.name] if matches(r, values, same)]
                derived = any(r.head.name == literal.name for r in self.checked.rules)
                assert (premise["because"] is not None) == derived, premise["text"]
        elif isinstance(literal, Negation):
            assert premise["kind"] == "negation"
            witness = tuple(premise["witness"])
            assert witness in self.full[literal.atom.name]
            want = expected(solver, literal.atom, env)
            assert solver.unify(literal.atom.args, want, witness, env) is not None
        else:
            kind = "aggregate" if has_aggregate(literal) else "comparison"
            assert premise["kind"] in (kind, "head")

    def _subsumed(self, solver: reference.Solver, rule: Rule, premise: Json, env: Env) -> None:
        row = solver.head_row(rule.head, env)
        assert row is not None and row not in self.full[rule.head.name]
        assert premise["kind"] == "subsumed" and tuple(premise["values"]) == row
        witness = tuple(premise["witness"])
        assert witness in self.full[rule.head.name]
        dominances = self.checked.dominances[rule.head.name]
        assert row in reference.dominated({row, witness}, dominances)


def has_aggregate(literal: Literal) -> bool:
    return any(isinstance(t, Aggregate) for term in literal_terms(literal) for t in subterms(term))


def rule_solver(oracle: Oracle, rule: Rule) -> reference.Solver:
    groups = aggregate_groups(rule.head.args, rule.body)
    types = oracle.checked.types_of(rule)
    return reference.Solver(oracle.full, oracle.checked.schema, types, groups)


def expected(solver: reference.Solver, atom: Atom, env: Env) -> list[Value | None]:
    kinds = solver.schema.types(atom.name)
    return [
        None if isinstance(arg, Var | Wildcard) else solver.value(arg, env, kind)
        for arg, kind in zip(atom.args, kinds, strict=True)
    ]


def unify_head(
    oracle: Oracle, rule: Rule, values: Sequence[Value | None], same: Sequence[Sequence[int]]
) -> tuple[Env, list[Comparison]] | None:
    """The head's variables bound by the pattern, and the computed arguments and equal
    columns left to check (None: it cannot give a tuple of the pattern)."""
    env: Env = {}
    checks: list[Comparison] = []
    kinds = oracle.checked.schema.types(rule.head.name)
    plain = reference.Solver({}, oracle.checked.schema, {}, {})
    for arg, value, kind in zip(rule.head.args, values, kinds, strict=True):
        if value is None:
            continue
        if isinstance(arg, Var):
            if arg.name in env and env[arg.name] != value:
                return None
            env[arg.name] = value
        elif isinstance(arg, Const):
            if plain.value(arg, {}, kind) != value:
                return None
        else:
            checks.append(Comparison("=", Const(value, kind), arg))
    for group in same:
        args = [rule.head.args[i] for i in group]
        checks += [Comparison("=", args[0], a) for a in args[1:] if a != args[0]]
    return env, checks


@dataclass
class Best:
    env: Env
    steps: list[tuple[int | None, Literal, Row | None]]
    failed: tuple[int | None, Literal] | None


class Search:
    """The plain depth-first search the oracle expects `why_not` to agree with."""

    def __init__(
        self, oracle: Oracle, solver: reference.Solver, items: list[tuple[int | None, Literal]]
    ) -> None:
        self.oracle, self.solver, self.items = oracle, solver, items
        self.found: Best | None = None
        self.depth = -1

    def best(self, env: Env) -> Best:
        self._run(list(range(len(self.items))), env, [])
        assert self.found is not None
        return self.found

    def _run(
        self, pending: list[int], env: Env, steps: list[tuple[int | None, Literal, Row | None]]
    ) -> bool:
        if not pending:
            self.found = Best(env, list(steps), None)
            return True
        at = next(i for i in pending if self.solver.ready(self.items[i][1], env))
        index, literal = self.items[at]
        rest = [i for i in pending if i != at]
        extensions = self._extensions(literal, env)
        if not extensions and len(steps) > self.depth:
            self.found, self.depth = Best(env, list(steps), (index, literal)), len(steps)
        for extended, witness in extensions:
            steps.append((index, literal, witness))
            if self._run(rest, extended, steps):
                return True
            steps.pop()
        return False

    def _extensions(self, literal: Literal, env: Env) -> list[tuple[Env, Row | None]]:
        if isinstance(literal, Atom):
            want = expected(self.solver, literal, env)
            if any(w is None and not isinstance(a, Var | Wildcard)
                   for w, a in zip(want, literal.args, strict=True)):  # fmt: skip
                return []
            out: dict[tuple[tuple[str, Value], ...], tuple[Env, Row]] = {}
            for row in sorted(self.oracle.full[literal.name], key=order):
                extended = self.solver.unify(literal.args, want, row, env)
                if extended is not None:
                    out.setdefault(tuple(sorted(extended.items())), (extended, row))
            return list(out.values())
        found = list(self.solver.apply(literal, env))
        new = sorted(set(found[0]) - set(env)) if found else []
        found.sort(key=lambda e: order([e[n] for n in new]))
        return [(e, None) for e in found]


def fact_tuples(kinds: Sequence[str], domain: Mapping[str, Sequence[Value]]) -> list[Row]:
    """Every tuple of the small value domain, for asking about absent facts."""
    rows: list[Row] = [()]
    for kind in kinds:
        rows = [(*row, value) for row in rows for value in domain[kind]]
    return rows
