"""Pass: infer the type of every variable and check every term against it.

Layer: datalog. A variable takes the type of the first atom column it occupies;
then equalities, functor parameters and arithmetic propagate known types to the
variables they bind, until nothing changes; a variable still untyped (bound only
to integer literals) is a number. Finally every term is checked in its context:
a column, an operand, a functor argument, a comparison (`check_terms`). Integer
literals are polymorphic (see `term_types`) and must fit the type they take.
Records, per normalized rule, the variable types.
"""

from __future__ import annotations

from collections.abc import Sequence

from datalog.lang.ast import (
    BUILTIN_PREDICATES,
    Aggregate,
    Atom,
    BinOp,
    Call,
    ColumnType,
    Comparison,
    Literal,
    Neg,
    Term,
    Var,
)
from datalog.lang.functions import FUNCTORS
from datalog.lang.passes.check_terms import TermChecker, Types
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.term_types import Memo, fixed_type
from datalog.lang.passes.variables import nodes

__all__ = ["TermChecker", "Types", "infer_clause_types", "infer_types"]


def infer_types(ctx: CheckContext) -> None:
    for rule in ctx.rules:
        ctx.variable_types.append(infer_clause_types(ctx, (rule.head, *rule.body)))
    for fact in ctx.facts:
        infer_clause_types(ctx, (fact.head,))


def infer_clause_types(ctx: CheckContext, literals: Sequence[Literal]) -> Types:
    """The variable types of a clause (head atom first, if any), checking every term."""
    types: Types = {}
    for node in nodes((), literals):
        info = ctx.known(node) if isinstance(node, Atom) else None
        if isinstance(node, Atom) and info is not None:
            for arg, column in zip(node.args, info.types, strict=True):
                if isinstance(arg, Var):
                    types.setdefault(arg.name, column)
    memo: Memo = {}
    while _propagate_all(ctx, literals, types, memo):
        pass
    for node in nodes((), literals):
        if isinstance(node, Var):
            types.setdefault(node.name, "number")
    TermChecker(ctx, types).check_literals(literals)
    return types


def _propagate_all(
    ctx: CheckContext, literals: Sequence[Literal], types: Types, memo: Memo
) -> bool:
    before = len(types)
    for node in nodes((), literals):
        info = ctx.known(node) if isinstance(node, Atom) else None
        if isinstance(node, Atom) and info is not None:
            for arg, column in zip(node.args, info.types, strict=True):
                _propagate(arg, column, types, memo)
        elif isinstance(node, Comparison):
            if node.op in BUILTIN_PREDICATES:
                expected: ColumnType | None = "symbol"
            else:
                expected = fixed_type(node.left, types, memo) or fixed_type(node.right, types, memo)
            _propagate(node.left, expected, types, memo)
            _propagate(node.right, expected, types, memo)
    return len(types) > before


def _propagate(term: Term, expected: ColumnType | None, types: Types, memo: Memo) -> None:
    if isinstance(term, Var):
        if expected is not None:
            types.setdefault(term.name, expected)
    elif isinstance(term, BinOp | Neg):
        own = fixed_type(term, types, memo) or expected
        for operand in (term.left, term.right) if isinstance(term, BinOp) else (term.operand,):
            _propagate(operand, own, types, memo)
    elif isinstance(term, Call) and term.functor is not None:
        for arg, kind in zip(term.args, term.functor.params, strict=False):
            _propagate(arg, kind, types, memo)
    elif isinstance(term, Call) and term.function in FUNCTORS:
        functor = FUNCTORS[term.function]
        own = fixed_type(term, types, memo) or expected
        for index, arg in enumerate(term.args):
            param = functor.param(index) if functor.params is not None else own
            _propagate(arg, param, types, memo)
    elif isinstance(term, Aggregate) and term.target is not None and term.function != "mean":
        _propagate(term.target, expected, types, memo)
