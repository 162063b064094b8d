"""Specialization: push constants into the rules (magic sets), for every stratified
program (docs/adr/0005, docs/adr/0043).

Layer: datalog (planner). Imports the datalog language, the checker and
`datalog.plan.demand` (the adornments and magic rules).

`reach(1, y)` should explore what 1 reaches, not the whole closure; `query() :-
samegen(16384, 32767)` should ask for one pair, not build every pair. For a
query, `datalog.plan.demand` copies the rules each derived relation is asked
with (an adorned copy `p@bf` guarded by a magic relation `magic@p@bf`), from the
constants of the query and of the rules it depends on; the query then reads the
copies. A copy may also hold facts transactions inserted into `p` (they are true
facts of `p`), so it reads `p`'s input: a copy holds only true facts, and every
fact of `p` its demand asks for.

Negation and aggregates. A negated or aggregated atom needs its relation complete
for the bindings it tests, which holds when the rewritten program is stratified
(the copy is finished before the stratum that reads it). So each negated or
aggregated relation starts with its own demand; while the rewritten program has a
negation or aggregate inside a recursive component, the relations read there are
read with less (their all-free copy, then the original relation, which reads only
originals and so can never close a cycle) until it has none.

Which relations may get bound adornments follows Soufflé's options, as pragmas:
`.pragma "magic-transform" "a, b"` (or `"*"`), `.pragma "magic-transform-exclude"
"c"` and the `magic` / `no_magic` qualifiers of `.decl`; a later pragma of the same
key replaces an earlier one. Deltalog specializes every relation when a program
says nothing (`"*"`). A relation that may not be specialized is read whole, its
rules still rewritten (Soufflé's "weakly ignored"). A query that reads a subsumed
relation is not specialized (subsumption removes tuples: a copy would not be a
subset of the relation it copies).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from datalog.lang.ast import Aggregate, Atom, Decl, Literal, Negation, Program, Rule, Term, Var
from datalog.lang.checks import CheckedProgram, CheckedQuery, check_program, dependencies
from datalog.lang.errors import DatalogError
from datalog.lang.passes.variables import map_terms, nodes
from datalog.lang.strata import dependency_edges, strongly_connected_components
from datalog.plan.demand import ORIGINAL, OWN, Bindings, Body, Copy, Demand, adorned, magic
from differential.budget import Interrupted

__all__ = [
    "MagicPolicy",
    "Specializations",
    "Specialized",
    "adorned",
    "magic",
    "specialize",
    "tenant_specialize",
]

PRAGMA = "magic-transform"
EXCLUDE = "magic-transform-exclude"


@dataclass(frozen=True)
class Specialized:
    """The rewritten program and query, and which input each adorned copy reads."""

    program: CheckedProgram
    query: CheckedQuery
    inputs: dict[str, str]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class MagicPolicy:
    """Which relations may get bound adornments (Soufflé's rule: the specified
    relations, or every one if `*` is specified, less the excluded ones)."""

    specified: frozenset[str] = frozenset({"*"})
    excluded: frozenset[str] = frozenset()

    @classmethod
    def of(cls, program: CheckedProgram) -> MagicPolicy:
        settings: dict[str, str] = {}
        for pragma in program.pragmas:
            if pragma.key in (PRAGMA, EXCLUDE):
                settings[pragma.key] = pragma.value  # a later one replaces an earlier one
        decls = [info.decl for info in program.schema.relations.values()]
        tagged = {d.name for d in decls if "magic" in d.qualifiers}
        untagged = {d.name for d in decls if "no_magic" in d.qualifiers}
        if PRAGMA not in settings and not tagged:
            specified = {"*"}  # Deltalog's default
        else:
            specified = _names(settings.get(PRAGMA, "")) | tagged
        return cls(frozenset(specified), frozenset(_names(settings.get(EXCLUDE, "")) | untagged))

    def allows(self, relation: str) -> bool:
        if relation in self.excluded:
            return False
        everything = "*" in self.specified and "*" not in self.excluded
        return everything or relation in self.specified

    def describe(self) -> list[str]:
        if self.specified == {"*"} and not self.excluded:
            return []
        allowed = "every relation" if "*" in self.specified - self.excluded else None
        named = sorted(self.specified - {"*"})
        if allowed is None:
            allowed = ", ".join(named) if named else "no relation"
        line = f"magic-transform: {allowed} may be specialized"
        if self.excluded:
            line += f", except {', '.join(sorted(self.excluded))}"
        return [line]


def _names(value: str) -> set[str]:
    return {name.strip() for name in value.split(",") if name.strip()}


def specialize(program: CheckedProgram, query: CheckedQuery) -> Specialized | None:
    """The demand-specialized program for `query`, or None when nothing in it is
    asked for with a constant (or it reads a subsumed relation)."""
    return _specialize(program, query, tenant=False)


def tenant_specialize(program: CheckedProgram, query: CheckedQuery) -> Specialized | None:
    """Specialize a multi-tenant query `params(p..), body..` (`datalog.db.tenants`): the
    parameter atom comes first and binds its variables, as constants would, so
    `magic@out@bf(p) :- params(p)` seeds the demand. None when it does not apply."""
    body = query.bodies[0] if len(query.bodies) == 1 else ()
    if not body or not isinstance(body[0], Atom):
        return None
    return _specialize(program, query, tenant=True)


class Specializations:
    """The specializations one planner made for its program, by query: a query asked
    again (a one-shot read after each commit, a live query rebuilt) is specialized
    once, not rewritten and checked again each time (the rewrite is a function of the
    program and the query's structure). A new definition is a new `CheckedProgram`,
    which empties the memo; it keeps the `size` most recently asked."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.program: CheckedProgram | None = None
        self.found: OrderedDict[Hashable, Specialized | None] = OrderedDict()

    def specialize(
        self, program: CheckedProgram, query: CheckedQuery, tenant: bool = False
    ) -> Specialized | None:
        """`specialize(program, query)` (`tenant_specialize` if `tenant`), remembered."""
        if program is not self.program:
            self.program, self.found = program, OrderedDict()
        key = (tenant, _shape(query))
        if key in self.found:
            self.found.move_to_end(key)
            found = self.found[key]
        else:
            found = tenant_specialize(program, query) if tenant else specialize(program, query)
            self.found[key] = found
            if len(self.found) > self.size:
                self.found.popitem(last=False)
        if found is None:
            return None
        asked = replace(found.query, source=query.source)
        return replace(found, query=asked, inputs=dict(found.inputs), notes=list(found.notes))


def _shape(query: CheckedQuery) -> Hashable:
    """What of `query` its specialization depends on (not its source text)."""
    types = tuple(tuple(sorted(t.items())) for t in query.variable_types)
    return query.bodies, query.answer_vars, query.answer_types, types


def _specialize(program: CheckedProgram, query: CheckedQuery, tenant: bool) -> Specialized | None:
    reads = {n.name for body in query.bodies for n in nodes((), body) if isinstance(n, Atom)}
    needed = dependencies(program, reads)
    if needed & program.dominances.keys():  # subsumption removes tuples: not monotone
        return None
    rules = [r for r in program.rules if r.head.name in needed]
    policy = MagicPolicy.of(program)
    levels: dict[str, int] = {}
    for _ in range(3 * len(needed) + 1):
        demand = Demand(rules, policy.allows, levels)
        bodies = [_rewrite_query(demand, body, tenant) for body in query.bodies]
        demand.run()
        if not any(c.is_magic for c in demand.copies.values()):
            return None
        rewritten = _collapsed(demand, bodies)
        unstratified = _negated_in_cycles(rewritten[0])
        if not unstratified:
            return _finish(program, query, demand, rewritten, policy, levels)
        for name in unstratified:
            if levels.get(name, OWN) >= ORIGINAL:
                return None  # cannot happen (originals read only originals); be safe
            levels[name] = levels.get(name, OWN) + 1
    return None


def _rewrite_query(demand: Demand, body: Sequence[Literal], tenant: bool) -> tuple[Literal, ...]:
    """A query body as a rule with nothing bound by a head; a tenant query's first
    atom (its parameter relation) binds its variables and starts every prefix."""
    if not tenant:
        return tuple(Body(demand, Bindings(), []).rewrite(body))
    first = body[0]
    assert isinstance(first, Atom)
    names = {a.name for a in first.args if isinstance(a, Var)}
    bindings = Bindings(strong=set(names), grounded=set(names))
    return (first, *Body(demand, bindings, [first]).rewrite(body[1:]))


Rewritten = tuple[list[Rule], list[tuple[Literal, ...]]]


def _collapsed(demand: Demand, bodies: list[tuple[Literal, ...]]) -> Rewritten:
    """The rewritten rules and query bodies, each copy whose rules reach no magic
    relation renamed back to its original (it computes the same relation)."""
    reads: dict[str, set[str]] = {}
    for edge in dependency_edges(demand.rules):
        reads.setdefault(edge.head, set()).add(edge.body)
    specialized = {name for name, c in demand.copies.items() if c.is_magic}
    changed = True
    while changed:
        changed = False
        for head, bodies_read in reads.items():
            if head not in specialized and bodies_read & specialized:
                specialized.add(head)
                changed = True
    plain = {n: c.original for n, c in demand.copies.items() if n not in specialized}
    rules = [_renamed(r, plain) for r in demand.rules if r.head.name not in plain]
    return rules, [_renamed_body(b, plain) for b in bodies]


def _renamed(rule: Rule, names: dict[str, str]) -> Rule:
    return Rule(rule.head, _renamed_body(rule.body, names), rule.span)


def _renamed_body(body: Sequence[Literal], names: dict[str, str]) -> tuple[Literal, ...]:
    if not names:
        return tuple(body)
    return tuple(_rename_literal(literal, names) for literal in body)


def _rename_literal(literal: Literal, names: dict[str, str]) -> Literal:
    def atom(a: Atom) -> Atom:
        return replace(a, name=names.get(a.name, a.name))

    if isinstance(literal, Atom):
        literal = atom(literal)
    elif isinstance(literal, Negation):
        literal = replace(literal, atom=atom(literal.atom))
    (mapped,) = map_terms((literal,), lambda t: _rename_aggregate(t, names))
    return mapped


def _rename_aggregate(term: Term, names: dict[str, str]) -> Term:
    if isinstance(term, Aggregate):
        return replace(term, body=_renamed_body(term.body, names))
    return term


def _negated_in_cycles(rules: Sequence[Rule]) -> set[str]:
    """The original relations read by a negation or an aggregate inside a recursive
    component of `rules` (the originals they read are leaves: they read no copy)."""
    edges = list(dependency_edges(rules))
    graph: dict[str, list[str]] = {}
    for edge in edges:
        graph.setdefault(edge.head, []).append(edge.body)
        graph.setdefault(edge.body, [])
    component = {n: i for i, c in enumerate(strongly_connected_components(graph)) for n in c}
    return {
        _original(e.body)
        for e in edges
        if e.kind != "positive" and component[e.head] == component[e.body]
    }


def _original(name: str) -> str:
    return name.removeprefix("magic@").split("@")[0]


def _finish(
    base: CheckedProgram,
    query: CheckedQuery,
    demand: Demand,
    rewritten: Rewritten,
    policy: MagicPolicy,
    levels: dict[str, int],
) -> Specialized | None:
    rules, bodies = rewritten
    made = _relations(rules, bodies)
    copies = {n: c for n, c in demand.copies.items() if n in made}
    decls = tuple(_erased(info.decl, info.types) for info in base.schema.relations.values())
    extra = tuple(_copy_decl(base, name, c) for name, c in copies.items())
    originals = dependencies(base, made - demand.copies.keys())
    kept = tuple(r for r in base.rules if r.head.name in originals)
    functors = tuple(f.declaration() for f in base.schema.functors.values())
    program = Program(decls=decls + extra, rules=kept + tuple(rules), functors=functors)
    try:
        checked = check_program(program)
    except Interrupted:  # a budget ran out (a `BudgetExceeded` is a `DatalogError` too)
        raise
    except DatalogError:  # a rewrite the checker rejects: plan unspecialized
        return None
    inputs = {name: c.original for name, c in copies.items() if not c.is_magic}
    new_query = replace(query, bodies=tuple(bodies), schema=checked.schema)
    return Specialized(checked, new_query, inputs, _notes(copies, levels, policy))


def _relations(rules: Sequence[Rule], bodies: Iterable[Sequence[Literal]]) -> set[str]:
    """Every relation `rules` and the query `bodies` define or read."""
    found = {r.head.name for r in rules} | {e.body for e in dependency_edges(rules)}
    return found | {n.name for b in bodies for n in nodes((), b) if isinstance(n, Atom)}


def _copy_decl(base: CheckedProgram, name: str, copy: Copy) -> Decl:
    info = base.schema[copy.original]
    decl = replace(info.decl, name=name, semantics="set", qualifiers=())
    if not copy.is_magic:
        return _erased(decl, info.types)
    kept = [i for i, a in enumerate(copy.adornment) if a == "b"]
    columns = tuple(info.decl.columns[i] for i in kept)
    return _erased(replace(decl, columns=columns), tuple(info.types[i] for i in kept))


def _erased(decl: Decl, types: tuple[str, ...]) -> Decl:
    """`decl` with its column types replaced by primitive ones (no `.type` names)."""
    columns = tuple(replace(c, type=t) for c, t in zip(decl.columns, types, strict=True))
    return replace(decl, columns=columns)


def _notes(copies: dict[str, Copy], levels: dict[str, int], policy: MagicPolicy) -> list[str]:
    asked = sorted(n for n, c in copies.items() if not c.is_magic and "b" in c.adornment)
    free = sorted(n for n, c in copies.items() if "b" not in c.adornment)
    notes = [f"demand: {', '.join(asked) or 'none'}"]
    if free:
        notes.append(f"rewritten whole (constants inside): {', '.join(free)}")
    for name, level in sorted(levels.items()):
        how = "its all-free copy" if level < ORIGINAL else "the original relation"
        notes.append(
            f"negated or aggregated `{name}` read through {how}: its own demand would "
            "put a negation or aggregate inside a recursion"
        )
    return notes + policy.describe()
