"""Specialization: push a query's constants into the rules (magic sets).

Layer: datalog (planner). Imports the datalog language and checker.

`reach(1, y)` should explore what 1 reaches, not the whole closure. For a
query atom over a derived relation with constants, the demand transformation
(left-to-right sideways information passing) makes an adorned copy `p@bf` of
every rule that can be asked with some arguments bound, guarded by a magic
relation `magic@p@bf` holding the bindings actually asked for, and magic rules
that pass bindings from a rule's head and the body literals before an atom to
that atom. The query then reads `p@bf`, seeded with `magic@p@bf(1)`.

Only positive programs are specialized (no negation, aggregate or subsumed
relation anywhere in what the query depends on): there the rewritten program is stratifiable and
monotone, so `p@bf` may also hold the facts transactions inserted into `p`
(all true facts of `p`), which keeps the copies simple. Anything else is
planned unspecialized.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from datalog.ast import (
    Aggregate,
    Atom,
    Comparison,
    Const,
    Decl,
    Literal,
    Negation,
    Program,
    Query,
    Rule,
    Term,
    Var,
)
from datalog.checks import CheckedProgram, CheckedQuery, check_program, check_query, dependencies
from datalog.errors import DatalogError
from datalog.passes.variables import nodes, term_variables

Adornment = str  # one letter per argument: "b" bound, "f" free


@dataclass(frozen=True)
class Specialized:
    """The rewritten program and query, and which input each adorned copy reads."""

    program: CheckedProgram
    query: CheckedQuery
    inputs: dict[str, str]


def adorned(name: str, adornment: Adornment) -> str:
    return f"{name}@{adornment}"


def magic(name: str, adornment: Adornment) -> str:
    return f"magic@{name}@{adornment}"


def specialize(program: CheckedProgram, query: CheckedQuery) -> Specialized | None:
    """The demand-specialized program for `query`, or None when it does not apply."""
    if len(query.bodies) != 1:
        return None
    body = query.bodies[0]
    derived = {r.head.name for r in program.rules}
    reads = {n.name for n in nodes((), body) if isinstance(n, Atom)}
    needed = dependencies(program, reads)
    rules = [r for r in program.rules if r.head.name in needed]
    if any(_not_positive(r.body) for r in rules) or _not_positive(body):
        return None
    if needed & program.dominances.keys():  # subsumption removes tuples: not monotone
        return None
    seeds = [(i, lit) for i, lit in enumerate(body) if _asks(lit, derived)]
    if not seeds:
        return None
    rewriter = _Rewriter(program, derived, {r.head.name: [] for r in rules})
    for r in rules:
        rewriter.by_head[r.head.name].append(r)
    new_body = list(body)
    for i, atom in seeds:
        assert isinstance(atom, Atom)
        ad = "".join("b" if isinstance(a, Const) else "f" for a in atom.args)
        rewriter.demand(atom.name, ad)
        bound = [a for a in atom.args if isinstance(a, Const)]
        rewriter.seed(atom.name, ad, bound)
        new_body[i] = replace(atom, name=adorned(atom.name, ad))
    return rewriter.finish(query, tuple(new_body))


def _not_positive(body: tuple[Literal, ...]) -> bool:
    return any(isinstance(n, Negation | Aggregate) for n in nodes((), body))


def _asks(lit: Literal, derived: set[str]) -> bool:
    return (
        isinstance(lit, Atom)
        and lit.name in derived
        and any(isinstance(a, Const) for a in lit.args)
        and all(isinstance(a, Var | Const) for a in lit.args)
    )


class _Rewriter:
    def __init__(
        self, program: CheckedProgram, derived: set[str], by_head: dict[str, list[Rule]]
    ) -> None:
        self.program = program
        self.derived = derived
        self.by_head = by_head
        self.done: set[tuple[str, Adornment]] = set()
        self.rules: list[Rule] = []
        self.decls: dict[str, Decl] = {}

    def _types(self, decl: Decl) -> tuple[str, ...]:
        """The primitive column types of an adorned or magic copy's declaration."""
        name, ad = decl.name.split("@")[-2:]
        types = self.program.schema.types(name)
        if decl.name.startswith("magic@"):
            return tuple(t for t, a in zip(types, ad, strict=True) if a == "b")
        return types

    def demand(self, name: str, ad: Adornment) -> None:
        """Add the adorned copies of `name`'s rules (and what they demand in turn)."""
        if (name, ad) in self.done:
            return
        self.done.add((name, ad))
        decl = self.program.schema[name].decl
        self.decls[adorned(name, ad)] = replace(decl, name=adorned(name, ad), semantics="set")
        columns = tuple(c for c, a in zip(decl.columns, ad, strict=True) if a == "b")
        self.decls[magic(name, ad)] = replace(decl, name=magic(name, ad), columns=columns)
        for rule in self.by_head.get(name, []):
            self._adorn(rule, ad)

    def seed(self, name: str, ad: Adornment, constants: list[Const]) -> None:
        """`magic@name@ad(constants)`: the bindings the query itself asks for."""
        names = [Var(f"_seed{i}") for i in range(len(constants))]
        body = tuple(Comparison("=", v, c) for v, c in zip(names, constants, strict=True))
        self.rules.append(Rule(Atom(magic(name, ad), tuple(names)), body))

    def _adorn(self, rule: Rule, ad: Adornment) -> None:
        head = rule.head
        if any(
            a == "b" and not isinstance(t, Var | Const) for t, a in zip(head.args, ad, strict=True)
        ):
            raise _Unsupported
        guard = Atom(magic(head.name, ad), _bound_args(head.args, ad))
        bound = {
            v.name
            for t, a in zip(head.args, ad, strict=True)
            if a == "b"
            for v in term_variables(t)
        }
        done: list[Literal] = [guard]
        for lit in rule.body:
            if isinstance(lit, Atom) and lit.name in self.derived:
                lit = self._demand_atom(lit, bound, done)
            done.append(lit)
            bound |= _binds(lit, bound)
        self.rules.append(Rule(replace(head, name=adorned(head.name, ad)), tuple(done)))

    def _demand_atom(self, atom: Atom, bound: set[str], before: list[Literal]) -> Atom:
        ad = "".join("b" if _is_bound(t, bound) else "f" for t in atom.args)
        if "b" not in ad:
            return atom
        self.demand(atom.name, ad)
        target = Atom(magic(atom.name, ad), _bound_args(atom.args, ad))
        if not (len(before) == 1 and before[0] == target):
            self.rules.append(Rule(target, tuple(before)))
        return replace(atom, name=adorned(atom.name, ad))

    def finish(self, query: CheckedQuery, body: tuple[Literal, ...]) -> Specialized | None:
        base = self.program
        decls = tuple(_erased(info.decl, info.types) for info in base.schema.relations.values())
        extra = tuple(_erased(d, self._types(d)) for d in self.decls.values())
        functors = tuple(f.declaration() for f in base.schema.functors.values())
        rules = base.rules + tuple(self.rules)
        program = Program(decls=decls + extra, rules=rules, functors=functors)
        try:
            checked = check_program(program)
        except DatalogError:  # a rewrite the checker rejects: plan unspecialized
            return None
        inputs = {adorned(n, a): n for n, a in self.done}
        new_query = check_query(Query(body, source=query.source), checked.schema)
        return Specialized(checked, new_query, inputs)


def _erased(decl: Decl, types: tuple[str, ...]) -> Decl:
    """`decl` with its column types replaced by primitive ones (no `.type` names)."""
    columns = tuple(replace(c, type=t) for c, t in zip(decl.columns, types, strict=True))
    return replace(decl, columns=columns)


class _Unsupported(Exception):
    """A bound head position holds an expression: leave the query unspecialized."""


def _bound_args(args: tuple[Term, ...], ad: Adornment) -> tuple[Term, ...]:
    return tuple(t for t, a in zip(args, ad, strict=True) if a == "b")


def _is_bound(term: Term, bound: set[str]) -> bool:
    if isinstance(term, Const):
        return True
    return isinstance(term, Var) and term.name in bound


def _binds(lit: Literal, bound: set[str]) -> set[str]:
    """Variables bound once `lit` has been applied."""
    if isinstance(lit, Atom):
        return {v.name for t in lit.args for v in term_variables(t)}
    if isinstance(lit, Comparison) and lit.op == "=":
        for target, other in ((lit.left, lit.right), (lit.right, lit.left)):
            needs = {v.name for v in term_variables(other)}
            if isinstance(target, Var) and needs <= bound:
                return {target.name}
    return set()


def tenant_specialize(program: CheckedProgram, query: CheckedQuery) -> Specialized | None:
    """Specialize a multi-tenant query `params(p..), body..` (`datalog.tenants`):
    the parameter atom comes first, and its variables bind the derived atoms after
    it as constants would (sideways information passing through the body), so
    `magic@out@bf(p) :- params(p)` seeds the demand. None when it does not apply."""
    if len(query.bodies) != 1:
        return None
    body = query.bodies[0]
    derived = {r.head.name for r in program.rules}
    needed = dependencies(program, {n.name for n in nodes((), body) if isinstance(n, Atom)})
    rules = [r for r in program.rules if r.head.name in needed]
    if any(_not_positive(r.body) for r in rules) or _not_positive(body):
        return None
    if needed & program.dominances.keys() or not body or not isinstance(body[0], Atom):
        return None
    rewriter = _Rewriter(program, derived, {r.head.name: [] for r in rules})
    for r in rules:
        rewriter.by_head[r.head.name].append(r)
    done: list[Literal] = [body[0]]
    bound = _binds(body[0], set())
    try:
        for lit in body[1:]:
            if isinstance(lit, Atom) and lit.name in derived and _simple(lit):
                lit = rewriter._demand_atom(lit, bound, done)
            done.append(lit)
            bound |= _binds(lit, bound)
    except _Unsupported:
        return None
    if not rewriter.done:
        return None
    return rewriter.finish(query, tuple(done))


def _simple(atom: Atom) -> bool:
    return all(isinstance(a, Var | Const) for a in atom.args)


def try_specialize(program: CheckedProgram, query: CheckedQuery) -> Specialized | None:
    """`specialize`, or None when some rule cannot be adorned."""
    try:
        return specialize(program, query)
    except _Unsupported:
        return None
