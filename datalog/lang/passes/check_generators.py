"""Pass: a multi-result functor (`range`) only ever binds a variable.

Layer: datalog. Imports the AST, errors and `datalog.lang.functions`. `range(a, b)` has
several values, so it may stand only as one side of an equality whose other side
is a variable, directly in a rule, query or aggregate body: `x = range(0, 10)`
generates one binding per value (`x` already bound: it keeps the bindings whose
`x` is one of them). Anywhere else (a head, a fact, an atom argument, inside
arithmetic or another functor) is an `UnsupportedError` at the call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from datalog.lang.ast import Aggregate, Call, Comparison, Literal, Term, Var
from datalog.lang.errors import UnsupportedError
from datalog.lang.functions import GENERATORS
from datalog.lang.passes.context import CheckContext
from datalog.lang.passes.variables import nodes


def check_generators(ctx: CheckContext) -> None:
    for clause in ctx.clauses():
        check_clause_generators(ctx, clause.head.args, clause.body)


def check_clause_generators(
    ctx: CheckContext, head: Sequence[Term], body: Sequence[Literal]
) -> None:
    """Report every generator call of one clause that does not bind a variable."""
    allowed = {id(call) for call in _binding_generators(body)}
    for node in nodes(head, body):
        if isinstance(node, Call) and node.function in GENERATORS and id(node) not in allowed:
            message = (
                f"`{node.function}` generates several values: it can only bind a "
                f"variable in a body, as in `x = {node.function}(0, 10)`"
            )
            ctx.report(UnsupportedError, message, node.span)


def generator_binding(literal: Literal) -> tuple[Var, Call] | None:
    """`(x, call)` for a literal `x = call` (either way round) whose call generates."""
    if not isinstance(literal, Comparison) or literal.op != "=":
        return None
    for var, call in ((literal.left, literal.right), (literal.right, literal.left)):
        if isinstance(var, Var) and isinstance(call, Call) and call.function in GENERATORS:
            return var, call
    return None


def _binding_generators(body: Sequence[Literal]) -> Iterator[Call]:
    """The generators that bind a variable directly in `body` or in the body of an
    aggregate in it at any depth (`nodes` reaches them all: each body is read once)."""
    bodies = [body, *(node.body for node in nodes((), body) if isinstance(node, Aggregate))]
    for literals in bodies:
        for literal in literals:
            found = generator_binding(literal)
            if found is not None:
                yield found[1]
