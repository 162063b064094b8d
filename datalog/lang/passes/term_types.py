"""The type of a term, shared by the checker and both evaluators.

Layer: datalog. Imports the AST and `datalog.lang.functions`. Integer literals are
polymorphic: `1` is a number, an unsigned or a float depending on where it
stands. A term's type is its *fixed* type (from its variables, non-integer
literals and functors) or else the type its context expects, or else `number`.
Evaluators resolve a term top-down with `resolve_type` and evaluate its operands
in the resolved type, exactly as the checker typed them.
"""

from __future__ import annotations

from collections.abc import Mapping

from datalog.lang.ast import Aggregate, BinOp, Call, Cast, ColumnType, Const, Neg, Term, Var
from datalog.lang.functions import FUNCTORS

# Fixed types already found, by term id: (how many variables were typed then, the
# type). Variables are only ever added to `types`, never retyped, so an entry holds
# while no variable is added. A memo makes the checker's walk linear in a term
# instead of quadratic in its depth (each operator of a 400-term sum asked for the
# type of everything below it).
Memo = dict[int, tuple[int, ColumnType | None]]


def fixed_type(
    term: Term, types: Mapping[str, ColumnType], memo: Memo | None = None
) -> ColumnType | None:
    """The type `term` has regardless of context, or None if it is polymorphic.

    Children first, with an explicit stack (a 400-term sum is 400 levels deep); each
    composite term's type is kept in `memo` (or a memo of this call)."""
    if not isinstance(term, BinOp | Neg | Call | Aggregate):
        return _leaf_type(term, types)
    found: Memo = memo if memo is not None else {}
    pending: list[tuple[Term, bool]] = [(term, False)]
    while pending:
        node, ready = pending.pop()
        if _known(found, node, types):
            continue
        parts = [p for p in _typed_parts(node) if isinstance(p, BinOp | Neg | Call | Aggregate)]
        missing = [p for p in parts if not _known(found, p, types)]
        if missing and not ready:
            pending.append((node, True))
            pending.extend((part, False) for part in missing)
            continue
        found[id(node)] = (len(types), _combined(node, types, found))
    return found[id(term)][1]


def _known(found: Memo, term: Term, types: Mapping[str, ColumnType]) -> bool:
    entry = found.get(id(term))
    return entry is not None and entry[0] == len(types)


def _leaf_type(term: Term, types: Mapping[str, ColumnType]) -> ColumnType | None:
    if isinstance(term, Var):
        return types.get(term.name)
    if isinstance(term, Const):
        if isinstance(term.value, bool) or not isinstance(term.value, int):
            return term.type
        return None
    if isinstance(term, Cast):
        return term.kind
    return None  # Wildcard


def _typed_parts(term: Term) -> tuple[Term, ...]:
    """The subterms whose types make `term`'s, in the order they are tried."""
    if isinstance(term, BinOp):
        return (term.left, term.right)
    if isinstance(term, Neg):
        return (term.operand,)
    if isinstance(term, Call) and term.functor is None:
        functor = FUNCTORS.get(term.function)
        return term.args if functor is not None and functor.result is None else ()
    if isinstance(term, Aggregate) and term.function not in ("count", "mean"):
        return () if term.target is None else (term.target,)
    return ()


def _combined(term: Term, types: Mapping[str, ColumnType], found: Memo) -> ColumnType | None:
    """`term`'s fixed type, its parts' being known (in `found`, or leaves)."""
    if isinstance(term, Call):
        if term.functor is not None:  # user-defined: its declared result
            return term.functor.result
        functor = FUNCTORS.get(term.function)
        if functor is None:
            return None  # an unknown functor (reported by the checker) has no type
        if functor.result is not None:
            return functor.result
    if isinstance(term, Aggregate) and term.function == "count":
        return "number"
    if isinstance(term, Aggregate) and term.function == "mean":
        return "float"
    for part in _typed_parts(term):
        kind = found[id(part)][1] if id(part) in found else _leaf_type(part, types)
        if kind is not None:
            return kind
    return None


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
