"""Variable orders for delta-query pipelines.

Layer: joins. Pure planning over variable names and size estimates.

A pipeline starts from one binding's changes, which bind that binding's
variables. An order is suitable when each next variable can be proposed: it
is equal to a constant, or constrained by at least one binary binding whose
other variable is already bound. Unary bindings may propose too (when their
set is smallest), but never make a variable reachable on their own: that
would be a cross product. Negated bindings never propose.

Among the suitable candidates at each step we take a variable equal to a
constant first (one value per prefix: then it only validates), then the
variable constrained by the most bindings (each one more validates and
prunes), then the one whose smallest constraining relation is smallest (live
arrangement sizes), then the first in body order.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def constraining(
    patterns: Sequence[tuple[str, ...]],
    var: str,
    bound: set[str],
    validators: Collection[int] = (),
) -> list[int]:
    """Binary bindings (not `validators`) containing `var` whose other variable is bound."""
    return [
        j
        for j, vars_ in enumerate(patterns)
        if len(vars_) == 2
        and j not in validators
        and var in vars_
        and (set(vars_) - {var}) <= bound
    ]


def variable_order(
    patterns: Sequence[tuple[str, ...]],
    source: int,
    sizes: Sequence[int],
    constants: Collection[str] = (),
    validators: Collection[int] = (),
) -> list[str] | None:
    """The order in which pipeline `source` binds the remaining variables, or None.

    `constants` are variables equal to a constant; `validators` are bindings
    that never propose (negated ones). Each variable's binders are kept up to
    date as variables are bound, so a step looks only at the candidates (the
    variables next to bound ones) and the bindings of the variable it binds: a
    body of `n` atoms in a chain costs `n` steps, not `n ** 3`.
    """
    bound = set(patterns[source])
    every = [v for j, vars_ in enumerate(patterns) if j not in validators for v in vars_]
    remaining = list(dict.fromkeys(v for v in every if v not in bound))
    position = {var: i for i, var in enumerate(remaining)}
    proposers = _proposers(patterns, source, validators)
    binders: dict[str, set[int]] = {var: set() for var in remaining}
    for var in remaining:
        for j in proposers.get(var, ()):
            if set(patterns[j]) - {var} <= bound:
                binders[var].add(j)
    candidates = {var for var in remaining if binders[var] or var in constants}
    order: list[str] = []
    while len(order) < len(remaining):
        if not candidates:
            return None
        var = min(candidates, key=lambda v: _score(v, binders[v], sizes, constants, position))
        order.append(var)
        bound.add(var)
        candidates.discard(var)
        for j in proposers.get(var, ()):  # its bindings may now bind their other variable
            for other in set(patterns[j]) - bound:
                if set(patterns[j]) - {other} <= bound:
                    binders[other].add(j)
                    candidates.add(other)
    return order


def _proposers(
    patterns: Sequence[tuple[str, ...]], source: int, validators: Collection[int]
) -> dict[str, list[int]]:
    """Variable -> the binary bindings (not the source, not validators) holding it."""
    found: dict[str, list[int]] = {}
    for j, vars_ in enumerate(patterns):
        if len(vars_) == 2 and j != source and j not in validators:
            for var in set(vars_):
                found.setdefault(var, []).append(j)
    return found


def _score(
    var: str,
    binders: set[int],
    sizes: Sequence[int],
    constants: Collection[str],
    position: dict[str, int],
) -> tuple[bool, int, int, int]:
    """Constants first, then the most constraining bindings, the smallest relation,
    body order."""
    smallest = min((sizes[j] for j in binders), default=0)
    return (var not in constants, -len(binders), smallest, position[var])
