"""The `choose_join` pass's decision for one body: one delta query (a worst-case
optimal join) over which of its literals, or binary joins.

Layer: datalog.plan. Imports the language, the evaluator of closed terms and the
delta query's planning helpers (`joins.pipeline`), nothing that builds operators.

A body qualifies when it has enough positive atoms over one or two distinct
variables (constants, wildcards and repeated variables allowed) that are connected
through their variables: three or more under the `auto` plan, two or more when the
query forces `wcoj`; a body that starts from an aggregate's groups never does (it
is joined to them). The delta query takes

- every negation over its variables (constants and wildcards allowed) as a negated
  binding: it validates, and its relation's changes start a pipeline;
- every `x = c` (a variable equated to a value without variables) as a constant,
  which proposes `x` (count one) or validates it;
- every other comparison over its variables as a predicate.

Everything else in the body (other atoms, aggregates, bindings) is ordered after
it by `order_joins`. The choice is made on the body as `order_joins` will see it
(aggregates lifted, an aggregate's wildcards named) and recorded by position, so
the fresh names `order_joins` gives are its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import count as counter

import numpy as np

from datalog.eval.expressions import DTYPES, evaluate_term
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import (
    Atom,
    BinOp,
    Call,
    Cast,
    ColumnType,
    Comparison,
    Const,
    Literal,
    Neg,
    Negation,
    Term,
    Var,
    Wildcard,
)
from datalog.lang.passes.check_generators import generator_binding
from datalog.lang.passes.term_types import comparison_type
from datalog.lang.passes.variables import nodes, term_variables
from datalog.lang.pretty import format_term
from datalog.lang.schema import Schema
from datalog.plan.lifting import groups_of, lift_aggregates, name_wildcards
from datalog.plan.plan import Binary, DeltaChoice, JoinChoice, JoinPlan
from joins.pipeline import Constant, orderable


class Chooser:
    """Chooses the joins of the bodies of one program under one join plan."""

    def __init__(self, schema: Schema, symbols: SymbolTable, join_plan: JoinPlan) -> None:
        self.schema = schema
        self.symbols = symbols
        self.join_plan = join_plan
        self.names = counter()  # placeholders, never seen outside this pass

    def body(
        self,
        body: Sequence[Literal],
        types: Mapping[str, ColumnType],
        head: Sequence[Term] = (),
        grouped: bool | None = None,
    ) -> JoinChoice:
        """The choice for `body`; for an aggregate's body, `grouped` says whether it
        starts from the aggregate's groups (then it takes no delta query)."""
        scratch = dict(types)

        def placeholder(kind: ColumnType, prefix: str) -> str:
            name = f"{prefix}?{next(self.names)}"
            scratch[name] = kind
            return name

        named = body if grouped is None else name_wildcards(body, self.schema, placeholder)
        groups = groups_of(head, named)
        literals, lifted = lift_aggregates(named, groups, scratch, placeholder)
        delta, binary = None, None
        if not grouped and self.join_plan != "binary":
            delta, binary = self._delta(literals, scratch)
        inner = tuple(self.body(a.term.body, scratch, (), bool(a.groups)) for a in lifted)
        return JoinChoice(delta, binary, inner, tuple(body))

    def _delta(
        self, pending: Sequence[Literal], types: Mapping[str, ColumnType]
    ) -> tuple[DeltaChoice | None, Binary | None]:
        wcoj = self.join_plan == "wcoj"
        atoms = [i for i, lit in enumerate(pending) if isinstance(lit, Atom) and eligible(lit)]
        var_lists = [variables(_atom(pending[i])) for i in atoms]
        if len(atoms) < (2 if wcoj else 3):
            many = len([p for p in pending if isinstance(p, Atom)]) > 1
            return None, Binary("these atoms take no delta query") if wcoj and many else None
        bound = {v for vars_ in var_lists for v in vars_}
        constants = [
            (i, const)
            for i, lit in enumerate(pending)
            if isinstance(lit, Comparison)
            and generator_binding(lit) is None
            and (const := self._constant(lit, bound, types)) is not None
        ]
        fixed = [const.var for _, const in constants]
        no = [False] * len(atoms)
        if any(orderable(var_lists, no, fixed, i) is None for i in range(len(atoms))):
            return None, Binary("the atoms are not connected") if wcoj else None
        negations = [
            i
            for i, lit in enumerate(pending)
            if isinstance(lit, Negation)
            and _negatable(lit.atom, bound)
            and orderable([*var_lists, variables(lit.atom)], [*no, True], fixed, len(atoms))
            is not None
        ]
        taken = {i for i, _ in constants}
        comparisons = [
            i
            for i, lit in enumerate(pending)
            if isinstance(lit, Comparison)
            and generator_binding(lit) is None
            and i not in taken
            and {v.name for v in comparison_vars(lit)} <= bound
        ]
        choice = DeltaChoice(tuple(atoms), tuple(negations), tuple(constants), tuple(comparisons))
        return choice, None

    def _constant(
        self, cmp: Comparison, bound: set[str], types: Mapping[str, ColumnType]
    ) -> Constant | None:
        """`x = value` (either side) for a delta-query variable `x`, the value in `x`'s type."""
        if cmp.op != "=":
            return None
        for var, term in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
            if isinstance(var, Var) and var.name in bound and _closed(term):
                kind = types.get(var.name)
                if kind is None or comparison_type(cmp.left, cmp.right, types) != kind:
                    return None
                values, valid = evaluate_term(term, {}, types, self.symbols, kind, size=1)
                if valid is not None and not valid[0]:
                    return None  # no value (say 1/0): the predicate drops every row
                value = np.asarray(values).astype(DTYPES[kind], copy=False)[0]
                return Constant(var.name, value, format_term(term))
        return None


def eligible(lit: Atom) -> bool:
    """A positive atom over one or two distinct variables (constants, `_` allowed)."""
    if not all(isinstance(a, Var | Const | Wildcard) for a in lit.args):
        return False
    return 1 <= len({a.name for a in lit.args if isinstance(a, Var)}) <= 2


def variables(atom: Atom) -> tuple[str, ...]:
    return tuple(dict.fromkeys(a.name for a in atom.args if isinstance(a, Var)))


def comparison_vars(cmp: Comparison) -> list[Var]:
    return [*term_variables(cmp.left), *term_variables(cmp.right)]


def _atom(lit: Literal) -> Atom:
    assert isinstance(lit, Atom)
    return lit


def _negatable(atom: Atom, bound: set[str]) -> bool:
    """A negated atom over variables of the delta query (constants and `_` allowed)."""
    if not all(isinstance(a, Var | Const | Wildcard) for a in atom.args):
        return False
    names = variables(atom)
    return bool(names) and set(names) <= bound


def _closed(term: Term) -> bool:
    """A term without variables, wildcards or aggregates."""
    return all(isinstance(n, Const | BinOp | Neg | Call | Cast) for n in nodes([term], []))
