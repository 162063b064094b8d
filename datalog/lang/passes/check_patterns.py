"""Pass: a constant `match` pattern must not backtrack exponentially.

Layer: datalog. Imports the AST, errors and `datalog.lang.patterns`. `match("(a|a)+b", x)`
would take minutes on a 34-character symbol, whatever its budget (a regular
expression is stopped only between slices of time). A constant pattern with a
nested quantifier or overlapping repeated alternatives (`datalog.lang.patterns`) is an
`UnsupportedError` at the pattern; a pattern from the data is bounded by the
running budget instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from datalog.lang.ast import Comparison, Const, Literal, Term
from datalog.lang.errors import UnsupportedError
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.variables import nodes
from datalog.lang.patterns import pattern_hazard


def check_patterns(ctx: CheckContext) -> None:
    for clause in ctx.clauses():
        check_clause_patterns(ctx, clause.head.args, clause.body)


def check_clause_patterns(ctx: CheckContext, head: Sequence[Term], body: Sequence[Literal]) -> None:
    """Report every constant `match` pattern of one clause that may backtrack for ever
    (once per pattern, however many clauses a disjunction made of it)."""
    for node in nodes(head, body):
        if not isinstance(node, Comparison) or node.op not in ("match", "!match"):
            continue
        pattern = node.left
        if not isinstance(pattern, Const) or not isinstance(pattern.value, str):
            continue
        hazard = pattern_hazard(pattern.value)
        reported = any(e.span == pattern.span for e in ctx.errors)
        if hazard is not None and not reported:
            offset, reason = hazard
            message = f"`match` pattern {pattern.value!r}, at character {offset + 1}: {reason}"
            ctx.report(UnsupportedError, message, pattern.span)
