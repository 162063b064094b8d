"""Pass: check subsumptive clauses and normalize them (`datalog.lang.subsumption`).

Layer: datalog. A subsumptive clause `r(...) <= r(...) :- cond.` must name one
declared relation on both sides, with that relation's arity; its atoms' arguments
are variables, constants or `_`; its body holds only comparisons (with arithmetic
and builtin functors, not `range`) over the two atoms' variables; the types of its
`as` are resolved here. Every error has the span of
the offending part. A clause without errors becomes a `Dominance` in
`ctx.dominances`.
"""

from __future__ import annotations

from dataclasses import replace

from datalog.lang.ast import Aggregate, Call, Comparison, Const, Literal, Subsumption, Var, Wildcard
from datalog.lang.errors import DatalogSemanticError, UnsupportedError
from datalog.lang.functions import GENERATORS
from datalog.lang.passes.check_arity import check_clause_arity
from datalog.lang.passes.check_names import check_clause_names
from datalog.lang.passes.check_range_restriction import check_clause
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.infer_types import infer_clause_types
from datalog.lang.passes.resolve_casts import cast_body
from datalog.lang.passes.variables import nodes
from datalog.lang.subsumption import normalize


def check_subsumptions(ctx: CheckContext) -> None:
    for written in ctx.program.subsumptions:
        before = len(ctx.errors)
        clause = replace(written, body=cast_body(ctx, written.body))
        literals = (clause.dominated, clause.dominating, *clause.body)
        check_clause_names(ctx, literals)
        check_clause_arity(ctx, literals)
        _check_shape(ctx, clause)
        if len(ctx.errors) > before:
            continue
        check_clause(ctx, None, literals)
        infer_clause_types(ctx, literals)
        info = ctx.known(clause.dominated)
        if len(ctx.errors) == before and info is not None:
            ctx.dominances.append(normalize(clause, info.types))


def _check_shape(ctx: CheckContext, clause: Subsumption) -> None:
    low, high = clause.dominated, clause.dominating
    if low.name != high.name:
        message = (
            f"a subsumptive clause compares two tuples of one relation, "
            f"not `{low.name}` and `{high.name}`"
        )
        ctx.report(DatalogSemanticError, message, high.span)
    decl = ctx.declarations.get(low.name)
    if decl is not None and "eqrel" in decl.qualifiers:
        message = f"subsumption is not supported on the eqrel relation `{low.name}`"
        ctx.report(UnsupportedError, message, clause.span)
    for arg in (*low.args, *high.args):
        if not isinstance(arg, Var | Const | Wildcard):
            message = "the atoms of a subsumptive clause take variables, constants or `_`"
            ctx.report(DatalogSemanticError, message, arg.span)
    for literal in clause.body:
        _check_condition(ctx, literal)


def _check_condition(ctx: CheckContext, literal: Literal) -> None:
    if not isinstance(literal, Comparison):
        message = (
            "the body of a subsumptive clause holds only comparisons over the "
            "variables of its two atoms (no atoms, negations or disjunctions)"
        )
        ctx.report(DatalogSemanticError, message, literal.span)
        return
    for node in nodes((literal.left, literal.right), ()):
        if isinstance(node, Aggregate):
            message = "a subsumptive clause's condition cannot hold an aggregate"
            ctx.report(DatalogSemanticError, message, node.span)
        elif isinstance(node, Call) and node.function.startswith("@"):
            message = "a subsumptive clause's condition cannot call a user-defined functor"
            ctx.report(UnsupportedError, message, node.span)
        elif isinstance(node, Call) and node.function in GENERATORS:
            message = (
                f"a subsumptive clause's condition cannot generate values with `{node.function}`"
            )
            ctx.report(UnsupportedError, message, node.span)
