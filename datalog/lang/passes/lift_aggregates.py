"""Pass: aggregates used as values of atoms are lifted into comparisons.

Layer: datalog. Soufflé lets an aggregate stand wherever a value may: as a head
argument, `B(s, count : { C(s, _) }) :- W(s).`, or as an argument of a body atom,
`C(n) :- D(n), B(n, max p : { A(n, p) }).` (also inside arithmetic there). Each such
aggregate is replaced by a fresh variable bound by `v = aggregate`, added to the
body, so every later pass (grouping, range restriction, types, the planner and
the reference evaluator) sees aggregates only in comparisons, where they were
already supported. The grouping is Soufflé's: the variables of the aggregate body
bound by the rest of the rule group it.

The fresh variables are `~aN` (a name no program can write) and carry the
aggregate's span, so an error about one points at the aggregate. Aggregates in
comparisons stay where they are; aggregates nested in an aggregate's body atoms
are lifted into that aggregate's body.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import count

from datalog.lang.ast import Aggregate, Atom, Comparison, Literal, Negation, Term, Var
from datalog.lang.passes.variables import replace_aggregates

Lifted = list[Comparison]


def lift_aggregates(head: Atom, body: Sequence[Literal]) -> tuple[Atom, tuple[Literal, ...]]:
    """`head :- body` with each aggregate inside an atom's arguments replaced by a
    fresh variable, bound by a comparison appended to the body."""
    fresh = _Fresh()
    lifted: Lifted = []
    new_head = _lift_atom(head, fresh, lifted)
    new_body = _lift_body(body, fresh)
    if not lifted and new_head is head and new_body == tuple(body):
        return head, tuple(body)
    return new_head, (*new_body, *lifted)


def lift_body(body: Sequence[Literal]) -> tuple[Literal, ...]:
    """`body` (of a query) with each aggregate inside an atom's arguments lifted."""
    return _lift_body(body, _Fresh())


def is_lifted(name: str) -> bool:
    """Whether `name` is a variable this pass made for an aggregate."""
    return name.startswith(LIFTED)


LIFTED = "~a"


class _Fresh:
    """Fresh variable names, `~a1`, `~a2`, ... for one rule."""

    def __init__(self) -> None:
        self._numbers = count(1)

    def __call__(self, aggregate: Aggregate) -> Var:
        return Var(f"{LIFTED}{next(self._numbers)}", aggregate.span)


def _lift_body(body: Sequence[Literal], fresh: _Fresh) -> tuple[Literal, ...]:
    out: list[Literal] = []
    lifted: Lifted = []
    for literal in body:
        if isinstance(literal, Atom):
            out.append(_lift_atom(literal, fresh, lifted))
        elif isinstance(literal, Negation):
            out.append(replace(literal, atom=_lift_atom(literal.atom, fresh, lifted)))
        elif isinstance(literal, Comparison):
            left = replace_aggregates(literal.left, _inner(fresh))
            right = replace_aggregates(literal.right, _inner(fresh))
            changed = left is not literal.left or right is not literal.right
            out.append(replace(literal, left=left, right=right) if changed else literal)
        else:
            out.append(literal)  # disjunctions are expanded before this pass
    return (*out, *lifted)


def _lift_atom(atom: Atom, fresh: _Fresh, lifted: Lifted) -> Atom:
    """`atom` with its aggregates replaced by fresh variables; `lifted` gets one
    `variable = aggregate` per aggregate replaced."""

    def lift(aggregate: Aggregate) -> Term:
        var = fresh(aggregate)
        lifted.append(Comparison("=", var, _inner(fresh)(aggregate), aggregate.span))
        return var

    args = tuple(replace_aggregates(arg, lift) for arg in atom.args)
    if all(new is old for new, old in zip(args, atom.args, strict=True)):
        return atom
    return replace(atom, args=args)


def _inner(fresh: _Fresh) -> Callable[[Aggregate], Term]:
    """Lift the aggregates inside an aggregate's own body atoms, into that body."""

    def lift_inside(aggregate: Aggregate) -> Term:
        body = _lift_body(aggregate.body, fresh)
        return aggregate if body == aggregate.body else replace(aggregate, body=body)

    return lift_inside
