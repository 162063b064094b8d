"""Pass: aggregate-local variables shadow outer ones, as in Soufflé.

Layer: datalog. A variable inside an aggregate (its target or its body) groups
the aggregate when the rest of the body binds it (a positive atom, or `v = term`
with no aggregate in `term`); otherwise it is local to the aggregate, even if
the same name appears outside. So in

    res(Y) :- Y = min Z + Y : { a(A, Z), a(B, Y), A != B }.
    max_index(a) :- a = max a : recipe(a, _, _, _).

the `Y` and `a` inside the braces are the aggregate's own variables, and the
outer ones are its result. Local variables named like outer ones are renamed
apart (`Y~1`), so every later pass sees one name per variable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import count

from datalog.lang.ast import (
    Aggregate,
    Atom,
    Comparison,
    Literal,
    Negation,
    Term,
    Var,
)
from datalog.lang.passes.variables import nodes, occurrences, term_variables, with_children


def scope_aggregates(body: Sequence[Literal]) -> tuple[Literal, ...]:
    """`body` with each aggregate's local variables renamed apart from outer ones."""
    if not any(isinstance(node, Aggregate) for node in nodes((), body)):
        return tuple(body)
    bound = _bound_outside(body)
    outside = {var.name for var, scope in occurrences((), body) if not scope}
    fresh = count(1)

    def scoped(term: Term) -> Term:
        if isinstance(term, Aggregate):
            inner = {v.name for node in nodes(_target(term), term.body) for v in _vars(node)}
            clashing = (inner - bound) & outside  # local, but named like an outer variable
            local = {name: f"{name}~{next(fresh)}" for name in sorted(clashing)}
            return _renamed(term, local) if local else term
        return with_children(term, scoped)

    return tuple(
        replace(lit, left=scoped(lit.left), right=scoped(lit.right))
        if isinstance(lit, Comparison)
        else lit
        for lit in body
    )


def _bound_outside(body: Sequence[Literal]) -> set[str]:
    """Variables the body binds outside aggregates: positive atoms, `v = term`."""
    bound: set[str] = set()
    for lit in body:
        if isinstance(lit, Atom):
            bound |= {v.name for arg in lit.args for v in term_variables(arg)}
        elif isinstance(lit, Comparison) and lit.op == "=":
            for side, other in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(side, Var) and not _has_aggregate(other):
                    bound.add(side.name)
    return bound


def _has_aggregate(term: Term) -> bool:
    return any(isinstance(node, Aggregate) for node in nodes((term,), ()))


def _target(aggregate: Aggregate) -> tuple[Term, ...]:
    return () if aggregate.target is None else (aggregate.target,)


def _vars(node: Term | Literal) -> list[Var]:
    return [node] if isinstance(node, Var) else []


def _renamed(term: Term, names: dict[str, str]) -> Term:
    """`term` with the variables in `names` renamed, everywhere inside it."""
    if isinstance(term, Var):
        return replace(term, name=names.get(term.name, term.name))
    if isinstance(term, Aggregate):
        target = None if term.target is None else _renamed(term.target, names)
        return replace(term, target=target, body=_renamed_body(term.body, names))
    return with_children(term, lambda sub: _renamed(sub, names))


def _renamed_body(body: Sequence[Literal], names: dict[str, str]) -> tuple[Literal, ...]:
    out: list[Literal] = []
    for lit in body:
        if isinstance(lit, Atom):
            out.append(replace(lit, args=tuple(_renamed(a, names) for a in lit.args)))
        elif isinstance(lit, Negation):
            args = tuple(_renamed(a, names) for a in lit.atom.args)
            out.append(replace(lit, atom=replace(lit.atom, args=args)))
        elif isinstance(lit, Comparison):
            out.append(
                replace(lit, left=_renamed(lit.left, names), right=_renamed(lit.right, names))
            )
        else:
            out.append(lit)
    return tuple(out)
