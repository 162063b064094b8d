"""Walking terms and literals: which variables occur where.

Layer: datalog. Imports only the AST. Aggregates are scopes: the variables of an
aggregate's body that also occur outside it (anywhere else in the rule) group
it; the others are local to it (Soufflé semantics).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import replace

from datalog.lang.ast import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Cast,
    Comparison,
    Disjunction,
    Literal,
    Neg,
    Negation,
    Term,
    Var,
    Wildcard,
)


def subterms(term: Term) -> Iterator[Term]:
    """`term` and its sub-terms, preorder, not entering aggregate bodies or targets.

    Iterative: a chain of 1,000 operators costs 1,000 steps, not a generator per
    level that every value climbs through."""
    pending = [term]
    while pending:
        current = pending.pop()
        yield current
        children = _subterms_of(current)
        if children:
            pending.extend(reversed(children))


def _subterms_of(term: Term) -> tuple[Term, ...]:
    if isinstance(term, BinOp):
        return (term.left, term.right)
    if isinstance(term, Neg):
        return (term.operand,)
    if isinstance(term, Call):
        return term.args
    if isinstance(term, Cast):
        return (term.value,)
    return ()


def term_variables(term: Term) -> list[Var]:
    """Variable occurrences of `term` outside aggregates."""
    return [t for t in subterms(term) if isinstance(t, Var)]


def aggregates_in(term: Term) -> list[Aggregate]:
    """The outermost aggregates inside `term`."""
    return [t for t in subterms(term) if isinstance(t, Aggregate)]


def literal_terms(literal: Literal) -> tuple[Term, ...]:
    """The terms directly in a literal (none for a disjunction)."""
    if isinstance(literal, Atom):
        return literal.args
    if isinstance(literal, Negation):
        return literal.atom.args
    if isinstance(literal, Comparison):
        return (literal.left, literal.right)
    return ()


def literal_variables(literal: Literal) -> list[Var]:
    return [v for term in literal_terms(literal) for v in term_variables(term)]


Occurrences = list[tuple[Var, tuple[int, ...]]]


def occurrences(terms: Sequence[Term], body: Sequence[Literal]) -> Occurrences:
    """Every variable occurrence at any depth, with the ids of enclosing aggregates."""
    found: Occurrences = []
    for term in terms:
        _term_occurrences(term, (), found)
    for literal in body:
        _literal_occurrences(literal, (), found)
    return found


def _term_occurrences(term: Term, scope: tuple[int, ...], found: Occurrences) -> None:
    for sub in subterms(term):
        if isinstance(sub, Var):
            found.append((sub, scope))
        elif isinstance(sub, Aggregate):
            inner = (*scope, id(sub))
            if sub.target is not None:
                _term_occurrences(sub.target, inner, found)
            for literal in sub.body:
                _literal_occurrences(literal, inner, found)


def _literal_occurrences(literal: Literal, scope: tuple[int, ...], found: Occurrences) -> None:
    if isinstance(literal, Disjunction):
        for alternative in literal.alternatives:
            for inner in alternative:
                _literal_occurrences(inner, scope, found)
        return
    for term in literal_terms(literal):
        _term_occurrences(term, scope, found)


def aggregate_groups(terms: Sequence[Term], body: Sequence[Literal]) -> dict[int, frozenset[str]]:
    """For each aggregate (by `id`) of a rule, the variables that group it.

    `terms` are the head's arguments (empty for a query), `body` the rule body.
    """
    by_scope: dict[tuple[int, ...], set[str]] = {}  # the variables of each context
    for var, scope in occurrences(terms, body):
        by_scope.setdefault(scope, set()).add(var.name)
    enclosing: dict[int, tuple[int, ...]] = {}  # aggregate -> the aggregates around it
    for scope in by_scope:
        for depth, agg in enumerate(scope):
            enclosing[agg] = scope[:depth]
    groups: dict[int, frozenset[str]] = {}
    for agg, around in enclosing.items():
        inside: set[str] = set()
        outside: set[str] = set()
        for scope, names in by_scope.items():
            if len(scope) > len(around) and scope[len(around)] == agg:
                inside |= names
            # outside means in a context enclosing the aggregate: the rule itself or an
            # aggregate around it, never a sibling aggregate (whose variables are its own)
            elif scope == around[: len(scope)]:
                outside |= names
        groups[agg] = frozenset(inside & outside)
    for aggregate in _all_aggregates(terms, body):
        groups.setdefault(id(aggregate), frozenset())
    return groups


def nodes(terms: Sequence[Term], body: Sequence[Literal]) -> Iterator[Term | Literal]:
    """Every term and literal at any depth, preorder: into disjunctions, negations,
    aggregates (their targets, then bodies). Iterative, one step per node."""
    pending: list[Term | Literal] = [*reversed(body), *reversed(terms)]
    while pending:
        node = pending.pop()
        yield node
        children = _children(node)
        if children:
            pending.extend(reversed(children))


def _children(node: Term | Literal) -> Sequence[Term | Literal]:
    if isinstance(node, Aggregate):
        return node.body if node.target is None else (node.target, *node.body)
    if isinstance(node, Atom):
        return node.args
    if isinstance(node, Negation):
        return (node.atom,)
    if isinstance(node, Comparison):
        return (node.left, node.right)
    if isinstance(node, Disjunction):
        return [literal for alternative in node.alternatives for literal in alternative]
    return _subterms_of(node)


def _all_aggregates(terms: Sequence[Term], body: Sequence[Literal]) -> Iterator[Aggregate]:
    return (node for node in nodes(terms, body) if isinstance(node, Aggregate))


Groups = Mapping[int, frozenset[str]]  # aggregate id -> the outer variables grouping it


def needed(term: Term, groups: Groups) -> set[str]:
    """The variables `term` needs bound before it has a value (an aggregate needs its
    grouping variables)."""
    found = {var.name for var in term_variables(term)}
    for aggregate in aggregates_in(term):
        found |= groups.get(id(aggregate), frozenset())
    return found


def ready(literal: Literal, bound: Collection[str], groups: Groups) -> bool:
    """Whether `literal` can be evaluated once `bound` are: an atom's and a negation's
    non-variable arguments computable, a comparison fully computable, or `x = term`
    binding its one unbound side."""
    if isinstance(literal, Atom):
        args = [a for a in literal.args if not isinstance(a, Var | Wildcard)]
        return all(needed(a, groups) <= set(bound) for a in args)
    if isinstance(literal, Negation):
        return all(needed(a, groups) <= set(bound) for a in literal.atom.args)
    assert isinstance(literal, Comparison)
    left, right = needed(literal.left, groups), needed(literal.right, groups)
    if left | right <= set(bound):
        return True
    return literal.op == "=" and (
        (isinstance(literal.left, Var) and right <= set(bound))
        or (isinstance(literal.right, Var) and left <= set(bound))
    )


def with_children(term: Term, fn: Callable[[Term], Term]) -> Term:
    """`term` with `fn` applied to each direct subterm (of arithmetic, negation,
    functor calls and casts; other terms have none)."""
    if isinstance(term, BinOp):
        return replace(term, left=fn(term.left), right=fn(term.right))
    if isinstance(term, Neg):
        return replace(term, operand=fn(term.operand))
    if isinstance(term, Call):
        return replace(term, args=tuple(fn(a) for a in term.args))
    if isinstance(term, Cast):
        return replace(term, value=fn(term.value))
    return term


def replace_aggregates(term: Term, fn: Callable[[Aggregate], Term]) -> Term:
    """`term` with each outermost aggregate in it replaced by `fn(aggregate)`, left to
    right; other nodes are kept (the same objects where nothing inside changed).
    Iterative: one step per node however deep the operators nest."""
    return _rebuilt(term, fn, lambda node: node)


def _rebuilt(
    term: Term, at_aggregate: Callable[[Aggregate], Term], at_node: Callable[[Term], Term]
) -> Term:
    """`term` rebuilt bottom-up, left to right, without recursing: an aggregate becomes
    `at_aggregate(aggregate)` (its insides are its business), every other node
    `at_node` of itself over its rebuilt sub-terms (the same object where none changed)."""
    done: list[Term] = []
    pending: list[tuple[Term, bool]] = [(term, False)]
    while pending:
        node, ready = pending.pop()
        if isinstance(node, Aggregate):
            done.append(at_aggregate(node))
            continue
        children = _subterms_of(node)
        if children and not ready:
            pending.append((node, True))
            pending.extend((child, False) for child in reversed(children))
            continue
        if children:
            parts = done[len(done) - len(children) :]
            del done[len(done) - len(children) :]
            if any(new is not old for new, old in zip(parts, children, strict=True)):
                node = _with_subterms(node, parts)
        done.append(at_node(node))
    return done[0]


def map_terms(body: Sequence[Literal], fn: Callable[[Term], Term]) -> tuple[Literal, ...]:
    """`body` with `fn` applied to every term at any depth, innermost first: into
    negations, disjunctions and aggregates (their targets and bodies)."""
    return tuple(_map_literal(literal, fn) for literal in body)


def map_term(term: Term, fn: Callable[[Term], Term]) -> Term:
    """`term` with `fn` applied to it and to each of its sub-terms, innermost first,
    left to right. Iterative through operators, calls and casts (a 400-term sum is
    400 levels deep); an aggregate's target and body recurse, once per aggregate."""

    def at_aggregate(node: Aggregate) -> Term:
        target = None if node.target is None else map_term(node.target, fn)
        return fn(replace(node, target=target, body=map_terms(node.body, fn)))

    return _rebuilt(term, at_aggregate, fn)


def _with_subterms(term: Term, subterms: Sequence[Term]) -> Term:
    """`term` with its direct subterms (in `_subterms_of` order) replaced."""
    if isinstance(term, BinOp):
        return replace(term, left=subterms[0], right=subterms[1])
    if isinstance(term, Neg):
        return replace(term, operand=subterms[0])
    if isinstance(term, Call):
        return replace(term, args=tuple(subterms))
    assert isinstance(term, Cast)
    return replace(term, value=subterms[0])


def _map_literal(literal: Literal, fn: Callable[[Term], Term]) -> Literal:
    if isinstance(literal, Atom):
        return replace(literal, args=tuple(map_term(arg, fn) for arg in literal.args))
    if isinstance(literal, Negation):
        atom = replace(literal.atom, args=tuple(map_term(a, fn) for a in literal.atom.args))
        return replace(literal, atom=atom)
    if isinstance(literal, Comparison):
        return replace(literal, left=map_term(literal.left, fn), right=map_term(literal.right, fn))
    alternatives = tuple(map_terms(alternative, fn) for alternative in literal.alternatives)
    return replace(literal, alternatives=alternatives)
