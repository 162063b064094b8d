"""Compile one rule body into differential operators (join-at-a-time).

Layer: datalog (planner). Imports `differential` and the datalog language.

A `Binding` is a stream whose columns are the values of some variables. The
body's literals are applied greedily: whenever a comparison, a negation or an
aggregate has all the variables it needs, it is applied (filters as early as
possible); otherwise the next positive atom (the one sharing most bound
variables) is joined. Joins arrange both sides by the shared variables; a base
relation's side is the engine's shared arrangement when the atom needs no
filtering. `x = range(...)` expands each row once per value (`datalog.eval.generators`)
as soon as its arguments are bound. Every step is recorded in `steps`
(`datalog.plan.plan`: the plan `explain` prints).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import count as counter

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
from datalog.lang.ast import (
    Atom,
    Call,
    ColumnType,
    Comparison,
    Literal,
    Negation,
    Term,
    Var,
)
from datalog.lang.errors import UnsupportedError
from datalog.lang.passes.check_generators import generator_binding
from datalog.lang.passes.term_types import resolve_type
from datalog.lang.passes.variables import aggregate_groups, term_variables
from datalog.plan.aggregates import Aggregation, lift_aggregates
from datalog.plan.atoms import AtomView
from datalog.plan.binding import Binding
from datalog.plan.plan import Antijoin, Bind, Filter, Generate, Join, JoinPlan, Scan, Step
from datalog.plan.sources import Sources
from datalog.plan.wcoj import delta_query
from differential.batch import Updates
from differential.dataflow import Stream
from differential.operators.arrange import Arranged, ArrangeOp
from differential.operators.join import JoinOp
from differential.operators.linear import concat, filter_rows, map_updates, negate, project
from differential.operators.reduce import ReduceOp, distinct


class BodyCompiler:
    """Compiles bodies in one scope; `types` gives every variable's column type."""

    def __init__(
        self,
        sources: Sources,
        types: Mapping[str, ColumnType],
        symbols: SymbolTable,
        steps: list[Step],
        fresh: counter | None = None,
        join_plan: JoinPlan = "auto",
    ) -> None:
        self.join_plan = join_plan
        self.aggregate_results: set[str] = set()
        self.sources = sources
        self.types: dict[str, ColumnType] = dict(types)
        self.symbols = symbols
        self.steps = steps
        self.fresh = fresh or counter()

    # -- the driver --------------------------------------------------------------

    def compile(
        self, body: Sequence[Literal], head: Sequence[Term] = (), start: Binding | None = None
    ) -> Binding:
        groups = aggregate_groups(head, body)
        literals, aggregations = lift_aggregates(body, groups, self)
        pending: list[Literal] = list(literals)
        waiting: list[Aggregation] = list(aggregations)
        # an aggregate's result is computed by its aggregation, never bound by `=`
        self.aggregate_results |= {a.result for a in aggregations}
        binding = start
        if binding is None and self.join_plan != "binary":
            binding = delta_query(self, pending)
        if binding is None and not any(isinstance(x, Atom) for x in pending):
            binding = self.unit()
        while True:
            binding = self._apply_ready(binding, pending, waiting)
            atoms = [x for x in pending if isinstance(x, Atom)]
            if not atoms:
                break
            atom = self._choose(binding, atoms)
            pending.remove(atom)
            binding, extra = self.join_atom(binding, atom)
            pending.extend(extra)
        if pending or waiting or binding is None:
            raise UnsupportedError("cannot order this body: some literal never gets its variables")
        return binding

    def _apply_ready(
        self, binding: Binding | None, pending: list[Literal], waiting: list[Aggregation]
    ) -> Binding | None:
        progress = True
        while progress and binding is not None:
            progress = False
            for lit in [x for x in pending if not isinstance(x, Atom)]:
                applied = self._apply(binding, lit)
                if applied is not None:
                    binding, progress = applied, True
                    pending.remove(lit)
            for agg in list(waiting):
                if agg.groups <= set(binding.vars):
                    binding, progress = agg.apply(binding), True
                    waiting.remove(agg)
        return binding

    def _choose(self, binding: Binding | None, atoms: list[Atom]) -> Atom:
        if binding is None:
            return atoms[0]
        bound = set(binding.vars)
        return max(atoms, key=lambda a: len({v.name for v in _atom_vars(a)} & bound))

    def _apply(self, binding: Binding, lit: Literal) -> Binding | None:
        bound = set(binding.vars)
        if isinstance(lit, Negation):
            if {v.name for v in _atom_vars(lit.atom)} <= bound:
                return self.antijoin(binding, lit.atom)
            return None
        if isinstance(lit, Comparison):
            return self._comparison(binding, lit, bound)
        return None

    # -- atoms -------------------------------------------------------------------

    def join_atom(self, binding: Binding | None, atom: Atom) -> tuple[Binding, list[Literal]]:
        """Join `binding` with `atom`; returns the binding and deferred literals."""
        view = self._atom_view(atom)
        if binding is None:
            self.steps.append(Scan(atom.name, view.describe()))
            return Binding(project(view.stream(), view.positions), view.vars), view.deferred
        shared = [v for v in binding.vars if v in view.vars]
        left, left_rest = self.arrange(binding, shared)
        right_vars = tuple(shared) + tuple(v for v in view.vars if v not in shared)
        perm = [view.positions[view.vars.index(v)] for v in right_vars]
        if not shared:
            right = self._keyed(Binding(project(view.stream(), perm), right_vars))
        elif view.filtered:
            right = ArrangeOp(project(view.stream(), perm), len(shared))
        else:
            right = self.sources.arrangement(atom.name, perm, len(shared))
        new_vars = [v for v in right_vars if v not in shared]
        layout = [*shared, *left_rest, *new_vars] if shared else ["", *left_rest, *new_vars]
        out_vars = (*binding.vars, *new_vars)
        join = JoinOp(left, right, [layout.index(v, 0 if shared else 1) for v in out_vars])
        on, mine = tuple(shared), bool(shared) and not view.filtered
        self.steps.append(Join(atom.name, view.describe(), on, mine))
        return Binding(join.output, out_vars), view.deferred

    def _atom_view(self, atom: Atom) -> AtomView:
        return AtomView.of(atom, self)

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

    def antijoin(self, binding: Binding, atom: Atom) -> Binding:
        """Rows of `binding` with no matching tuple in `atom` (stratified negation)."""
        view = self._atom_view(atom)
        self.steps.append(Antijoin(atom.name, view.describe(), view.vars))
        negated = Binding(project(view.stream(), view.positions), view.vars)
        if not view.deferred:
            return self.antijoin_binding(binding, negated)
        return self._antijoin_computed(binding, negated, view.deferred)

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
        matched = JoinOp(left, right, proj).output
        return Binding(concat([binding.stream, negate(matched)]), binding.vars)

    # -- comparisons and expressions ---------------------------------------------

    def _comparison(self, binding: Binding, cmp: Comparison, bound: set[str]) -> Binding | None:
        generated = generator_binding(cmp)
        if generated is not None:
            return self._generate(binding, *generated, bound)
        left_vars = {v.name for v in term_variables(cmp.left)}
        right_vars = {v.name for v in term_variables(cmp.right)}
        if left_vars | right_vars <= bound:
            self.steps.append(Filter())
            return self.filter(binding, cmp)
        if cmp.op != "=":
            return None
        for target, expr, expr_vars in (
            (cmp.left, cmp.right, right_vars),
            (cmp.right, cmp.left, left_vars),
        ):
            if (
                isinstance(target, Var)
                and target.name not in bound
                and target.name not in self.aggregate_results
                and expr_vars <= bound
            ):
                return self.bind(binding, target.name, expr)
        return None

    def _generate(
        self, binding: Binding, target: Var, call: Call, bound: set[str]
    ) -> Binding | None:
        """`x = range(...)`: each row once per value, with `x` bound to it (`x` bound
        already: the rows whose `x` is one of the values). Linear, so a retracted row
        retracts its values."""
        if not {v.name for v in term_variables(call)} <= bound:
            return None
        waits = target.name not in bound and target.name in self.aggregate_results
        if waits:  # `x` is an aggregate's result: generate once it is computed
            return None
        kind = self.types.get(target.name) or resolve_type(call, self.types)
        fresh = target.name in bound
        name = self.fresh_var(kind, "_g") if fresh else target.name
        self.types[name] = kind
        computes = [self.evaluator(binding.vars, arg, kind) for arg in call.args]

        def expand(u: Updates) -> Updates:
            columns, ok = _evaluate_all(computes, u)
            rows, values = expand_range(columns, kind, ok)
            out = u.take(rows)
            return out.with_columns((*out.columns, values))

        dtypes = (*binding.stream.dtypes, np.dtype(DTYPES[kind]))
        self.steps.append(Generate(name, call.function))
        extended = Binding(map_updates(binding.stream, expand, dtypes), (*binding.vars, name))
        if not fresh:
            return extended
        kept = self.filter(extended, Comparison("=", target, Var(name)))
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
        kind = self.types.get(name) or resolve_type(expr, self.types)
        self.types[name] = kind
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

    def fresh_var(self, kind: ColumnType, prefix: str = "_v") -> str:
        name = f"{prefix}#{next(self.fresh)}"  # `#`: no variable of a program is named so
        self.types[name] = kind
        return name

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


UNIT = "__unit__"
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


def _atom_vars(atom: Atom) -> list[Var]:
    out: list[Var] = []
    for arg in atom.args:
        out.extend(term_variables(arg))
    return out
