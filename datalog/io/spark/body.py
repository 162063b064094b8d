"""A rule body as a DataFrame of bindings: one column per bound variable.

Layer: datalog (Spark back end). Imports the AST, the variable walkers and
`datalog.io.spark.columns`; pyspark only inside functions.

Literals are applied one at a time, like `datalog.eval.reference.Solver`: a literal
is ready when every variable it needs is bound (an aggregate needs the
variables that group it). Filters, bindings (`x = term`) and negations are
applied as soon as they are ready; then the next atom, preferring one that
shares a bound variable (an equi-join) over a cross product. Relations are
DataFrames with positional columns `c0, c1, ...`; variables live in fresh
columns `_v<n>` (Spark column names are case-insensitive, variables are not).

- atom: inner join on its bound variables; constants and repeated variables
  filter the relation first; an expression argument is computed on the
  bindings and joined on (NULL, i.e. no value, never matches);
- negation: `left_anti` join (a constant key when nothing is shared);
- aggregate (Soufflé semantics, as the reference): the body is solved from the
  distinct values of its grouping variables, reduced over the DISTINCT
  assignments of its variables (each `_` of an atom is a variable), and joined
  back; `count` and `sum` of an empty group are 0, `min`/`max`/`mean` of one
  drop the binding.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from datalog.io.spark.columns import SPARK_TYPES, Names, compare, evaluate, literal, value
from datalog.lang.ast import (
    BUILTIN_PREDICATES,
    Aggregate,
    Atom,
    ColumnType,
    Comparison,
    Literal,
    Negation,
    Term,
    Var,
    Wildcard,
)
from datalog.lang.errors import UnsupportedError
from datalog.lang.passes.term_types import comparison_type, resolve_type
from datalog.lang.passes.variables import aggregates_in, literal_terms, needed, ready
from datalog.lang.schema import Schema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


class BodySolver:
    """Solves the bodies of one rule against fixed relation DataFrames."""

    def __init__(
        self,
        spark: SparkSession,
        relations: Mapping[str, DataFrame],
        schema: Schema,
        groups: Mapping[int, frozenset[str]],
    ) -> None:
        self.relations = relations
        self.schema = schema
        self.groups = groups
        self.unit = spark.range(1).select()  # one row, no columns
        self.counter = itertools.count()

    def fresh(self) -> str:
        return f"_v{next(self.counter)}"

    # -- bodies --------------------------------------------------------------------

    def solve(
        self,
        body: Sequence[Literal],
        frame: DataFrame,
        names: Names,
        sources: Mapping[int, DataFrame] | None = None,
    ) -> DataFrame:
        """`frame` extended by every literal of `body`; `sources` overrides the
        relation an atom reads (by `id` of the atom: semi-naive deltas)."""
        pending = list(body)
        while pending:
            literal_ = pending.pop(self.choose(pending, names))
            frame = self.apply(literal_, frame, names, sources or {})
        return frame

    def choose(self, pending: Sequence[Literal], names: Names) -> int:
        ready = [i for i, lit in enumerate(pending) if self.ready(lit, names)]
        if not ready:
            raise UnsupportedError("cannot order this body on Spark", pending[0].span)
        bound = names.variables.keys()
        for i in ready:
            if not isinstance(pending[i], Atom):
                return i
        for i in ready:
            atom = pending[i]
            assert isinstance(atom, Atom)
            if any(isinstance(a, Var) and a.name in bound for a in atom.args):
                return i
        return ready[0]

    def needs(self, term: Term) -> set[str]:
        return needed(term, self.groups)

    def ready(self, literal_: Literal, names: Names) -> bool:
        return ready(literal_, names.variables.keys(), self.groups)

    def apply(
        self, literal_: Literal, frame: DataFrame, names: Names, sources: Mapping[int, DataFrame]
    ) -> DataFrame:
        frame = self.materialize(literal_terms(literal_), frame, names)
        if isinstance(literal_, Atom):
            source = sources.get(id(literal_), self.relations[literal_.name])
            return self.join_atom(literal_, source, frame, names)
        if isinstance(literal_, Negation):
            return self.anti_join(literal_.atom, frame, names)
        assert isinstance(literal_, Comparison)
        return self.compare(literal_, frame, names)

    # -- atoms -----------------------------------------------------------------------

    def join_atom(
        self, atom: Atom, relation: DataFrame, frame: DataFrame, names: Names
    ) -> DataFrame:
        keys, projected, temporaries, new = self.project(atom, relation, frame, names, True)
        frame = self.with_columns(frame, temporaries)
        if keys:
            frame = frame.join(projected, on=keys, how="inner")
        elif frame is self.unit:
            frame = projected
        else:
            frame = frame.crossJoin(projected)
        names.variables.update(new)
        return frame.drop(*temporaries) if temporaries else frame

    def anti_join(self, atom: Atom, frame: DataFrame, names: Names) -> DataFrame:
        from pyspark.sql import functions as sf

        relation = self.relations[atom.name]
        keys, projected, temporaries, _ = self.project(atom, relation, frame, names, False)
        frame = self.with_columns(frame, temporaries)
        if not keys:  # nothing shared: any matching row at all removes every binding
            key = self.fresh()
            frame, projected = (
                frame.withColumn(key, sf.lit(1)),
                projected.withColumn(key, sf.lit(1)),
            )
            keys, temporaries = [key], {**temporaries, key: sf.lit(1)}
        frame = frame.join(projected, on=keys, how="left_anti")
        return frame.drop(*temporaries) if temporaries else frame

    def project(
        self, atom: Atom, relation: DataFrame, frame: DataFrame, names: Names, binding: bool
    ) -> tuple[list[str], DataFrame, dict[str, Column], dict[str, str]]:
        """The relation filtered and renamed for a join with `frame`: the join keys,
        the projection, the computed key columns to add to `frame`, new variables."""
        from pyspark.sql import functions as sf

        kinds = self.schema.types(atom.name)
        first: dict[str, str] = {}  # target column -> the relation column bound to it
        temporaries: dict[str, Column] = {}
        new: dict[str, str] = {}
        dropped = False
        for i, (arg, kind) in enumerate(zip(atom.args, kinds, strict=True)):
            column = f"c{i}"
            if isinstance(arg, Wildcard):
                dropped = True
                continue
            if isinstance(arg, Var):
                target = names.variables.get(arg.name) or new.get(arg.name)
                if target is None:
                    if not binding:
                        raise UnsupportedError(f"`{arg.name}` is not bound", arg.span)
                    target = new[arg.name] = self.fresh()
            elif not self.needs(arg) and not aggregates_in(arg):
                relation = relation.where(sf.col(column) == value(arg, names, kind))
                continue
            else:
                target = self.fresh()
                temporaries[target] = value(arg, names, kind)
            if target in first:
                relation = relation.where(sf.col(column) == sf.col(first[target]))
            else:
                first[target] = column
        projected = relation.select(*[sf.col(c).alias(t) for t, c in first.items()])
        if dropped:  # a relation is a set: only dropping a free column makes duplicates
            projected = projected.distinct()
        keys = [t for t in first if t not in new.values()]
        return keys, projected, temporaries, new

    def with_columns(self, frame: DataFrame, columns: Mapping[str, Column]) -> DataFrame:
        return frame.withColumns(dict(columns)) if columns else frame

    # -- comparisons and aggregates -----------------------------------------------------

    def compare(self, comparison: Comparison, frame: DataFrame, names: Names) -> DataFrame:
        from pyspark.sql import functions as sf

        left, right, op = comparison.left, comparison.right, comparison.op
        for side, other in ((left, right), (right, left)):
            if op == "=" and isinstance(side, Var) and side.name not in names.variables:
                target = self.fresh()
                bound = value(other, names, names.types.get(side.name))
                frame = frame.withColumn(target, bound).where(sf.col(target).isNotNull())
                names.variables[side.name] = target
                return frame
        shared: ColumnType = (
            "symbol" if op in BUILTIN_PREDICATES else (comparison_type(left, right, names.types))
        )
        condition = compare(op, value(left, names, shared), value(right, names, shared), left)
        return frame.where(condition)

    def materialize(self, terms: Sequence[Term], frame: DataFrame, names: Names) -> DataFrame:
        """Add a column for every aggregate in `terms` not computed yet."""
        for term in terms:
            for aggregate in aggregates_in(term):
                if id(aggregate) not in names.aggregates:
                    frame = self.aggregate(aggregate, frame, names)
        return frame

    def aggregate(self, term: Aggregate, frame: DataFrame, names: Names) -> DataFrame:
        from pyspark.sql import functions as sf

        group = [names.variables[g] for g in sorted(self.groups.get(id(term), frozenset()))]
        sub = Names(names.types, {g: names.variables[g] for g in self.groups.get(id(term), ())})
        start = frame.select(*group).distinct() if group else self.unit
        inner = self.solve(list(name_wildcards(term.body, self.counter)), start, sub)
        inner = inner.select(*sorted(set(sub.variables.values()))).distinct()
        target, kind = self.reduction(term, sub)
        grouped = inner.groupBy(*group) if group else inner.groupBy()
        result = grouped.agg(target.alias(out := self.fresh()))
        frame = frame.join(result, on=group, how="left") if group else frame.crossJoin(result)
        if term.function in ("count", "sum"):
            frame = frame.withColumn(out, sf.coalesce(sf.col(out), literal(0, kind)))
        else:
            frame = frame.where(sf.col(out).isNotNull())
        names.aggregates[id(term)] = out
        return frame

    def reduction(self, term: Aggregate, sub: Names) -> tuple[Column, ColumnType]:
        from pyspark.sql import functions as sf

        if term.function == "count":
            return sf.count(sf.lit(1)), "number"
        assert term.target is not None
        kind = resolve_type(term.target, sub.types)
        column = evaluate(term.target, sub, kind)
        if term.function == "mean":
            return sf.avg(column.cast("double")), "float"
        reduce = {"sum": sf.sum, "min": sf.min, "max": sf.max}[term.function]
        return reduce(column).cast(SPARK_TYPES[kind]), kind

    # -- heads -------------------------------------------------------------------------

    def head(self, head: Atom, frame: DataFrame, names: Names) -> DataFrame:
        """The head rows (`c0, c1, ...`) of the bindings that have a value, copies
        included (the caller drops them once, for all the rules of a relation)."""
        frame = self.materialize(head.args, frame, names)
        kinds = self.schema.types(head.name)
        columns = [
            value(arg, names, kind).cast(SPARK_TYPES[kind]).alias(f"c{i}")
            for i, (arg, kind) in enumerate(zip(head.args, kinds, strict=True))
        ]
        return frame.select(*columns).dropna()


def name_wildcards(body: Sequence[Literal], counter: Iterator[int]) -> Iterator[Literal]:
    """`_` in a positive atom becomes a fresh variable, so it counts as a position."""
    for literal_ in body:
        if isinstance(literal_, Atom):
            args = tuple(
                Var(f"_#{next(counter)}") if isinstance(a, Wildcard) else a for a in literal_.args
            )
            literal_ = Atom(literal_.name, args, literal_.span)
        yield literal_
