"""The demand transformation of one query's rules: adornments and magic rules.

Layer: datalog (planner). Imports the datalog language only; `datalog.plan.magic`
drives it (which relations may be specialized, the stratification loop, the check).

A derived relation `p` asked for with some arguments bound gets an adorned copy
`p@bf` (one letter per argument: bound or free) holding `p`'s tuples for the
bindings in its magic relation `magic@p@bf`; each rule of `p` is copied with the
guard `magic@p@bf(bound head arguments)` first. Bindings flow through a body in
a sideways-information-passing order (`Body`): each derived atom reached with
bound arguments demands its own adorned copy, seeded by a magic rule whose body
is the guard and the literals placed before the atom (its prefix). A relation
asked for with nothing bound gets an all-free copy `p@ff` (its rules rewritten,
so that constants inside them specialize what they read); `datalog.plan.magic`
renames such a copy back to `p` when nothing below it is specialized.

What counts as bound (the policy, docs/adr/0043):

- constants, and variables connected to the demand: the guard's (weakly bound:
  they come from the head) and those of an atom placed with at least one bound
  argument (strongly bound: they come from a finite relation). An atom with no
  bound argument binds nothing, so a query or rule without constants never
  specializes what it reads (a magic set of every value would only compute the
  relation twice);
- `x = t` binds `x` when `t` is a variable or a constant (as bound as `t`), or an
  expression over strongly bound variables only: a function of a weakly bound
  head variable could make a magic set grow without end through recursion
  (`magic@p(n - 1) :- magic@p(n)`), where the program itself terminates;
- an aggregate's result binds nothing.

Order: comparisons as soon as their variables are bound; then, among atoms with a
bound argument, relations that are not specialized (base relations: cheap lookups
that bind more) before specialized ones, more bound arguments first, then as
written; atoms with no bound argument last; negations and aggregates after every
atom, so their own demand is as narrow as it can be. Magic rule bodies hold the
guard, placed atoms and comparisons, never a negation or an aggregate (dropping a
literal only makes a magic set larger, which stays sound).

Negations and aggregates (`Occurrence` levels, raised per relation by
`datalog.plan.magic` until the rewritten program is stratified): at level 0 a
negated or aggregated atom with bound arguments gets its own demand (sound when
the adorned copy is complete before it is read, which stratification ensures);
at level 1 it reads the all-free copy; at level 2 the original relation, whose
rules are never rewritten (always stratified: originals read only originals).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from datalog.lang.ast import (
    Aggregate,
    Atom,
    Comparison,
    Const,
    Literal,
    Negation,
    Rule,
    Term,
    Var,
)
from datalog.lang.passes.variables import (
    aggregates_in,
    literal_terms,
    replace_aggregates,
    term_variables,
)

Adornment = str  # one letter per argument: "b" bound, "f" free
OWN, FREE, ORIGINAL = 0, 1, 2  # how a negated or aggregated atom is read


def adorned(name: str, adornment: Adornment) -> str:
    return f"{name}@{adornment}"


def magic(name: str, adornment: Adornment) -> str:
    return f"magic@{name}@{adornment}"


@dataclass
class Bindings:
    """Variables bound for adornment (strongly or weakly) and those the prefix binds."""

    strong: set[str] = field(default_factory=set)
    weak: set[str] = field(default_factory=set)
    grounded: set[str] = field(default_factory=set)  # bound by the prefix's literals

    def bound(self, name: str) -> bool:
        return name in self.strong or name in self.weak

    def copy(self) -> Bindings:
        return Bindings(set(self.strong), set(self.weak), set(self.grounded))


@dataclass(frozen=True)
class Copy:
    """A relation the transformation made: an adorned copy or a magic relation."""

    original: str
    adornment: Adornment
    is_magic: bool


class Demand:
    """The adorned and magic rules one query needs (module docstring)."""

    def __init__(
        self,
        rules: Sequence[Rule],
        eligible: Callable[[str], bool],
        levels: Mapping[str, int],
    ) -> None:
        self.by_head: dict[str, list[Rule]] = {}
        for rule in rules:
            self.by_head.setdefault(rule.head.name, []).append(rule)
        self.eligible = eligible  # may get bound adornments (derived, allowed by policy)
        self.levels = levels  # relation -> OWN, FREE or ORIGINAL for negated/aggregated reads
        self.done: set[tuple[str, Adornment]] = set()
        self.pending: list[tuple[str, Adornment]] = []
        self.rules: list[Rule] = []
        self.copies: dict[str, Copy] = {}

    # -- relations ------------------------------------------------------------------

    def derived(self, name: str) -> bool:
        return name in self.by_head

    def read(self, name: str, ad: Adornment, level: int = OWN) -> str:
        """The name an atom of `name` reached with `ad` reads (demanding its copy)."""
        if not self.derived(name) or level >= ORIGINAL:
            return name
        if level == FREE or "b" not in ad or not self.eligible(name):
            ad = "f" * len(ad)
        if (name, ad) not in self.done:
            self.done.add((name, ad))
            self.pending.append((name, ad))
            self.copies[adorned(name, ad)] = Copy(name, ad, False)
            if "b" in ad:
                self.copies[magic(name, ad)] = Copy(name, ad, True)
        return adorned(name, ad)

    def run(self) -> None:
        """Adorn the rules of every demanded copy (and what they demand in turn)."""
        while self.pending:
            name, ad = self.pending.pop()
            for rule in self.by_head[name]:
                self._adorn(rule, ad)

    def _adorn(self, rule: Rule, ad: Adornment) -> None:
        head = rule.head
        at_bound = [t for t, a in zip(head.args, ad, strict=True) if a == "b"]
        guards: tuple[Literal, ...] = ()
        bindings = Bindings()
        if at_bound and all(isinstance(t, Var | Const) for t in at_bound):
            guards = (Atom(magic(head.name, ad), tuple(at_bound)),)
            names = {t.name for t in at_bound if isinstance(t, Var)}
            bindings = Bindings(weak=set(names), grounded=set(names))
        # else (a computed head argument at a bound position): no guard; the copy
        # then holds all of the rule's tuples, a superset of the demand, still true
        body = Body(self, bindings, list(guards)).rewrite(rule.body)
        self.rules.append(Rule(replace(head, name=adorned(head.name, ad)), (*guards, *body)))

    # -- magic rules ----------------------------------------------------------------

    def ask(self, atom: Atom, bindings: Bindings, prefix: list[Literal], level: int) -> Atom:
        """`atom` renamed to the copy it reads; its magic rule if it has its own demand."""
        ad = "".join("b" if _is_bound(t, bindings) else "f" for t in atom.args)
        name = self.read(atom.name, ad, level)
        copy = self.copies.get(name)
        if copy is not None and "b" in copy.adornment:
            args = tuple(t for t, a in zip(atom.args, copy.adornment, strict=True) if a == "b")
            self._magic_rule(Atom(magic(atom.name, copy.adornment), args), prefix)
        return replace(atom, name=name)

    def _magic_rule(self, head: Atom, prefix: Sequence[Literal]) -> None:
        if list(prefix) == [head]:
            return  # magic@p(x) :- magic@p(x): adds nothing
        if not prefix:  # only constants: a seed, `magic@p(c) :- v = c`
            names = tuple(Var(f"_seed{i}") for i in range(len(head.args)))
            seeds = tuple(Comparison("=", v, t) for v, t in zip(names, head.args, strict=True))
            self.rules.append(Rule(replace(head, args=names), seeds))
            return
        self.rules.append(Rule(head, tuple(prefix)))


class Body:
    """One body rewritten in sideways-information-passing order (module docstring)."""

    def __init__(
        self, demand: Demand, bindings: Bindings, prefix: list[Literal], aggregated: bool = False
    ) -> None:
        self.demand = demand
        self.bindings = bindings
        self.prefix = prefix  # literals a magic rule for the next atom starts from
        self.aggregated = aggregated  # positive atoms read by their relation's level
        self.computed: list[tuple[str, Term, set[str]]] = []  # placed `x = t`: x, t, t's inputs

    def rewrite(self, body: Sequence[Literal]) -> list[Literal]:
        """`body` (in written order) with every derived atom renamed to what it reads."""
        out: dict[int, Literal] = {}
        todo = dict(enumerate(body))
        while True:
            self._place_comparisons(todo, out)
            picked = self._next_atom(todo)
            if picked is None:
                break
            atom = todo.pop(picked)
            assert isinstance(atom, Atom)
            out[picked] = self._place_atom(atom)
        for i, literal in sorted(todo.items()):  # unconnected atoms, negations, aggregates
            out[i] = self._rest(literal)
        return [out[i] for i in range(len(body))]

    def _level(self, name: str) -> int:
        return self.demand.levels.get(name, OWN)

    def _place_comparisons(self, todo: dict[int, Literal], out: dict[int, Literal]) -> None:
        changed = True
        while changed:
            changed = False
            for i, literal in sorted(todo.items()):
                if isinstance(literal, Comparison) and self._place_comparison(literal):
                    out[i] = todo.pop(i)
                    changed = True

    def _place_comparison(self, literal: Comparison) -> bool:
        """Put a comparison (without aggregates) whose inputs the prefix binds into the
        prefix; a binding `x = t` also binds `x` (module docstring). False if not yet."""
        if any(aggregates_in(t) for t in literal_terms(literal)):
            return False
        b = self.bindings
        left = {v.name for v in term_variables(literal.left)}
        right = {v.name for v in term_variables(literal.right)}
        if left | right <= b.grounded:
            self.prefix.append(literal)
            return True
        if literal.op != "=":
            return False
        for target, source, needs in ((literal.left, literal.right, right),
                                      (literal.right, literal.left, left)):  # fmt: skip
            if isinstance(target, Var) and needs <= b.grounded:
                self.prefix.append(literal)
                b.grounded.add(target.name)
                self.computed.append((target.name, source, needs))
                self._bind_computed()
                return True
        return False

    def _bind_computed(self) -> None:
        """Bind what placed `x = t` bind now (an input of `t` may have become strongly
        bound since, by an atom placed after it)."""
        b = self.bindings
        changed = True
        while changed:
            changed = False
            for name, source, needs in self.computed:
                if name not in b.strong and (isinstance(source, Const) or needs <= b.strong):
                    b.strong.add(name)
                    changed = True
                elif not b.bound(name) and isinstance(source, Var) and source.name in b.weak:
                    b.weak.add(name)
                    changed = True

    def _next_atom(self, todo: Mapping[int, Literal]) -> int | None:
        """The next atom to place: one with a bound argument, cheapest first."""
        best: tuple[bool, int, int] | None = None
        for i, literal in todo.items():
            if not isinstance(literal, Atom) or not self._placeable(literal):
                continue
            bound = sum(_is_bound(t, self.bindings) for t in literal.args)
            specialized = self.demand.derived(literal.name) and self.demand.eligible(literal.name)
            key = (specialized, -bound, i)
            if bound and (best is None or key < best):
                best = key
        return None if best is None else best[2]

    def _placeable(self, atom: Atom) -> bool:
        """Its computed arguments' inputs are bound by the prefix."""
        computed = [t for t in atom.args if not isinstance(t, Var | Const) and term_variables(t)]
        return all({v.name for v in term_variables(t)} <= self.bindings.grounded for t in computed)

    def _place_atom(self, atom: Atom) -> Atom:
        level = self._level(atom.name) if self.aggregated else OWN
        placed = self.demand.ask(atom, self.bindings, self.prefix, level)
        self.prefix.append(placed)
        names = {t.name for t in atom.args if isinstance(t, Var)}
        self.bindings.strong |= names
        self.bindings.grounded |= names
        self._bind_computed()
        return placed

    def _rest(self, literal: Literal) -> Literal:
        """A literal left after placement: an atom with no bound argument (all free),
        a negation, a comparison holding aggregates or not placeable."""
        demand = self.demand
        if isinstance(literal, Atom):
            level = self._level(literal.name) if self.aggregated else OWN
            ad = "f" * len(literal.args)
            return replace(literal, name=demand.read(literal.name, ad, level))
        if isinstance(literal, Negation):
            atom = demand.ask(
                literal.atom, self.bindings, self.prefix, self._level(literal.atom.name)
            )
            return replace(literal, atom=atom)
        if isinstance(literal, Comparison):
            return replace(literal, left=self._term(literal.left), right=self._term(literal.right))
        return literal

    def _term(self, term: Term) -> Term:
        """`term` with the body of each aggregate in it (not inside another) rewritten
        with what is bound around it: its inner magic rules start from this prefix.
        (Iterative through operators: a 400-term sum is 400 levels deep.)"""
        return replace_aggregates(term, self._aggregate)

    def _aggregate(self, term: Aggregate) -> Term:
        inner = Body(self.demand, self.bindings.copy(), list(self.prefix), aggregated=True)
        return replace(term, body=tuple(inner.rewrite(term.body)))


def _is_bound(term: Term, bindings: Bindings) -> bool:
    if isinstance(term, Const):
        return True
    return isinstance(term, Var) and bindings.bound(term.name)
