"""Terms as Spark columns: the scalar semantics of `datalog.lang.functions`, vectorized.

Layer: datalog (Spark back end). Imports the AST, `datalog.lang.functions` and the
type resolution the other evaluators use; pyspark only inside functions.

A column is NULL where the term has no value (division by zero, `substr` out
of range, `to_number` of a non-number), so filters drop the row and bindings
are dropped by the caller. Types are resolved top-down exactly as in
`datalog.eval.reference` (`resolve_type`). Supported: every comparison, `+ - * / %`
and the bitwise operators on numbers, `+ - * / % ^` on floats, `cat`,
`strlen`, `substr`, `to_number`, `to_string` of integers, `min`/`max`.
Anything else raises `UnsupportedError` at the term's position: integer `^`
(no wrapping power in Spark) and `to_string` of a float (Spark does not print
floats as Python's `repr`), and user-defined functors (`@f`: Python functions are
bound to an embedded `Database` only).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from datalog.lang.ast import (
    Aggregate,
    BinOp,
    Call,
    Cast,
    ColumnType,
    ComparisonOp,
    Const,
    Neg,
    Term,
    Var,
)
from datalog.lang.errors import UnsupportedError
from datalog.lang.functions import FUNCTORS, constant
from datalog.lang.passes.term_types import resolve_type

if TYPE_CHECKING:
    from pyspark.sql import Column

SPARK_TYPES: dict[str, str] = {"number": "long", "float": "double", "symbol": "string"}


@dataclass
class Names:
    """Where a frame keeps each variable and each computed aggregate."""

    types: Mapping[str, ColumnType]
    variables: dict[str, str] = field(default_factory=dict)
    aggregates: dict[int, str] = field(default_factory=dict)


def value(term: Term, names: Names, expected: ColumnType | None) -> Column:
    """`term` where its context expects `expected` (as `Solver.value` does)."""
    return evaluate(term, names, resolve_type(term, names.types, expected))


def evaluate(term: Term, names: Names, kind: ColumnType) -> Column:
    from pyspark.sql import functions as sf

    if isinstance(term, Var):
        return sf.col(names.variables[term.name])
    if isinstance(term, Const):
        return literal(constant(term.value, kind), kind)
    if isinstance(term, BinOp):
        left, right = evaluate(term.left, names, kind), evaluate(term.right, names, kind)
        return arithmetic(term, left, right, kind)
    if isinstance(term, Neg):
        return -evaluate(term.operand, names, kind)
    if isinstance(term, Call):
        return call(term, names, kind)
    if isinstance(term, Aggregate):
        return sf.col(names.aggregates[id(term)])
    if isinstance(term, Cast):
        raise UnsupportedError("`as` is not supported on Spark", term.span)
    raise UnsupportedError("`_` has no value", term.span)


def literal(raw: object, kind: ColumnType) -> Column:
    from pyspark.sql import functions as sf

    return sf.lit(raw).cast(SPARK_TYPES[kind])


def arithmetic(term: BinOp, a: Column, b: Column, kind: ColumnType) -> Column:
    from pyspark.sql import functions as sf

    if term.op in ("/", "%"):
        nonzero = b != literal(0, kind)
        if term.op == "%":
            return sf.when(nonzero, a % b)
        if kind == "float":
            return sf.when(nonzero, a / b)
        return sf.when(nonzero, sf.call_function("div", a, b))  # truncates toward zero
    operation = (_FLOAT_OPS if kind == "float" else _INTEGER_OPS).get(term.op)
    if operation is None:
        raise UnsupportedError(f"`{term.op}` on {kind} is not supported on Spark", term.span)
    return operation(a, b)


def _shift(name: str) -> Callable[[Column, Column], Column]:
    def shift(a: Column, b: Column) -> Column:
        from pyspark.sql import functions as sf

        return sf.call_function(name, a, b.cast("int"))  # Java masks the count to 6 bits

    return shift


def _power(a: Column, b: Column) -> Column:
    from pyspark.sql import functions as sf

    return sf.pow(a, b)


_COMMON: dict[str, Callable[[Column, Column], Column]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
}
_FLOAT_OPS = {**_COMMON, "^": _power}
_INTEGER_OPS = {
    **_COMMON,
    "band": lambda a, b: a.bitwiseAND(b),
    "bor": lambda a, b: a.bitwiseOR(b),
    "bxor": lambda a, b: a.bitwiseXOR(b),
    "bshl": _shift("shiftleft"),
    "bshr": _shift("shiftright"),
}


def call(term: Call, names: Names, kind: ColumnType) -> Column:
    if term.function.startswith("@"):
        message = f"user-defined functors (`{term.function}`) are not supported on Spark"
        raise UnsupportedError(message, term.span)
    if term.function not in _FUNCTORS:  # `ord`, `range`
        raise UnsupportedError(f"`{term.function}` is not supported on Spark", term.span)
    functor = FUNCTORS[term.function]
    args = []
    for index, arg in enumerate(term.args):
        param = functor.param(index) if functor.params is not None else kind
        args.append((arg, param or resolve_type(arg, names.types)))
    if term.function == "to_string" and args[0][1] == "float":
        raise UnsupportedError("`to_string` of a float is not supported on Spark", term.span)
    columns = [evaluate(arg, names, param) for arg, param in args]
    return _FUNCTORS[term.function](columns)


def _substr(args: list[Column]) -> Column:
    from pyspark.sql import functions as sf

    text, start, length = args
    fits = (start >= 0) & (start <= sf.char_length(text)) & (length >= 0)
    return sf.when(fits, text.substr(start.cast("int") + 1, length.cast("int")))


def _to_number(args: list[Column]) -> Column:
    from pyspark.sql import functions as sf

    text = args[0]
    return sf.when(text.rlike(r"^[+-]?[0-9]+$"), text.cast("long"))  # NULL when out of range


def _functors() -> dict[str, Callable[[list[Column]], Column]]:
    def spark(name: str) -> Callable[..., Any]:
        from pyspark.sql import functions as sf

        return getattr(sf, name)

    return {
        "cat": lambda args: spark("concat")(*args),
        "strlen": lambda args: spark("char_length")(args[0]).cast("long"),
        "substr": _substr,
        "to_number": _to_number,
        "to_string": lambda args: args[0].cast("string"),
        "min": lambda args: spark("least")(*args) if len(args) > 1 else args[0],
        "max": lambda args: spark("greatest")(*args) if len(args) > 1 else args[0],
    }


_FUNCTORS = _functors()


def compare(op: ComparisonOp, left: Column, right: Column, pattern: Term | None = None) -> Column:
    """`left op right`; for `contains(a, b)` a is the part, for `match(p, s)` p the pattern."""
    from pyspark.sql import functions as sf

    if op.startswith("!"):
        return ~compare(cast(ComparisonOp, op[1:]), left, right, pattern)
    if op == "contains":
        return right.contains(left)
    if op == "match":
        if isinstance(pattern, Const) and isinstance(pattern.value, str):
            if not _valid(pattern.value):
                return sf.lit(False)
            return right.rlike(f"^(?:{pattern.value})$")
        return sf.call_function("rlike", right, sf.concat(sf.lit("^(?:"), left, sf.lit(")$")))
    return _COMPARISONS[op](left, right)


def _valid(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


_COMPARISONS: dict[str, Callable[[Column, Column], Column]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
