"""Iteration: nested scopes and variables for (mutual) recursion.

Layer: differential (operators).

An iteration scope is a nested `Scope` whose times carry one more coordinate,
the iteration counter, driven as a single operator of its parent scope. A
`Variable` is a collection defined in terms of itself: `set(result)` feeds
`result` back one iteration later, so the variable at iteration `i + 1` equals
the result at iteration `i` (it starts empty). Several variables in one scope
give mutual recursion. Only differences circulate; the scope is quiet when
every difference has cancelled, and `leave(result)` is the fixed point.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from differential.dataflow import Operator, Scope, Stream
from differential.operators.chain import fused_rounds
from differential.operators.linear import Feedback
from differential.time import Time


class Subscope(Operator):
    """A nested scope, run to quiescence for each time of its parent."""

    name = "iterate"

    def __init__(self, parent: Scope, name: str = "iterate") -> None:
        super().__init__(parent)
        self.name = name
        self.inner = Scope(parent.depth + 1, parent, name)

    def pending(self, prefix: Time) -> Iterable[Time]:
        depth = self.scope.depth
        found: set[Time] = set()
        for op in self.inner.operators:
            for t in op.pending(prefix):
                if t[: len(prefix)] == prefix:
                    found.add(t[:depth])
        return found

    def ready(self, time: Time) -> bool:
        return self.inner.next_time(time) is not None

    def step(self, time: Time) -> None:
        self.inner.fused = fused_rounds(self.inner)
        self.inner.run(time)

    def describe(self) -> str:
        return f"{self.name}[{len(self.inner.operators)} operators]"


class Variable:
    """A recursively defined collection of an iteration scope (starts empty)."""

    def __init__(self, scope: Scope, dtypes: Sequence[np.dtype], name: str = "") -> None:
        assert scope.parent is not None, "variables live in iteration scopes"
        self.scope = scope
        self.output = Stream(scope, dtypes, name)
        self.defined = False

    def set(self, result: Stream) -> None:
        """Define the variable: its value at iteration `i + 1` is `result` at `i`."""
        assert not self.defined, "a variable is set once"
        assert result.scope is self.scope and result.arity == self.output.arity
        self.defined = True
        self.output.upstream = (result,)  # the feedback edge, for explain
        result.connect(Feedback(self.output))
