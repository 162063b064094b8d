"""Lower one rule body's ordered steps into differential operators.

Layer: datalog (planner). Imports `differential` and the datalog language.

`order_joins` (`datalog.plan.order`) decided the body's steps in order; this walks
them and builds each one, deciding nothing. A `Binding` is a stream whose columns
are the values of some variables. A join arranges both sides by the shared
variables; a base relation's side is the engine's shared arrangement when the atom
needs no filtering. `x = range(...)` expands each row once per value
(`datalog.eval.generators`). Every step built is recorded, in the order built, in
`steps` (`datalog.plan.plan`: the plan `explain` prints).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from datalog.eval.expressions import (
    DTYPES,
    both,
    compile_comparison,
    compile_term,
    evaluate_comparison,
)
from datalog.eval.generators import expand_range
from datalog.eval.row_terms import row_filter, row_map
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import ColumnType, Comparison, Literal, Term, Var
from datalog.lang.system import UNIT
from datalog.plan.aggregates import aggregate
from datalog.plan.atoms import atom_stream
from datalog.plan.binding import Binding
from datalog.plan.plan import (
    Aggregate,
    Antijoin,
    Binary,
    Bind,
    DeltaQuery,
    Filter,
    Generate,
    Join,
    Scan,
    Step,
    Unit,
)
from datalog.plan.sources import Sources
from datalog.plan.wcoj import delta_query
from differential.batch import Updates
from differential.dataflow import Stream
from differential.operators.antijoin import AntijoinOp
from differential.operators.arrange import Arranged, ArrangeOp
from differential.operators.join import JoinOp
from differential.operators.linear import concat, filter_rows, map_updates, project
from differential.operators.reduce import ReduceOp, distinct


class BodyCompiler:
    """Lowers bodies in one scope; `types` gives every variable's column type (the
    fresh variables of `order_joins` included)."""

    def __init__(
        self,
        sources: Sources,
        types: Mapping[str, ColumnType],
        symbols: SymbolTable,
        steps: list[Step],
    ) -> None:
        self.sources = sources
        self.types: dict[str, ColumnType] = dict(types)
        self.symbols = symbols
        self.steps = steps

    # -- the walk ----------------------------------------------------------------

    def compile(self, order: Sequence[Step], start: Binding | None = None) -> Binding:
        """Build `order`'s steps from `start` (none: the first step starts)."""
        binding = start
        for step in order:
            binding = self._lower(binding, step)
        assert binding is not None, "order_joins gives every body a start"
        return binding

    def _lower(self, binding: Binding | None, step: Step) -> Binding | None:
        if isinstance(step, Binary):
            self.steps.append(step)
            return binding
        if isinstance(step, DeltaQuery):
            return delta_query(self, step)
        if isinstance(step, Unit):
            self.steps.append(step)
            return self.unit()
        if isinstance(step, Scan | Join):
            return self.join_atom(binding, step)
        assert binding is not None, f"{step} needs a binding"
        if isinstance(step, Antijoin):
            return self.antijoin(binding, step)
        if isinstance(step, Filter):
            assert step.comparison is not None
            self.steps.append(step)
            return self.filter(binding, step.comparison)
        if isinstance(step, Bind):
            assert step.term is not None
            return self.bind(binding, step.variable, step.term)
        if isinstance(step, Generate):
            return self._generate(binding, step)
        assert isinstance(step, Aggregate), f"no lowering for {step}"
        return aggregate(self, binding, step)

    # -- atoms -------------------------------------------------------------------

    def join_atom(self, binding: Binding | None, step: Scan | Join) -> Binding:
        """Join `binding` with the step's atom (none: scan it)."""
        shape = step.shape
        assert shape is not None
        self.steps.append(step)
        if isinstance(step, Scan):
            stream = atom_stream(step.relation, shape, self)
            return Binding(project(stream, shape.positions), shape.vars)
        assert binding is not None, "a join follows a start"
        shared = list(step.on)
        left, left_rest = self.arrange(binding, shared)
        right_vars = tuple(shared) + tuple(v for v in shape.vars if v not in shared)
        perm = [shape.positions[shape.vars.index(v)] for v in right_vars]
        if not shared:
            stream = atom_stream(step.relation, shape, self)
            right = self._keyed(Binding(project(stream, perm), right_vars))
        elif step.shared:
            right = self.sources.arrangement(step.relation, perm, len(shared))
        else:  # the atom filters the relation: arranged privately
            right = ArrangeOp(project(atom_stream(step.relation, shape, self), perm), len(shared))
        new_vars = [v for v in right_vars if v not in shared]
        layout = [*shared, *left_rest, *new_vars] if shared else ["", *left_rest, *new_vars]
        out_vars = (*binding.vars, *new_vars)
        join = JoinOp(left, right, [layout.index(v, 0 if shared else 1) for v in out_vars])
        return Binding(join.output, out_vars)

    # -- arrangement helpers -----------------------------------------------------

    def arrange(self, binding: Binding, key: Sequence[str]) -> tuple[Arranged, list[str]]:
        """`binding` arranged by the variables `key` (a constant key when empty)."""
        rest = [v for v in binding.vars if v not in key]
        if not key:
            return self._keyed(binding), rest
        order = [binding.index(v) for v in (*key, *rest)]
        return ArrangeOp(project(binding.stream, order), len(key)), rest

    def _keyed(self, binding: Binding) -> Arranged:
        """Arranged under one constant key column (for cross products and global groups)."""
        stream = binding.stream
        dtypes = (np.dtype(np.int64), *stream.dtypes)

        def add_key(u: Updates) -> Updates:
            return u.with_columns((np.zeros(len(u), dtype=np.int64), *u.columns))

        def add_key_row(row: tuple[object, ...]) -> tuple[object, ...]:
            return (0, *row)

        return ArrangeOp(map_updates(stream, add_key, dtypes, rows=add_key_row), 1)

    def unit(self) -> Binding:
        """One row with no variables (the start of a body without positive atoms)."""
        return Binding(project(self.sources.collection(UNIT), []), ())

    def distinct(self, binding: Binding) -> Binding:
        if not binding.vars:
            keyed = self._keyed(binding)
            reduced = ReduceOp(keyed, distinct, [], "distinct")
            return Binding(project(reduced.output, []), ())
        arranged = ArrangeOp(binding.stream, len(binding.vars))
        return Binding(ReduceOp(arranged, distinct, [], "distinct").output, binding.vars)

    # -- negation ----------------------------------------------------------------

    def antijoin(self, binding: Binding, step: Antijoin) -> Binding:
        """Rows of `binding` with no matching tuple in the atom (stratified negation)."""
        shape = step.shape
        assert shape is not None
        self.steps.append(step)
        stream = atom_stream(step.relation, shape, self)
        negated = Binding(project(stream, shape.positions), shape.vars)
        if not shape.deferred:
            return self.antijoin_binding(binding, negated)
        return self._antijoin_computed(binding, negated, shape.deferred)

    def _antijoin_computed(
        self, binding: Binding, negated: Binding, deferred: Sequence[Literal]
    ) -> Binding:
        """`!r(x + 1, y)`: the arguments are computed on `binding`'s rows first. A row
        where one has no value (say `x / 0`) matches no tuple: the negation holds."""
        pairs = [
            (cmp.left.name, cmp.right)
            for cmp in deferred
            if isinstance(cmp, Comparison) and isinstance(cmp.left, Var)
        ]
        names, terms = [name for name, _ in pairs], [term for _, term in pairs]
        computes = [
            self.evaluator(binding.vars, term, self.types[name])
            for name, term in zip(names, terms, strict=True)
        ]

        def with_values(u: Updates) -> Updates:
            columns, ok = _evaluate_all(computes, u)
            extended = u.with_columns((*u.columns, *columns))
            return extended if ok is None else extended.select(ok)

        def without_values(u: Updates) -> Updates:
            ok = _evaluate_all(computes, u)[1]
            return u.take(np.zeros(0, dtype=np.intp)) if ok is None else u.take(~ok)

        dtypes = (*binding.stream.dtypes, *(np.dtype(DTYPES[self.types[n]]) for n in names))
        extended = Binding(
            map_updates(binding.stream, with_values, dtypes), (*binding.vars, *names)
        )
        kept = self.antijoin_binding(extended, negated)
        back = project(kept.stream, [kept.vars.index(v) for v in binding.vars])
        valueless = map_updates(binding.stream, without_values, binding.stream.dtypes)
        return Binding(concat([back, valueless]), binding.vars)

    def antijoin_binding(self, binding: Binding, negated: Binding) -> Binding:
        """Rows of `binding` whose `negated.vars` values are not a row of `negated`."""
        present = self.distinct(negated)
        key = list(negated.vars)
        left, left_rest = self.arrange(binding, key)
        right, _ = self.arrange(present, key)
        layout = [*key, *left_rest] if key else ["", *left_rest]
        proj = [layout.index(v, 0 if key else 1) for v in binding.vars]
        return Binding(AntijoinOp(left, right, proj).output, binding.vars)

    # -- comparisons and expressions ---------------------------------------------

    def _generate(self, binding: Binding, step: Generate) -> Binding:
        """`x = range(...)`: each row once per value, with `x` bound to it (`x` bound
        already: the rows whose `x` is one of the values). Linear, so a retracted row
        retracts its values."""
        call, name = step.call, step.variable
        assert call is not None
        kind = self.types[name]
        computes = [self.evaluator(binding.vars, arg, kind) for arg in call.args]

        def expand(u: Updates) -> Updates:
            columns, ok = _evaluate_all(computes, u)
            rows, values = expand_range(columns, kind, ok)
            out = u.take(rows)
            return out.with_columns((*out.columns, values))

        dtypes = (*binding.stream.dtypes, np.dtype(DTYPES[kind]))
        self.steps.append(step)
        extended = Binding(map_updates(binding.stream, expand, dtypes), (*binding.vars, name))
        if name == step.target:
            return extended
        kept = self.filter(extended, Comparison("=", Var(step.target), Var(name)))
        return Binding(project(kept.stream, range(len(binding.vars))), binding.vars)

    def filter(self, binding: Binding, cmp: Comparison) -> Binding:
        if not binding.vars:
            return self._filter_unit(binding, cmp)
        holds = compile_comparison(cmp, binding.vars, self.types, self.symbols)

        def mask(cols: tuple[np.ndarray, ...]) -> np.ndarray:
            return holds(cols, len(cols[0]))

        rows = row_filter(cmp, binding.vars, self.types)
        return Binding(filter_rows(binding.stream, mask, rows), binding.vars)

    def _filter_unit(self, binding: Binding, cmp: Comparison) -> Binding:
        types, symbols = self.types, self.symbols

        def keep(u: Updates) -> Updates:
            return u.take(evaluate_comparison(cmp, {}, types, symbols, size=len(u)))

        return Binding(map_updates(binding.stream, keep, binding.stream.dtypes), binding.vars)

    def bind(self, binding: Binding, name: str, expr: Term) -> Binding:
        """Add variable `name` with the value of `expr` (rows without a value drop)."""
        kind = self.types[name]
        compute = self.evaluator(binding.vars, expr, kind)

        def extend(u: Updates) -> Updates:
            values, valid = compute(u)
            out = u.with_columns((*u.columns, values))
            return out if valid is None else out.select(valid)

        rows = row_map([expr], [kind], binding.vars, self.types, keep=True)
        dtypes = (*binding.stream.dtypes, np.dtype(DTYPES[kind]))
        self.steps.append(Bind(name))
        stream = map_updates(binding.stream, extend, dtypes, rows=rows)
        return Binding(stream, (*binding.vars, name))

    def evaluator(
        self, names: Sequence[str], expr: Term, kind: ColumnType
    ) -> Callable[[Updates], tuple[np.ndarray, np.ndarray | None]]:
        evaluate = compile_term(expr, names, self.types, self.symbols, kind)
        dtype = DTYPES[kind]

        def compute(u: Updates) -> tuple[np.ndarray, np.ndarray | None]:
            values, valid = evaluate(u.columns, len(u))
            values = np.asarray(values)
            return (values if values.dtype == dtype else values.astype(dtype)), valid

        return compute

    # -- heads -------------------------------------------------------------------

    def head(self, binding: Binding, args: Sequence[Term], kinds: Sequence[ColumnType]) -> Stream:
        """The head tuples `args` computed from `binding` (typed as the relation's columns).
        Variables already of their column's type are picked, not evaluated."""
        picked = self._picked(binding, args, kinds)
        if picked is not None:
            return project(binding.stream, picked)
        computes = [self.evaluator(binding.vars, a, k) for a, k in zip(args, kinds, strict=True)]

        def build(u: Updates) -> Updates:
            cols, valid = _evaluate_all(computes, u)
            out = u.with_columns(tuple(cols))
            return out if valid is None else out.select(valid)

        dtypes = [np.dtype(DTYPES[k]) for k in kinds]
        rows = row_map(args, kinds, binding.vars, self.types, keep=False)
        return map_updates(binding.stream, build, dtypes, rows=rows)

    def _picked(
        self, binding: Binding, args: Sequence[Term], kinds: Sequence[ColumnType]
    ) -> list[int] | None:
        """The binding's columns that are the head, when every argument is a variable
        whose values already have the head column's type and dtype."""
        picked = []
        for arg, kind in zip(args, kinds, strict=True):
            if not isinstance(arg, Var) or self.types.get(arg.name) != kind:
                return None
            at = binding.vars.index(arg.name)
            if binding.stream.dtypes[at] != np.dtype(DTYPES[kind]):
                return None
            picked.append(at)
        return picked


Compute = Callable[[Updates], tuple[np.ndarray, np.ndarray | None]]


def _evaluate_all(
    computes: Sequence[Compute], u: Updates
) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Each expression's column, and the rows where every one has a value (None: all)."""
    columns: list[np.ndarray] = []
    ok: np.ndarray | None = None
    for compute in computes:
        values, valid = compute(u)
        columns.append(values)
        ok = both(ok, valid)
    return columns, ok
