"""Pass: infer the type of every variable and check every term against it.

Layer: datalog. A variable takes the type of the first atom column it occupies;
then equalities, functor parameters and arithmetic propagate known types to the
variables they bind, until nothing changes; a variable still untyped (bound only
to integer literals) is a number. Finally every term is checked in its context:
a column, an operand, a functor argument, a comparison. Integer literals are
polymorphic (see `term_types`). Records, per normalized rule, the variable types.
"""

from __future__ import annotations

from collections.abc import Sequence

from datalog.ast import (
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
from datalog.errors import TypeMismatchError
from datalog.functions import BITWISE_OPS, FUNCTORS, GENERATORS, castable
from datalog.passes.context import CheckContext
from datalog.passes.term_types import Memo, fixed_type, resolve_type
from datalog.passes.variables import nodes

Types = dict[str, ColumnType]
_RANGES: dict[str, tuple[int, int]] = {"number": (-(2**63), 2**63 - 1), "unsigned": (0, 2**64 - 1)}
_FLOAT_LIMIT = 2**1024 - 2**970  # integers from here round to infinity as floats


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
        lt, rt = fixed_type(left, self.types, self.memo), fixed_type(right, self.types, self.memo)
        if lt is not None and rt is not None and lt != rt:
            self.mismatch(f"cannot compare {lt} with {rt} (`{op}`)", comparison)
            self.check(left, None, "")
            self.check(right, None, "")
            return
        shared = lt or rt or "number"
        self.check(left, shared, f"comparison `{op}`")
        self.check(right, shared, f"comparison `{op}`")

    def check(self, term: Term, expected: ColumnType | None, where: str) -> None:
        """Check `term` (and its operands) where its context expects `expected`."""
        actual = self.actual_type(term, expected)
        if actual is None or expected is None or actual == expected:
            return
        if isinstance(term, Var):
            message = f"variable `{term.name}` is used as {actual} and as {expected}"
        else:
            message = f"{_describe(term)} is {actual}, expected {expected}"
        self.mismatch(f"{message} ({where})", term)

    def actual_type(self, term: Term, expected: ColumnType | None) -> ColumnType | None:
        """The type of `term`, after checking its operands; None when already reported."""
        if isinstance(term, Var):
            return self.types.get(term.name)
        if isinstance(term, Wildcard):
            return expected
        if isinstance(term, Const):
            kind = fixed_type(term, self.types, self.memo) or resolve_type(
                term, self.types, expected
            )
            self.check_range(term, kind)
            return kind
        if isinstance(term, BinOp | Neg):
            return self.arithmetic_type(term, expected)
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

    def cast_type(self, term: Cast) -> ColumnType | None:
        source = resolve_type(term.value, self.types, None, self.memo)
        self.check(term.value, source, "argument of `as`")
        if term.kind is None:
            return None  # an unknown type: reported by resolve_casts
        if not castable(source, term.kind):
            hint = (
                "; use `to_string(x)`"
                if term.kind == "symbol"
                else "; only `as(s, number)`, its `ord`, is defined"
            )
            self.mismatch(f"`as` cannot convert a {source} to a {term.kind}{hint}", term)
            return None
        return term.kind

    def arithmetic_type(self, term: BinOp | Neg, expected: ColumnType | None) -> ColumnType | None:
        operands = (term.left, term.right) if isinstance(term, BinOp) else (term.operand,)
        op = term.op if isinstance(term, BinOp) else "-"
        kinds = {fixed_type(operand, self.types, self.memo) for operand in operands}
        if "symbol" in kinds:
            self.mismatch(f"arithmetic `{op}` on a symbol", term)
            return None
        if op in BITWISE_OPS and "float" in kinds:
            self.mismatch(f"bitwise `{op}` on a float", term)
            return None
        own = resolve_type(term, self.types, expected, self.memo)
        for operand in operands:
            self.check(operand, own, f"operand of `{op}`")
        return own

    def call_type(self, term: Call, expected: ColumnType | None) -> ColumnType | None:
        if term.functor is not None:
            return self.user_call_type(term, term.functor)
        functor = FUNCTORS.get(term.function)
        if functor is None:
            return None  # reported by check_names
        own = resolve_type(term, self.types, expected, self.memo)
        if term.function in GENERATORS and own == "symbol":
            self.mismatch(f"`{term.function}` counts numbers, not symbols", term)
            return None
        for index, arg in enumerate(term.args):
            param = functor.param(index) if functor.params is not None else own
            where = f"argument {index + 1} of `{term.function}`"
            if param is None and fixed_type(arg, self.types, self.memo) == "symbol":
                self.mismatch(f"`{term.function}` takes a number, got a symbol ({where})", arg)
            else:
                self.check(arg, param, where)
        return functor.result or own

    def user_call_type(self, term: Call, functor: UserFunctor) -> ColumnType | None:
        if len(term.args) != len(functor.params):
            return None  # reported by check_arity
        for index, (arg, param) in enumerate(zip(term.args, functor.params, strict=True)):
            self.check(arg, param, f"argument {index + 1} of `{term.function}`")
        return functor.result

    def aggregate_type(self, term: Aggregate) -> ColumnType | None:
        if term.target is None:
            return "number"
        target = resolve_type(term.target, self.types, None, self.memo)
        if term.function in ("sum", "mean") and target == "symbol":
            self.mismatch(f"`{term.function}` of a symbol", term.target)
            return None
        self.check(term.target, target, f"target of `{term.function}`")
        return "float" if term.function == "mean" else target


def _describe(term: Term) -> str:
    if isinstance(term, Const):
        text = f'"{term.value}"' if isinstance(term.value, str) else repr(term.value)
        return f"constant {text}"
    if isinstance(term, Call):
        return f"`{term.function}(...)`"
    if isinstance(term, Aggregate):
        return f"`{term.function}` aggregate"
    return "expression"
