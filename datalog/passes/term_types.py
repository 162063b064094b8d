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

# Fixed types already found, by term id: (how many variables were typed then, the
# type). Variables are only ever added to `types`, never retyped, so an entry holds
# while no variable is added. A memo makes the checker's walk linear in a term
# instead of quadratic in its depth (each operator of a 400-term sum asked for the
# type of everything below it).
Memo = dict[int, tuple[int, ColumnType | None]]


def fixed_type(
    term: Term, types: Mapping[str, ColumnType], memo: Memo | None = None
) -> ColumnType | None:
    """The type `term` has regardless of context, or None if it is polymorphic."""
    if isinstance(term, Var):
        return types.get(term.name)
    if isinstance(term, Const):
        if isinstance(term.value, bool) or not isinstance(term.value, int):
            return term.type
        return None
    if memo is not None:
        known = memo.get(id(term))
        if known is not None and known[0] == len(types):
            return known[1]
    found = _fixed_type(term, types, memo)
    if memo is not None:
        memo[id(term)] = (len(types), found)
    return found


def _fixed_type(
    term: Term, types: Mapping[str, ColumnType], memo: Memo | None
) -> ColumnType | None:
    if isinstance(term, BinOp):
        return fixed_type(term.left, types, memo) or fixed_type(term.right, types, memo)
    if isinstance(term, Neg):
        return fixed_type(term.operand, types, memo)
    if isinstance(term, Call):
        return _call_type(term, types, memo)
    if isinstance(term, Cast):
        return term.kind
    if isinstance(term, Aggregate):
        return _aggregate_type(term, types, memo)
    return None  # Wildcard


def _call_type(term: Call, types: Mapping[str, ColumnType], memo: Memo | None) -> ColumnType | None:
    if term.functor is not None:  # user-defined: its declared result
        return term.functor.result
    functor = FUNCTORS.get(term.function)
    if functor is None:
        return None  # an unknown functor (reported by the checker) has no type
    if functor.result is not None:
        return functor.result
    for arg in term.args:
        found = fixed_type(arg, types, memo)
        if found is not None:
            return found
    return None


def _aggregate_type(
    term: Aggregate, types: Mapping[str, ColumnType], memo: Memo | None
) -> ColumnType | None:
    if term.function == "count":
        return "number"
    if term.function == "mean":
        return "float"
    return None if term.target is None else fixed_type(term.target, types, memo)


def resolve_type(
    term: Term,
    types: Mapping[str, ColumnType],
    expected: ColumnType | None = None,
    memo: Memo | None = None,
) -> ColumnType:
    """The type `term` is evaluated in, where its context expects `expected`."""
    found = fixed_type(term, types, memo)
    if found is not None:
        return found
    if expected is not None and expected != "symbol":
        return expected
    return "number"


def comparison_type(
    left: Term, right: Term, types: Mapping[str, ColumnType], memo: Memo | None = None
) -> ColumnType:
    """The type both sides of a comparison are evaluated in."""
    return fixed_type(left, types, memo) or fixed_type(right, types, memo) or "number"
