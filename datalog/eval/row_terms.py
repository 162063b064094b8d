"""Filters and maps compiled to functions of one Python row.

Layer: datalog. Imports the datalog language modules (ast, functions,
passes.term_types); never `differential`.

The row-at-a-time counterpart of `datalog.eval.expressions.compile_term` for the few
rows an iteration round moves (one new fact per round of a counter recursion):
a row is the tuple of its columns' Python values (`ndarray.tolist()`), and a
compiled filter or map turns it into its image, or None where it drops. Each is
generated as one Python expression (`lambda row: ...`), so a row costs one call
per operator, not one per node of the syntax tree.

The values are those of the scalar semantics (`datalog.lang.functions`, which the
numpy path agrees with row by row): `number` arithmetic wraps around like int64
(`((v + 2**63) & (2**64 - 1)) - 2**63`), `unsigned` like uint64, floats are IEEE
doubles as numpy's. Only terms that always have a value compile: variables of the
term's own numeric type, numeric constants, unary minus, `+ - *` and (integers)
`band bor bxor`, and the six orderings. Anything else (symbols, functor calls,
division, mixed types), or an expression too deep for Python to compile, gives None,
and its operator keeps only the numpy path.
Generated source holds only `row[i]`, operators, integer literals and names of
float constants, never user text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from datalog.lang import functions
from datalog.lang.ast import BinOp, ColumnType, Comparison, Const, Neg, Term, Var
from datalog.lang.passes.term_types import comparison_type, resolve_type

Row = tuple[object, ...]
RowMap = Callable[[Row], Row | None]

_HALF, _MASK = 1 << 63, (1 << 64) - 1
_NUMERIC: tuple[ColumnType, ...] = ("number", "unsigned", "float")
_ARITHMETIC = {"+": "+", "-": "-", "*": "*"}
_BITWISE = {"band": "&", "bor": "|", "bxor": "^"}
_ORDERINGS = {"=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class _Source:
    """Python source of expressions over `row`, with the float constants it names."""

    def __init__(self, names: Sequence[str], types: Mapping[str, ColumnType]) -> None:
        self.names = tuple(names)
        self.types = types
        self.floats: dict[str, float] = {}

    def term(self, term: Term, kind: ColumnType) -> str | None:
        if kind not in _NUMERIC:
            return None
        if isinstance(term, Var):
            own = self.types.get(term.name)
            if own != kind or term.name not in self.names:
                return None
            return f"row[{self.names.index(term.name)}]"
        if isinstance(term, Const):
            return self.constant(functions.constant(term.value, kind))
        if isinstance(term, Neg):
            operand = self.term(term.operand, kind)
            return None if operand is None else _wrapped(f"-{operand}", kind)
        if isinstance(term, BinOp):
            left = self.term(term.left, kind)
            right = self.term(term.right, kind)
            if left is None or right is None:
                return None
            if term.op in _ARITHMETIC:
                return _wrapped(f"{left} {_ARITHMETIC[term.op]} {right}", kind)
            if term.op in _BITWISE and kind != "float":  # stays in range: no wrap
                return f"({left} {_BITWISE[term.op]} {right})"
        return None

    def constant(self, value: object) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if isinstance(value, int):
            return f"({value!r})"
        name = f"c{len(self.floats)}"
        self.floats[name] = value
        return name

    def function(self, body: str) -> RowMap | None:
        """`lambda row: body`, seeing only the float constants it names; None when
        Python cannot compile it (an expression nested deeper than its parser's
        limit of 200 parentheses: the numpy path takes it)."""
        try:
            built: RowMap = eval(f"lambda row: {body}", {"__builtins__": {}, **self.floats})
        except (SyntaxError, RecursionError, MemoryError):
            return None
        return built


def _wrapped(source: str, kind: ColumnType) -> str:
    """`source` (an integer result) wrapped into the range of `kind`."""
    if kind == "number":
        return f"(((({source}) + {_HALF}) & {_MASK}) - {_HALF})"
    if kind == "unsigned":
        return f"(({source}) & {_MASK})"
    return f"({source})"


def row_filter(
    comparison: Comparison, names: Sequence[str], types: Mapping[str, ColumnType]
) -> RowMap | None:
    """The row itself where `comparison` holds, else None (None: no row form)."""
    op = _ORDERINGS.get(comparison.op)
    if op is None:
        return None
    shared = comparison_type(comparison.left, comparison.right, types)
    source = _Source(names, types)
    left = source.term(comparison.left, shared)
    right = source.term(comparison.right, shared)
    if left is None or right is None:
        return None
    return source.function(f"row if {left} {op} {right} else None")


def row_map(
    exprs: Sequence[Term],
    kinds: Sequence[ColumnType],
    names: Sequence[str],
    types: Mapping[str, ColumnType],
    keep: bool,
) -> RowMap | None:
    """The tuple of the expressions' values (`keep`: the row extended by them), each
    evaluated as a value of its kind (None: one has no row form)."""
    source = _Source(names, types)
    values: list[str] = []
    for expr, kind in zip(exprs, kinds, strict=True):
        value = source.term(expr, kind) if resolve_type(expr, types, kind) == kind else None
        if value is None:
            return None
        values.append(value)
    head = ["*row"] if keep else []
    return source.function(f"({', '.join([*head, *values])},)" if values or keep else "()")
