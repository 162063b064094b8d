"""How deep the language front end lets things nest, and the recursion that needs.

Layer: datalog (language). Imports the standard library only.

Every pass over the AST (checks, planning, evaluation, printing) walks terms
recursively, as do component expansion and the walks of nested aggregates. Rather
than refuse what Python's default recursion limit (1,000 frames) cannot walk (a
sum of 400 terms already takes 1,200), the front end bounds nesting at
`MAX_NESTING` levels, with a clear error where a text goes past it, and raises the
interpreter's recursion limit to what the deepest input accepted so far needs:
once, only upwards (another thread may be deep in a walk), and never beyond what
`MAX_NESTING` levels need (ADR 0036). Python 3.11 keeps Python-to-Python calls off
the C stack, so the frames this allows are cheap.
"""

from __future__ import annotations

import sys

# The deepest nesting accepted: brackets `(` `{` inside one another, levels of
# operators, calls, aggregates and groups in an expression or a body, components
# instantiated inside one another.
MAX_NESTING = 1000

# Python frames one level may take in the deepest walk over it (3 measured for
# arithmetic, 5 for calls; a group or an aggregate is 3 levels of the parse tree),
# and the frames left to whoever called (a server, a test runner).
_FRAMES_PER_LEVEL = 5
_CALLER_FRAMES = 1000


def allow_recursion(levels: int) -> None:
    """Raise the recursion limit to what walks `levels` deep need, if it is lower."""
    needed = _CALLER_FRAMES + _FRAMES_PER_LEVEL * min(levels, 3 * MAX_NESTING + 50)
    if sys.getrecursionlimit() < needed:
        sys.setrecursionlimit(needed)
