"""Checking every term against the type its context expects (for `infer_types`).

Layer: datalog. Imports the AST, errors, `datalog.lang.functions` and `term_types`.

A term is checked with an explicit stack, not recursion: a sum of 400 terms is 400
levels deep, and each level took three Python frames. The order of work (and so of
errors at one position) is the recursive one: a term's operands are checked, left
to right, before the term is compared with what its context expects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from datalog.lang.ast import (
    BUILTIN_PREDICATES,
    Aggregate,
    Atom,
    BinOp,
    Call,
    Cast,
    ColumnType,
    Comparison,
    Const,
    Literal,
    Neg,
    Term,
    UserFunctor,
    Var,
    Wildcard,
)
from datalog.lang.errors import TypeMismatchError
from datalog.lang.functions import BITWISE_OPS, FUNCTORS, GENERATORS, castable
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.lift_aggregates import is_lifted
from datalog.lang.passes.term_types import Memo, fixed_type, resolve_type
from datalog.lang.passes.variables import nodes

Types = dict[str, ColumnType]
_RANGES: dict[str, tuple[int, int]] = {"number": (-(2**63), 2**63 - 1), "unsigned": (0, 2**64 - 1)}
_FLOAT_LIMIT = 2**1024 - 2**970  # integers from here round to infinity as floats


class _Check(NamedTuple):
    """Check `term` where its context expects `expected` (`where` says which context)."""

    term: Term
    expected: ColumnType | None
    where: str


class _Compare(NamedTuple):
    """After its operands: compare the type `term` has with the one expected."""

    check: _Check
    actual: ColumnType | None


class _Report(NamedTuple):
    """A mismatch found before the operands were checked, reported after them."""

    message: str
    term: Term | Literal


_Work = _Check | _Compare | _Report


class TermChecker:
    """Checks terms against the types their contexts expect, reporting mismatches."""

    def __init__(self, ctx: CheckContext, types: Types) -> None:
        self.ctx = ctx
        self.types = types
        self.memo: Memo = {}  # `types` is final here

    def mismatch(self, message: str, term: Term | Literal) -> None:
        self.ctx.report(TypeMismatchError, f"type mismatch: {message}", term.span)

    def check_literals(self, literals: Sequence[Literal]) -> None:
        for node in nodes((), literals):
            info = self.ctx.known(node) if isinstance(node, Atom) else None
            if isinstance(node, Atom) and info is not None:
                for index, (arg, column) in enumerate(zip(node.args, info.types, strict=True)):
                    self.check(arg, column, f"column {index + 1} of `{node.name}`")
            elif isinstance(node, Comparison):
                self.check_comparison(node)

    def check_comparison(self, comparison: Comparison) -> None:
        op, left, right = comparison.op, comparison.left, comparison.right
        if op in BUILTIN_PREDICATES:
            self.check(left, "symbol", f"left of `{op}`")
            self.check(right, "symbol", f"right of `{op}`")
            return
        lt, rt = self.fixed(left), self.fixed(right)
        if lt is not None and rt is not None and lt != rt:
            lifted = isinstance(left, Var) and is_lifted(left.name)  # `lift_aggregates`
            message = (
                f"the aggregate gives {rt} where {lt} is expected"
                if lifted
                else f"cannot compare {lt} with {rt} (`{op}`)"
            )
            self.mismatch(message, comparison)
            self.check(left, None, "")
            self.check(right, None, "")
            return
        shared = lt or rt or "number"
        self.check(left, shared, f"comparison `{op}`")
        self.check(right, shared, f"comparison `{op}`")

    def fixed(self, term: Term) -> ColumnType | None:
        return fixed_type(term, self.types, self.memo)

    def resolve(self, term: Term, expected: ColumnType | None = None) -> ColumnType:
        return resolve_type(term, self.types, expected, self.memo)

    def check(self, term: Term, expected: ColumnType | None, where: str) -> None:
        """Check `term` (and its operands) where its context expects `expected`."""
        pending: list[_Work] = [_Check(term, expected, where)]
        while pending:
            work = pending.pop()
            if isinstance(work, _Report):
                self.mismatch(work.message, work.term)
            elif isinstance(work, _Compare):
                self.compare(work.check, work.actual)
            else:
                actual, after = self.actual_type(work.term, work.expected)
                pending.append(_Compare(work, actual))
                pending.extend(reversed(after))

    def compare(self, check: _Check, actual: ColumnType | None) -> None:
        term, expected = check.term, check.expected
        if actual is None or expected is None or actual == expected:
            return
        if isinstance(term, Var):
            message = f"variable `{term.name}` is used as {actual} and as {expected}"
        else:
            message = f"{_describe(term)} is {actual}, expected {expected}"
        self.mismatch(f"{message} ({check.where})", term)

    def actual_type(
        self, term: Term, expected: ColumnType | None
    ) -> tuple[ColumnType | None, list[_Work]]:
        """The type of `term` (None when a mismatch makes it unknown), and the work to
        do before comparing it: its operands' checks, and mismatches found on the way."""
        if isinstance(term, Var):
            return self.types.get(term.name), []
        if isinstance(term, Wildcard):
            return expected, []
        if isinstance(term, Const):
            kind = self.fixed(term) or self.resolve(term, expected)
            self.check_range(term, kind)
            return kind, []
        if isinstance(term, BinOp | Neg):
            return self.arithmetic_type(term, expected)
        if isinstance(term, Call) and term.functor is not None:
            return self.user_call_type(term, term.functor)
        if isinstance(term, Call):
            return self.call_type(term, expected)
        if isinstance(term, Cast):
            return self.cast_type(term)
        return self.aggregate_type(term)

    def check_range(self, term: Const, kind: ColumnType) -> None:
        """An integer literal is a value of the type it stands for, or an error: it
        would wrap around (`99999999999999999999` in a number column) or overflow."""
        value = term.value
        if not isinstance(value, int) or isinstance(value, bool) or kind == "symbol":
            return
        if kind == "float":
            if abs(value) < _FLOAT_LIMIT:
                return
            where = "beyond the largest float"
        else:
            low, high = _RANGES[kind]
            if low <= value <= high:
                return
            where = f"out of range for {kind} ({low} to {high})"
        span = term.span
        written = span.source[span.start : span.end] if span.source else str(value)
        self.ctx.report(TypeMismatchError, f"integer literal {written} is {where}", span)

    def cast_type(self, term: Cast) -> tuple[ColumnType | None, list[_Work]]:
        source = self.resolve(term.value)
        after: list[_Work] = [_Check(term.value, source, "argument of `as`")]
        if term.kind is None:
            return None, after  # an unknown type: reported by resolve_casts
        if not castable(source, term.kind):
            hint = (
                "; use `to_string(x)`"
                if term.kind == "symbol"
                else "; only `as(s, number)`, its `ord`, is defined"
            )
            message = f"`as` cannot convert a {source} to a {term.kind}{hint}"
            return None, [*after, _Report(message, term)]
        return term.kind, after

    def arithmetic_type(
        self, term: BinOp | Neg, expected: ColumnType | None
    ) -> tuple[ColumnType | None, list[_Work]]:
        operands = (term.left, term.right) if isinstance(term, BinOp) else (term.operand,)
        op = term.op if isinstance(term, BinOp) else "-"
        kinds = {self.fixed(operand) for operand in operands}
        if "symbol" in kinds:
            self.mismatch(f"arithmetic `{op}` on a symbol", term)
            return None, []
        if op in BITWISE_OPS and "float" in kinds:
            self.mismatch(f"bitwise `{op}` on a float", term)
            return None, []
        own = self.resolve(term, expected)
        return own, [_Check(operand, own, f"operand of `{op}`") for operand in operands]

    def call_type(
        self, term: Call, expected: ColumnType | None
    ) -> tuple[ColumnType | None, list[_Work]]:
        functor = FUNCTORS.get(term.function)
        if functor is None:
            return None, []  # reported by check_names
        own = self.resolve(term, expected)
        if term.function in GENERATORS and own == "symbol":
            self.mismatch(f"`{term.function}` counts numbers, not symbols", term)
            return None, []
        after: list[_Work] = []
        for index, arg in enumerate(term.args):
            param = functor.param(index) if functor.params is not None else own
            where = f"argument {index + 1} of `{term.function}`"
            if param is None and self.fixed(arg) == "symbol":
                message = f"`{term.function}` takes a number, got a symbol ({where})"
                after.append(_Report(message, arg))
            else:
                after.append(_Check(arg, param, where))
        return functor.result or own, after

    def user_call_type(
        self, term: Call, functor: UserFunctor
    ) -> tuple[ColumnType | None, list[_Work]]:
        if len(term.args) != len(functor.params):
            return None, []  # reported by check_arity
        params = zip(term.args, functor.params, strict=True)
        after: list[_Work] = [
            _Check(arg, param, f"argument {index + 1} of `{term.function}`")
            for index, (arg, param) in enumerate(params)
        ]
        return functor.result, after

    def aggregate_type(self, term: Aggregate) -> tuple[ColumnType | None, list[_Work]]:
        if term.target is None:
            return "number", []
        target = self.resolve(term.target)
        if term.function in ("sum", "mean") and target == "symbol":
            self.mismatch(f"`{term.function}` of a symbol", term.target)
            return None, []
        after: list[_Work] = [_Check(term.target, target, f"target of `{term.function}`")]
        return ("float" if term.function == "mean" else target), after


def _describe(term: Term) -> str:
    if isinstance(term, Const):
        text = f'"{term.value}"' if isinstance(term.value, str) else repr(term.value)
        return f"constant {text}"
    if isinstance(term, Call):
        return f"`{term.function}(...)`"
    if isinstance(term, Aggregate):
        return f"`{term.function}` aggregate"
    return "expression"
