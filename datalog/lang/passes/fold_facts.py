"""Pass: a fact's arguments become constants.

Layer: datalog. Imports the AST, errors, `datalog.lang.functions` and `term_types`. A
fact must be ground, but its arguments may be expressions over constants, as in
Soufflé: `q(1 + 2, cat("a", "b"), as(7, float)).` Each is computed here, with the
scalar semantics every evaluator shares and in the type of its column, so that the
database inserts plain values. A fact with an argument that has no value (`1 / 0`,
`to_number("x")`) holds nothing, as a rule's binding with no value derives nothing
(the reference evaluator agrees). A user functor is bound to Python only when a
query is planned, so a fact calling one is an error at the call: write it as a rule.
"""

from __future__ import annotations

from dataclasses import replace

from datalog.lang import functions
from datalog.lang.ast import BinOp, Call, Cast, ColumnType, Const, Neg, Rule, Term
from datalog.lang.errors import UnsupportedError
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.term_types import resolve_type


class _NoValue(Exception):
    """A term of the fact has no value."""


def fold_facts(ctx: CheckContext) -> None:
    """Runs after `infer_types`: every fact left is well typed."""
    if ctx.errors:
        return  # a fact that is not well typed cannot be computed
    folded = (_folded(ctx, fact) for fact in ctx.facts)
    ctx.facts = [fact for fact in folded if fact is not None]


def _folded(ctx: CheckContext, fact: Rule) -> Rule | None:
    """`fact` with constant arguments; None when one has no value."""
    info = ctx.known(fact.head)
    if info is None or all(isinstance(arg, Const) for arg in fact.head.args):
        return fact
    args = []
    try:
        for arg, kind in zip(fact.head.args, info.types, strict=True):
            args.append(arg if isinstance(arg, Const) else _constant(arg, kind))
    except _NoValue:
        return None
    except UnsupportedError as error:
        ctx.errors.append(error)
        return fact
    return replace(fact, head=replace(fact.head, args=tuple(args)))


def _constant(term: Term, kind: ColumnType) -> Const:
    own = resolve_type(term, {}, kind)
    return Const(_value(term, own), own, term.span)


def _value(term: Term, kind: ColumnType) -> functions.Value:
    if isinstance(term, Const):
        return functions.constant(term.value, kind)
    if isinstance(term, BinOp):
        left, right = _value(term.left, kind), _value(term.right, kind)
        found = functions.arithmetic(term.op, left, right, kind)
    elif isinstance(term, Neg):
        found = functions.negate(_value(term.operand, kind), kind)
    elif isinstance(term, Cast):
        assert term.kind is not None, "a checked cast knows its type"
        source = resolve_type(term.value, {})
        found = functions.convert(_value(term.value, source), source, term.kind)
    elif isinstance(term, Call) and term.functor is None and term.function in functions.FUNCTORS:
        found = _call(term, kind)
    else:
        what = f"the functor `{term.function}`" if isinstance(term, Call) else "this"
        message = (
            f"a fact cannot call {what}: it is computed when a query runs; "
            "write the fact as a rule, like `q(x) :- x = @f(1).`"
        )
        raise UnsupportedError(message, term.span)
    if found is None:
        raise _NoValue
    return found


def _call(term: Call, kind: ColumnType) -> functions.Value | None:
    functor = functions.FUNCTORS[term.function]
    args = []
    for index, arg in enumerate(term.args):
        param = functor.param(index) if functor.params is not None else kind
        args.append(_value(arg, param or resolve_type(arg, {})))
    return functions.call(term.function, args, kind)
