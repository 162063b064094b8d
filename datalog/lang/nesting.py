"""How deep the language front end lets things nest.

Layer: datalog (language). Imports the standard library only.

Every pass over the AST (checks, planning, both evaluators, printing, provenance)
walks terms and literals recursively, so the depth of a text must fit the
interpreter's recursion limit (1,000 frames by default). The front end never raises
that limit (a process-wide setting: it would change what other code may do, and in
C-recursive code such as `json` trade a `RecursionError` for a crash): it refuses,
with a position, a text nested deeper than the default allows with room to spare
(ADR 0036).

Depth is counted in levels, each nesting construct costing what its deepest walk
costs in frames, about two frames a level: an operator, a negation or a cast is 1, a
functor call 2, a parenthesized group of literals 4, an aggregate 5. `MAX_NESTING`
levels then take about 850 frames, leaving 150 to whoever called (a server, a test
runner, a notebook). Brackets are bounded by the same number before parsing.
"""

from __future__ import annotations

MAX_NESTING = 400

# The levels each parse-tree node that nests costs (node names of grammar.lark).
LEVELS: dict[str, int] = {
    "binop": 1,
    "neg": 1,
    "cast": 1,
    "call": 2,
    "group": 4,
    "aggregate": 5,
    "count_aggregate": 5,
}

# Components instantiated or inherited inside one another: each level recurses
# through the expansion of a whole component body.
MAX_COMPONENT_NESTING = 100
