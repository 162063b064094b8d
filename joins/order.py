"""Variable orders for delta-query pipelines.

Layer: joins. Pure planning over variable names and size estimates.

A pipeline starts from one binding's changes, which bind that binding's
variables. An order is suitable when each next variable is constrained by at
least one binary binding whose other variable is already bound (so some
extender can propose it). Among the suitable candidates at each step we take
the variable constrained by the most bindings (each one more validates and
prunes), then the one whose smallest constraining relation is smallest (live
arrangement sizes), then the first in body order.
"""

from __future__ import annotations

from collections.abc import Sequence


def constraining(patterns: Sequence[tuple[str, ...]], var: str, bound: set[str]) -> list[int]:
    """Binary bindings containing `var` whose other variable is bound."""
    return [
        j
        for j, vars_ in enumerate(patterns)
        if len(vars_) == 2 and var in vars_ and (set(vars_) - {var}) <= bound
    ]


def variable_order(
    patterns: Sequence[tuple[str, ...]], source: int, sizes: Sequence[int]
) -> list[str] | None:
    """The order in which pipeline `source` binds the remaining variables, or None."""
    bound = set(patterns[source])
    every = [v for vars_ in patterns for v in vars_]
    remaining = list(dict.fromkeys(v for v in every if v not in bound))
    order: list[str] = []
    while remaining:
        scored = []
        for position, var in enumerate(remaining):
            binders = [j for j in constraining(patterns, var, bound) if j != source]
            if binders:
                smallest = min(sizes[j] for j in binders)
                scored.append((-len(binders), smallest, position, var))
        if not scored:
            return None
        var = min(scored)[3]
        order.append(var)
        bound.add(var)
        remaining.remove(var)
    return order
