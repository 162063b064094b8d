"""Scalar semantics of every arithmetic operator, comparison and functor.

Layer: datalog. May import numpy, regex, the datalog language modules and the
budget of `differential.dataflow` (a regular expression stops with it). This is the
one definition of what an expression means; the reference evaluator calls these
functions row by row, and `datalog.eval.expressions` must agree with them column by
column (a property test checks it).

Values are Python objects: `number` is an int in [-2**63, 2**63) with
two's-complement wraparound, `unsigned` an int in [0, 2**64) with wraparound,
`float` a float (IEEE float64, computed with numpy scalars so that overflow gives
inf rather than an exception), `symbol` a str. A function returns None when the
operation has NO value: division or modulo by zero, a negative integer exponent,
`substr` out of range, `to_number` of a non-numeric string. The binding is then
dropped: the rule does not fire for it.

Decisions (C/Soufflé semantics unless noted): `/` and `%` truncate toward zero
(`-7 / 2 = -3`, `-7 % 2 = -1`), also for floats (`%` is C `fmod`); `^` is power;
shift counts are taken modulo 64; `bshr` is arithmetic on numbers, logical on
unsigned; `substr(s, start, len)` is 0-based, needs 0 <= start <= strlen(s) and
len >= 0, and clamps the end to the string (like C++ `std::string::substr`);
`strlen` counts code points; `to_number` accepts `[+-]?[0-9]+` in int64 range;
`to_string` of a float is Python's `repr`; symbols compare lexicographically by
code point; `contains(a, b)` means a is a substring of b; `match(p, s)` is a full
regular-expression match (an invalid pattern matches nothing).

Regular expressions backtrack, so a pattern such as `(a|a)+b` takes exponential
time on a long symbol. `pattern_hazard` finds the usual culprits (a repeated group
that itself repeats, a repeated group whose alternatives match the same text), and
the checks refuse such a constant pattern at its position (pass `check_patterns`);
such a pattern from the data is refused when it is matched. Every match runs in
slices of time (a regular expression cannot be resumed: each slice starts again,
twice as long), each checking the running budget, so a budget or
`Database.interrupt` stops a match within a slice.

Soufflé's `ord(s)` and `as(x, type)` (ADR 0027): `ord` is a 64-bit fingerprint of
the symbol's UTF-8 text (BLAKE2b), the same in every database and whatever the
order symbols arrived in, not Soufflé's symbol-table index. `as` converts values
like a C cast: number <-> unsigned wrap (two's complement), integer -> float rounds
to nearest, float -> integer truncates toward zero and has no value when out of
range or NaN; symbol -> number is `ord`. Numbers never become symbols
(`castable`), nor symbols unsigned or float.

`range(a, b)` and `range(a, b, step)` are Soufflé's multi-result functor: the values
a, a + step, a + 2*step ... before b (exclusive), b excluded whichever way it
counts; without a step it counts by 1 up, or down when a > b (also for unsigned);
a step of 0 gives a once if a != b. A float range computes a + i*step (no
accumulated rounding). More than `RANGE_LIMIT` values is an error, not a hang.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from datalog.lang.ast import ArithmeticOp, ColumnType, ComparisonOp
from datalog.lang.errors import FunctorError, UnsupportedError
from datalog.lang.patterns import pattern_hazard
from differential.budget import remaining, stop

if TYPE_CHECKING:
    import regex

Value = int | float | str

NUMERIC_TYPES: tuple[ColumnType, ...] = ("number", "unsigned", "float")
INTEGER_TYPES: tuple[ColumnType, ...] = ("number", "unsigned")
BITWISE_OPS: frozenset[str] = frozenset({"band", "bor", "bxor", "bshl", "bshr"})
AGGREGATE_FUNCTIONS: frozenset[str] = frozenset({"count", "sum", "min", "max", "mean"})
GENERATORS: frozenset[str] = frozenset({"range"})  # functors with several values
RANGE_LIMIT = 100_000_000  # values one `range` may generate

_MOD = 1 << 64
_HALF = 1 << 63
_NUMBER_PATTERN = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Functor:
    """A functor's signature. `params` None: every argument has the result's type
    (`min`, `max`); a param of None accepts any numeric type (`to_string`)."""

    name: str
    min_args: int
    max_args: int | None
    params: tuple[ColumnType | None, ...] | None
    result: ColumnType | None  # None: the type of the arguments

    def param(self, index: int) -> ColumnType | None:
        if self.params is None:
            return None
        return self.params[min(index, len(self.params) - 1)]


FUNCTORS: dict[str, Functor] = {
    "cat": Functor("cat", 1, None, ("symbol",), "symbol"),
    "strlen": Functor("strlen", 1, 1, ("symbol",), "number"),
    "substr": Functor("substr", 3, 3, ("symbol", "number", "number"), "symbol"),
    "to_number": Functor("to_number", 1, 1, ("symbol",), "number"),
    "to_string": Functor("to_string", 1, 1, (None,), "symbol"),
    "ord": Functor("ord", 1, 1, ("symbol",), "number"),
    "range": Functor("range", 2, 3, None, None),
    "min": Functor("min", 1, None, None, None),
    "max": Functor("max", 1, None, None, None),
}


def wrap(value: int, column_type: ColumnType) -> int:
    """`value` wrapped into the range of an integer column type."""
    value %= _MOD
    if column_type == "number" and value >= _HALF:
        value -= _MOD
    return value


def constant(value: Value, column_type: ColumnType) -> Value:
    """A literal as a value of `column_type` (integer literals are polymorphic)."""
    if column_type == "float":
        return float(value)
    if column_type in INTEGER_TYPES and isinstance(value, int):
        return wrap(value, column_type)
    return value


def arithmetic(
    op: ArithmeticOp, left: Value, right: Value, column_type: ColumnType
) -> Value | None:
    """`left op right` computed in `column_type`, or None when it has no value."""
    if column_type == "float":
        return _float_arithmetic(op, float(left), float(right))
    assert isinstance(left, int) and isinstance(right, int)
    return _integer_arithmetic(op, left, right, column_type)


def _integer_arithmetic(op: str, a: int, b: int, column_type: ColumnType) -> int | None:
    if op in ("/", "%"):
        if b == 0:
            return None
        quotient = abs(a) // abs(b)
        if (a < 0) != (b < 0):
            quotient = -quotient
        return wrap(quotient if op == "/" else a - b * quotient, column_type)
    if op == "^":
        return None if b < 0 else wrap(pow(a, b, _MOD), column_type)
    if op == "bshr":
        shift = b % 64
        return wrap(a >> shift, column_type)
    operation = _INTEGER_OPS[op]
    return wrap(operation(a, b), column_type)


_INTEGER_OPS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "band": lambda a, b: a & b,
    "bor": lambda a, b: a | b,
    "bxor": lambda a, b: a ^ b,
    "bshl": lambda a, b: a << (b % 64),
}


def _float_arithmetic(op: str, a: float, b: float) -> float | None:
    if op in ("/", "%") and b == 0.0:
        return None
    x, y = np.float64(a), np.float64(b)
    with np.errstate(all="ignore"):
        if op == "+":
            return float(x + y)
        if op == "-":
            return float(x - y)
        if op == "*":
            return float(x * y)
        if op == "/":
            return float(x / y)
        if op == "%":
            return float(np.fmod(x, y))
        if op == "^":
            return float(np.power(x, y))
    raise ValueError(f"operator `{op}` is not defined on floats")


def negate(value: Value, column_type: ColumnType) -> Value:
    """Unary minus."""
    if column_type == "float":
        return -float(value)
    assert isinstance(value, int)
    return wrap(-value, column_type)


def compare(op: ComparisonOp, left: Value, right: Value) -> bool:
    """A comparison of two values of the same type (symbols as strings)."""
    if op.startswith("!"):
        return not compare(cast(ComparisonOp, op[1:]), left, right)
    if op == "contains":
        return isinstance(left, str) and isinstance(right, str) and left in right
    if op == "match":
        return _matches(str(left), str(right))
    return _COMPARISONS[op](left, right)


_COMPARISONS: dict[str, Callable[[Value, Value], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,  # type: ignore[operator]
    "<=": lambda a, b: a <= b,  # type: ignore[operator]
    ">": lambda a, b: a > b,  # type: ignore[operator]
    ">=": lambda a, b: a >= b,  # type: ignore[operator]
}


def _matches(pattern: str, text: str) -> bool:
    """A full match, stopped by the running computation's budget or interrupt (a
    pattern that backtracks for ever cannot hold up a server). A pattern from the
    data that `pattern_hazard` refuses is refused here, as a constant one is by the
    checks."""
    import regex  # the `regex` package loads in 20 ms: only when something matches

    try:
        compiled = _compiled(pattern)
    except regex.error:
        return False
    hazard = _hazard(pattern)
    if hazard is not None:
        offset, reason = hazard
        raise UnsupportedError(f"`match` pattern {pattern!r}, at character {offset + 1}: {reason}")
    seconds = _FIRST_SLICE
    while True:
        left = remaining(where="in a regular expression")  # raises once spent
        limit = seconds if left is None else min(seconds, left)
        try:
            return compiled.fullmatch(text, timeout=limit) is not None
        except TimeoutError:
            if left is not None and left <= seconds:
                raise stop("stopped: a regular expression ran past the time budget") from None
            seconds *= 2  # start again, for longer: the total stays within twice the match


# A match's first slice of time: short enough for an interrupt to stop it promptly
# (the regular expression's own timeout may overrun it two or three times).
_FIRST_SLICE = 0.05


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> regex.Pattern[str]:
    import regex

    return regex.compile(pattern)


@functools.lru_cache(maxsize=256)
def _hazard(pattern: str) -> tuple[int, str] | None:
    return pattern_hazard(pattern)


def call(name: str, args: Sequence[Value], column_type: ColumnType) -> Value | None:
    """Apply functor `name`; `column_type` is the type of the result (for min/max)."""
    if name == "cat":
        return "".join(str(a) for a in args)
    if name == "strlen":
        return len(str(args[0]))
    if name == "substr":
        return substr(str(args[0]), int(args[1]), int(args[2]))
    if name == "to_number":
        return to_number(str(args[0]))
    if name == "to_string":
        return to_string(args[0])
    if name == "ord":
        return ordinal(str(args[0]))
    if name in ("min", "max"):
        return _extremum(name, args, column_type)
    raise ValueError(f"unknown functor `{name}`")


def substr(text: str, start: int, length: int) -> str | None:
    if not 0 <= start <= len(text) or length < 0:
        return None
    return text[start : start + length]


def to_number(text: str) -> int | None:
    if _NUMBER_PATTERN.fullmatch(text) is None:
        return None
    value = int(text)
    return value if -_HALF <= value < _HALF else None


def to_string(value: Value) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def ordinal(text: str) -> int:
    """`ord(text)`: a stable number per symbol (a 64-bit BLAKE2b fingerprint)."""
    import hashlib

    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def range_values(args: Sequence[Value], column_type: ColumnType) -> list[Value]:
    """The values of `range(*args)` in `column_type` (a number type), in order."""
    start, stop = args[0], args[1]
    assert not isinstance(start, str) and not isinstance(stop, str)
    step = args[2] if len(args) == 3 else (1 if start <= stop else -1)
    assert not isinstance(step, str)
    if step == 0:
        return [start] if start != stop else []
    if column_type != "float":
        found = range(int(start), int(stop), int(step))
        if len(found[: RANGE_LIMIT + 1]) > RANGE_LIMIT:  # len() of a huge range overflows
            raise range_too_long(args)
        return list(found)
    values: list[Value] = []
    while (start + len(values) * step < stop) if step > 0 else (start + len(values) * step > stop):
        if len(values) == RANGE_LIMIT:
            raise range_too_long(args)
        values.append(start + len(values) * step)
    return values


def range_too_long(args: Sequence[object]) -> FunctorError:
    shown = ", ".join(repr(a) for a in args)
    return FunctorError(f"`range({shown})` has more than {RANGE_LIMIT} values")


def castable(source: ColumnType, target: ColumnType) -> bool:
    """Whether `as(x, target)` is defined for an `x` of type `source`."""
    if source == target:
        return True
    if source == "symbol":
        return target == "number"
    return target != "symbol"


def convert(value: Value, source: ColumnType, target: ColumnType) -> Value | None:
    """`as(value, target)` for a `value` of type `source` (`castable`), or None."""
    if source == target:
        return value
    if isinstance(value, str):
        return ordinal(value)
    if target == "float":
        return float(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        whole = math.trunc(value)
        low, high = (-_HALF, _HALF) if target == "number" else (0, _MOD)
        return whole if low <= whole < high else None
    return wrap(value, target)


def _extremum(name: str, args: Sequence[Value], column_type: ColumnType) -> Value:
    values = [constant(a, column_type) for a in args]
    if column_type == "float" and any(math.isnan(float(v)) for v in values):
        return math.nan  # numpy's minimum/maximum propagate NaN; so do we
    return min(values) if name == "min" else max(values)
