"""The `order_joins` pass for one body: its steps in the order lowering builds them,
over variables only (no stream, no relation size).

Layer: datalog.plan. Imports the language, the plan's values and the lifting and
atom-shape helpers, nothing that builds operators.

The body's literals are applied greedily. The delta query `choose_join` chose, if
any, comes first. Then, whenever a comparison, a negation or an aggregate has all
the variables it needs, it is applied (filters as early as possible); otherwise the
next positive atom (the one sharing most bound variables; the first one to start)
is joined, and its computed arguments (`r(x + 1)`) become fresh variables equated
to them. `x = range(...)` expands each row once per value as soon as its arguments
are bound. An aggregate's body is ordered the same way, from its groups (or, with
none, on its own), when the aggregate's groups are bound. Fresh variables
(`_agg#n`, `_w#n`, `_e#n`, `_g#n`, `_t#n`) are numbered in that order, over the
whole plan, and typed in the body's `types`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import count as counter

from datalog.lang.ast import Atom, Call, ColumnType, Comparison, Literal, Negation, Term, Var
from datalog.lang.errors import UnsupportedError
from datalog.lang.passes.check_generators import generator_binding
from datalog.lang.passes.term_types import resolve_type
from datalog.lang.passes.variables import aggregates_in, term_variables
from datalog.lang.pretty import format_literal
from datalog.lang.schema import Schema
from datalog.plan.atoms import shape_of
from datalog.plan.choose import comparison_vars
from datalog.plan.lifting import Lifted, groups_of, lift_aggregates, name_wildcards
from datalog.plan.plan import (
    Aggregate,
    Antijoin,
    Bind,
    DeltaQuery,
    Filter,
    Generate,
    Join,
    JoinChoice,
    Scan,
    Step,
    Unit,
)

Vars = tuple[str, ...]


class Orderer:
    """Orders the bodies of one plan; `fresh` numbers fresh variables across them."""

    def __init__(self, schema: Schema, fresh: counter) -> None:
        self.schema = schema
        self.fresh = fresh
        self.types: dict[str, ColumnType] = {}
        self.aggregate_results: set[str] = set()

    def top(
        self,
        body: Sequence[Literal],
        choice: JoinChoice,
        types: Mapping[str, ColumnType],
        head: Sequence[Term] = (),
    ) -> tuple[tuple[Step, ...], dict[str, ColumnType]]:
        """A rule's (or a query's) body in order, and its variables' types."""
        self.types, self.aggregate_results = dict(types), set()
        steps, _ = self.body(body, choice, head)
        return _head_kept(steps, head), self.types

    def fresh_var(self, kind: ColumnType, prefix: str = "_v") -> str:
        name = f"{prefix}#{next(self.fresh)}"  # `#`: no variable of a program is named so
        self.types[name] = kind
        return name

    # -- the loop ------------------------------------------------------------------

    def body(
        self,
        body: Sequence[Literal],
        choice: JoinChoice,
        head: Sequence[Term] = (),
        start: Vars | None = None,
    ) -> tuple[tuple[Step, ...], Vars]:
        groups = groups_of(head, body)
        literals, lifted = lift_aggregates(body, groups, self.types, self.fresh_var)
        pending: list[Literal] = list(literals)
        waiting = list(zip(lifted, choice.inner, strict=True))
        # an aggregate's result is computed by its aggregation, never bound by `=`
        self.aggregate_results |= {a.result for a in lifted}
        steps: list[Step] = []
        bound = start
        if bound is None:
            bound = self._delta_query(pending, choice, steps)
        if bound is None and not any(isinstance(x, Atom) for x in pending):
            steps.append(Unit())
            bound = ()
        while True:
            bound = self._apply_ready(bound, pending, waiting, steps)
            atoms = [x for x in pending if isinstance(x, Atom)]
            if not atoms:
                break
            atom = _choose(bound, atoms)
            pending.remove(atom)
            bound, extra = self._join_atom(bound, atom, steps)
            pending.extend(extra)
        if pending or waiting or bound is None:
            raise UnsupportedError("cannot order this body: some literal never gets its variables")
        return tuple(steps), bound

    def _delta_query(
        self, pending: list[Literal], choice: JoinChoice, steps: list[Step]
    ) -> Vars | None:
        """The chosen delta query's step, its literals taken from `pending`."""
        if choice.binary is not None:
            steps.append(choice.binary)
        delta = choice.delta
        if delta is None:
            return None
        atoms = tuple(_atom(pending[i]) for i in delta.atoms)
        negations = tuple(_negated(pending[i]) for i in delta.negations)
        comparisons = tuple(_comparison(pending[i]) for i in delta.comparisons)
        taken = {*delta.atoms, *delta.negations, *(i for i, _ in delta.constants)}
        taken |= set(delta.comparisons)
        constants = tuple(c for _, c in delta.constants)
        shown = [format_literal(pending[i]) for i in (*delta.atoms, *delta.negations)]
        bindings = (*shown, *(c.show() for c in constants))
        steps.append(DeltaQuery(bindings, (), atoms, negations, constants, comparisons))
        for i in sorted(taken, reverse=True):
            del pending[i]
        return tuple(dict.fromkeys(v for a in atoms for v in _names(a)))

    def _apply_ready(
        self,
        bound: Vars | None,
        pending: list[Literal],
        waiting: list[tuple[Lifted, JoinChoice]],
        steps: list[Step],
    ) -> Vars | None:
        progress = True
        while progress and bound is not None:
            progress = False
            for lit in [x for x in pending if not isinstance(x, Atom)]:
                applied = self._apply(bound, lit, steps)
                if applied is not None:
                    bound, progress = applied, True
                    pending.remove(lit)
            for agg, choice in list(waiting):
                if agg.groups <= set(bound):
                    bound, progress = self._aggregate(bound, agg, choice, steps), True
                    waiting.remove((agg, choice))
        return bound

    def _apply(self, bound: Vars, lit: Literal, steps: list[Step]) -> Vars | None:
        if isinstance(lit, Negation):
            if {v.name for v in _atom_vars(lit.atom)} <= set(bound):
                shape = shape_of(lit.atom, self.schema, self.fresh_var)
                steps.append(Antijoin(lit.atom.name, shape.pattern, shape.vars, shape))
                return bound
            return None
        if isinstance(lit, Comparison):
            return self._comparison(bound, lit, steps)
        return None

    # -- atoms -----------------------------------------------------------------------

    def _join_atom(
        self, bound: Vars | None, atom: Atom, steps: list[Step]
    ) -> tuple[Vars, list[Literal]]:
        shape = shape_of(atom, self.schema, self.fresh_var)
        if bound is None:
            steps.append(Scan(atom.name, shape.pattern, shape))
            return shape.vars, list(shape.deferred)
        on = tuple(v for v in bound if v in shape.vars)
        new = tuple(v for v in shape.vars if v not in on)
        steps.append(Join(atom.name, shape.pattern, on, bool(on) and not shape.filtered, shape))
        return (*bound, *new), list(shape.deferred)

    # -- comparisons -----------------------------------------------------------------

    def _comparison(self, bound: Vars, cmp: Comparison, steps: list[Step]) -> Vars | None:
        generated = generator_binding(cmp)
        if generated is not None:
            return self._generate(bound, *generated, steps)
        left = {v.name for v in term_variables(cmp.left)}
        right = {v.name for v in term_variables(cmp.right)}
        if left | right <= set(bound):
            steps.append(Filter(cmp))
            return bound
        if cmp.op != "=":
            return None
        for target, expr, expr_vars in ((cmp.left, cmp.right, right), (cmp.right, cmp.left, left)):
            if (
                isinstance(target, Var)
                and target.name not in bound
                and target.name not in self.aggregate_results
                and expr_vars <= set(bound)
            ):
                return self._bind(bound, target.name, expr, steps)
        return None

    def _bind(self, bound: Vars, name: str, expr: Term, steps: list[Step]) -> Vars:
        self.types[name] = self.types.get(name) or resolve_type(expr, self.types)
        steps.append(Bind(name, expr))
        return (*bound, name)

    def _generate(self, bound: Vars, target: Var, call: Call, steps: list[Step]) -> Vars | None:
        """`x = range(...)` once its arguments are bound (and `x`, if an aggregate's
        result, is computed); `x` bound already: a fresh variable, then a filter."""
        if not {v.name for v in term_variables(call)} <= set(bound):
            return None
        if target.name not in bound and target.name in self.aggregate_results:
            return None
        kind = self.types.get(target.name) or resolve_type(call, self.types)
        fresh = target.name in bound
        name = self.fresh_var(kind, "_g") if fresh else target.name
        self.types[name] = kind
        steps.append(Generate(name, call.function, target.name, call))
        return bound if fresh else (*bound, name)

    # -- aggregates ------------------------------------------------------------------

    def _aggregate(self, bound: Vars, agg: Lifted, choice: JoinChoice, steps: list[Step]) -> Vars:
        keys = tuple(v for v in bound if v in agg.groups)
        body = name_wildcards(agg.term.body, self.schema, self.fresh_var)
        inner, inner_vars = self.body(body, choice, start=keys or None)
        target, term = None, agg.term.target
        if isinstance(term, Var):
            target = term.name
        elif term is not None:
            target = self.fresh_var(resolve_type(term, self.types), "_t")
            bind: list[Step] = []
            self._bind(inner_vars, target, term, bind)
            inner = (*inner, *bind)
        step = Aggregate(agg.term.function, keys, agg.term, agg.result, target, inner)
        steps.append(step)
        return (*bound, agg.result)


def _choose(bound: Vars | None, atoms: list[Atom]) -> Atom:
    """The atom sharing most bound variables (the first one to start)."""
    if bound is None:
        return atoms[0]
    have = set(bound)
    return max(atoms, key=lambda a: len({v.name for v in _atom_vars(a)} & have))


def _atom_vars(atom: Atom) -> list[Var]:
    out: list[Var] = []
    for arg in atom.args:
        out.extend(term_variables(arg))
    return out


def _head_kept(steps: tuple[Step, ...], head: Sequence[Term]) -> tuple[Step, ...]:
    """`steps` with a delta query that ends a rule's body keeping only the variables its
    head reads (ADR 0078); a query's answer (no head) and aggregates keep every one."""
    last = steps[-1] if steps else None
    if not head or not isinstance(last, DeltaQuery) or any(aggregates_in(t) for t in head):
        return steps
    read = {v.name for t in head for v in term_variables(t)}
    keep = tuple(v for v in dict.fromkeys(v for a in last.atoms for v in _names(a)) if v in read)
    return (*steps[:-1], replace(last, keep=keep)) if keep else steps


def _names(atom: Atom) -> Vars:
    return tuple(dict.fromkeys(a.name for a in atom.args if isinstance(a, Var)))


def _atom(lit: Literal) -> Atom:
    assert isinstance(lit, Atom)
    return lit


def _negated(lit: Literal) -> Atom:
    assert isinstance(lit, Negation)
    return lit.atom


def _comparison(lit: Literal) -> Comparison:
    assert isinstance(lit, Comparison)
    return lit


__all__ = ["Orderer", "comparison_vars"]
