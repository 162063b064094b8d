"""The type of a term, shared by the checker and both evaluators.

Layer: datalog. Imports the AST and `datalog.functions`. Integer literals are
polymorphic: `1` is a number, an unsigned or a float depending on where it
stands. A term's type is its *fixed* type (from its variables, non-integer
literals and functors) or else the type its context expects, or else `number`.
Evaluators resolve a term top-down with `resolve_type` and evaluate its operands
in the resolved type, exactly as the checker typed them.
"""

from __future__ import annotations

from collections.abc import Mapping

from datalog.ast import Aggregate, BinOp, Call, Cast, ColumnType, Const, Neg, Term, Var
from datalog.functions import FUNCTORS


def fixed_type(term: Term, types: Mapping[str, ColumnType]) -> ColumnType | None:
    """The type `term` has regardless of context, or None if it is polymorphic."""
    if isinstance(term, Var):
        return types.get(term.name)
    if isinstance(term, Const):
        if isinstance(term.value, bool) or not isinstance(term.value, int):
            return term.type
        return None
    if isinstance(term, BinOp):
        return fixed_type(term.left, types) or fixed_type(term.right, types)
    if isinstance(term, Neg):
        return fixed_type(term.operand, types)
    if isinstance(term, Call):
        return _call_type(term, types)
    if isinstance(term, Cast):
        return term.kind
    if isinstance(term, Aggregate):
        return _aggregate_type(term, types)
    return None  # Wildcard


def _call_type(term: Call, types: Mapping[str, ColumnType]) -> ColumnType | None:
    if term.functor is not None:  # user-defined: its declared result
        return term.functor.result
    functor = FUNCTORS.get(term.function)
    if functor is None:
        return None  # an unknown functor (reported by the checker) has no type
    if functor.result is not None:
        return functor.result
    for arg in term.args:
        found = fixed_type(arg, types)
        if found is not None:
            return found
    return None


def _aggregate_type(term: Aggregate, types: Mapping[str, ColumnType]) -> ColumnType | None:
    if term.function == "count":
        return "number"
    if term.function == "mean":
        return "float"
    return None if term.target is None else fixed_type(term.target, types)


def resolve_type(
    term: Term, types: Mapping[str, ColumnType], expected: ColumnType | None = None
) -> ColumnType:
    """The type `term` is evaluated in, where its context expects `expected`."""
    found = fixed_type(term, types)
    if found is not None:
        return found
    if expected is not None and expected != "symbol":
        return expected
    return "number"


def comparison_type(left: Term, right: Term, types: Mapping[str, ColumnType]) -> ColumnType:
    """The type both sides of a comparison are evaluated in."""
    return fixed_type(left, types) or fixed_type(right, types) or "number"
