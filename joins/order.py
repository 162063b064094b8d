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
    that never propose (negated ones).
    """
    bound = set(patterns[source])
    every = [v for j, vars_ in enumerate(patterns) if j not in validators for v in vars_]
    remaining = list(dict.fromkeys(v for v in every if v not in bound))
    order: list[str] = []
    while remaining:
        scored = []
        for position, var in enumerate(remaining):
            binders = [j for j in constraining(patterns, var, bound, validators) if j != source]
            if binders or var in constants:
                smallest = min((sizes[j] for j in binders), default=0)
                scored.append((var not in constants, -len(binders), smallest, position, var))
        if not scored:
            return None
        var = min(scored)[4]
        order.append(var)
        bound.add(var)
        remaining.remove(var)
    return order
