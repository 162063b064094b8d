"""Aggregates (`count`, `sum`, `min`, `max`, `mean`) as reduces.

Layer: datalog (planner). Imports `differential` and the datalog language.

Soufflé semantics: the variables of the aggregate's body that also occur
outside it group it; the aggregate ranges over the distinct assignments of all
its body positions (each `_` of a positive atom becomes a fresh variable, so
every assignment has multiplicity one). The body is evaluated only for the
groups the rest of the rule asks for (the distinct group bindings are its
starting point), then reduced per group and joined back. `count` and `sum`
of an empty group are 0; `min`, `max` and `mean` of one do not fire.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from datalog.eval.expressions import DTYPES
from datalog.lang.ast import (
    Aggregate,
    Atom,
    ColumnType,
    Comparison,
    Literal,
    Term,
    Var,
    Wildcard,
)
from datalog.lang.passes.term_types import resolve_type
from datalog.lang.passes.variables import nodes, replace_aggregates
from datalog.plan.binding import Binding, Compiler
from datalog.plan.plan import Aggregate as AggregateStep
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


@dataclass
class Aggregation:
    """One aggregate of a body, lifted out as `result = aggregate`."""

    term: Aggregate
    result: str
    groups: frozenset[str]
    compiler: Compiler

    def apply(self, binding: Binding) -> Binding:
        c = self.compiler
        keys = [v for v in binding.vars if v in self.groups]
        body = tuple(_name_wildcards(lit, c) for lit in self.term.body)
        inner = c.compile(body, start=self._demand(binding, keys))
        kind = c.types[self.result]
        inner, target = self._target(inner)
        order = [
            *keys,
            *([target] if target else []),
            *(v for v in inner.vars if v not in keys and v != target),
        ]
        projected = Binding(project(inner.stream, [inner.index(v) for v in order]), tuple(order))
        if self._reads_multiset():  # raw multiplicities: make the assignments a set first
            projected = c.distinct(projected)
        if self.term.function == "count":  # a sum of multiplicities: the values are not read
            projected = Binding(project(projected.stream, range(len(keys))), tuple(keys))
        arranged = c.arrange(projected, keys)[0]
        reducer, out_kind = REDUCERS[self.term.function], np.dtype(DTYPES[kind])
        reduced = ReduceOp(arranged, reducer, [out_kind], self.term.function).output
        if not keys:
            reduced = project(reduced, [1])
        result = Binding(reduced, (*keys, self.result))
        c.steps.append(AggregateStep(self.term.function, tuple(keys)))
        joined = _join_on(c, binding, result, keys)
        if self.term.function not in ("count", "sum"):
            return joined
        return Binding(
            concat([joined.stream, _zeros(c, binding, result, keys, out_kind)]), joined.vars
        )

    def _demand(self, binding: Binding, keys: list[str]) -> Binding | None:
        """The distinct groups `binding` asks for, where the body starts; none for
        an ungrouped aggregate: its one group is joined back with `binding` anyway,
        and the body is then planned on its own (a worst-case optimal join, not a
        cross product with the demand)."""
        if not keys:
            return None
        stream = project(binding.stream, [binding.index(v) for v in keys])
        return self.compiler.distinct(Binding(stream, tuple(keys)))

    def _reads_multiset(self) -> bool:
        """Whether a positive atom of the body reads a `multiset` input (multiplicities > 1)."""
        schema = self.compiler.sources.schema
        return any(
            isinstance(n, Atom) and schema[n.name].semantics == "multiset"
            for n in nodes((), self.term.body)
        )

    def _target(self, inner: Binding) -> tuple[Binding, str | None]:
        """`inner` with the aggregated value as a variable, and that variable."""
        target = self.term.target
        if target is None:
            return inner, None
        if isinstance(target, Var):
            return inner, target.name
        name = self.compiler.fresh_var(resolve_type(target, self.compiler.types), "_t")
        return self.compiler.bind(inner, name, target), name


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


def lift_aggregates(
    body: Sequence[Literal], groups: Mapping[int, frozenset[str]], compiler: Compiler
) -> tuple[list[Literal], list[Aggregation]]:
    """The body with each aggregate replaced by a fresh variable, and the aggregations."""
    found: list[Aggregation] = []

    def lifted(term: Aggregate) -> Term:
        name = compiler.fresh_var(_aggregate_type(term, compiler.types), "_agg")
        found.append(Aggregation(term, name, groups.get(id(term), frozenset()), compiler))
        return Var(name, term.span)

    def lift(term: Term) -> Term:
        return replace_aggregates(term, lifted)  # iterative: sums nest 400 deep

    out: list[Literal] = []
    for lit in body:
        if isinstance(lit, Comparison):
            out.append(replace(lit, left=lift(lit.left), right=lift(lit.right)))
        else:
            out.append(lit)
    return out, found


def _aggregate_type(term: Aggregate, types: Mapping[str, ColumnType]) -> ColumnType:
    if term.function == "count":
        return "number"
    if term.function == "mean":
        return "float"
    assert term.target is not None
    return resolve_type(term.target, types)


def _name_wildcards(lit: Literal, c: Compiler) -> Literal:
    if not isinstance(lit, Atom):
        return lit
    args = tuple(
        Var(c.fresh_var(c.sources.schema.types(lit.name)[i], "_w"))
        if isinstance(a, Wildcard)
        else a
        for i, a in enumerate(lit.args)
    )
    return replace(lit, args=args)


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
