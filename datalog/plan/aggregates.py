"""Aggregates (`count`, `sum`, `min`, `max`, `mean`) lowered to reduces.

Layer: datalog (planner). Imports `differential` and the datalog language.

Soufflé semantics: the variables of the aggregate's body that also occur
outside it group it; the aggregate ranges over the distinct assignments of all
its body positions (`datalog.plan.lifting` names each `_` of a positive atom).
The body is evaluated only for the groups the rest of the rule asks for (the
distinct group bindings are its starting point), then reduced per group and
joined back. `count` and `sum` of an empty group are 0; `min`, `max` and `mean`
of one do not fire. `order_joins` ordered the body (`Aggregate.inner`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from datalog.eval.expressions import DTYPES
from datalog.lang.ast import Atom
from datalog.lang.passes.variables import nodes
from datalog.plan.binding import Binding, Compiler
from datalog.plan.plan import Aggregate
from differential.batch import Column, Updates
from differential.dataflow import Stream
from differential.operators.arrange import Owner
from differential.operators.linear import concat, map_updates, project
from differential.operators.reduce import (
    Counts,
    Groups,
    ReduceOp,
    Reducer,
    count,
    maximum,
    minimum,
    sum_values,
)


def aggregate(c: Compiler, binding: Binding, step: Aggregate) -> Binding:
    """`binding` with the aggregate's value per group (`step.result`) joined on."""
    term = step.term
    assert term is not None
    keys = list(step.groups)
    inner = c.compile(step.inner, start=_demand(c, binding, keys))
    target = step.target
    rest = [v for v in inner.vars if v not in keys and v != target]
    order = [*keys, *([target] if target else []), *rest]
    projected = Binding(project(inner.stream, [inner.index(v) for v in order]), tuple(order))
    if _reads_multiset(c, step):  # raw multiplicities: make the assignments a set first
        projected = c.distinct(projected)
    if term.function == "count":  # a sum of multiplicities: the values are not read
        projected = Binding(project(projected.stream, range(len(keys))), tuple(keys))
    arranged = c.arrange(projected, keys)[0]
    reducer, out_kind = REDUCERS[term.function], np.dtype(DTYPES[c.types[step.result]])
    reduced = ReduceOp(arranged, reducer, [out_kind], term.function).output
    if not keys:
        reduced = project(reduced, [1])
    result = Binding(reduced, (*keys, step.result))
    c.steps.append(step)
    joined = _join_on(c, binding, result, keys)
    if term.function not in ("count", "sum"):
        return joined
    zeros = _zeros(c, binding, result, keys, out_kind)
    return Binding(concat([joined.stream, zeros]), joined.vars)


def _demand(c: Compiler, binding: Binding, keys: list[str]) -> Binding | None:
    """The distinct groups `binding` asks for, where the body starts; none for an
    ungrouped aggregate: its one group is joined back with `binding` anyway, and the
    body is then planned on its own (a worst-case optimal join, not a cross product
    with the demand)."""
    if not keys:
        return None
    stream = project(binding.stream, [binding.index(v) for v in keys])
    return c.distinct(Binding(stream, tuple(keys)))


def _reads_multiset(c: Compiler, step: Aggregate) -> bool:
    """Whether a positive atom of the body reads a `multiset` input (multiplicities > 1)."""
    assert step.term is not None
    schema = c.sources.schema
    return any(
        isinstance(n, Atom) and schema[n.name].semantics == "multiset"
        for n in nodes((), step.term.body)
    )


def _join_on(c: Compiler, left: Binding, right: Binding, keys: list[str]) -> Binding:
    from differential.operators.join import JoinOp

    a, a_rest = c.arrange(left, keys)
    b, _ = c.arrange(right, keys)
    layout = [*keys, *a_rest, right.vars[-1]] if keys else ["", *a_rest, right.vars[-1]]
    out = (*left.vars, right.vars[-1])
    join = JoinOp(a, b, [layout.index(v, 0 if keys else 1) for v in out])
    return Binding(join.output, out)


def _zeros(c: Compiler, outer: Binding, result: Binding, keys: list[str], kind: np.dtype) -> Stream:
    """Rows of `outer` whose group has no row in `result`, with the aggregate 0."""
    present = Binding(project(result.stream, list(range(len(keys)))), tuple(keys))
    missing = c.antijoin_binding(outer, present)

    def add_zero(u: Updates) -> Updates:
        return u.with_columns((*u.columns, np.zeros(len(u), dtype=kind)))

    return map_updates(missing.stream, add_zero, (*outer.stream.dtypes, kind))


def _first_column(reducer: Reducer) -> Reducer:
    def reduce(groups: Groups) -> tuple[Owner, Sequence[Column], Counts]:
        owner, cols, mult = reducer(groups)
        return owner, list(cols)[:1], mult

    return reduce


def mean(groups: Groups) -> tuple[Owner, Sequence[Column], Counts]:
    """The mean of the first value column over each group's assignments (a float)."""
    owner, sums, _ = sum_values(
        Groups(groups.owner, (groups.values[0].astype(np.float64),), groups.counts, groups.n_keys)
    )
    _, counts, _ = count(groups)
    return owner, [np.asarray(sums[0]) / np.asarray(counts[0])], np.ones(len(owner), np.int64)


REDUCERS: dict[str, Reducer] = {
    "count": count,
    "sum": _first_column(sum_values),
    "min": _first_column(minimum),
    "max": _first_column(maximum),
    "mean": mean,
}
