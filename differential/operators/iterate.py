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
from differential.operators.unread import mark_unread
from differential.time import Time
from differential.tuning import TUNING


class Subscope(Operator):
    """A nested scope, run to quiescence for each time of its parent."""

    name = "iterate"

    def __init__(self, parent: Scope, name: str = "iterate") -> None:
        super().__init__(parent)
        self.name = name
        self.inner = Scope(parent.depth + 1, parent, name)
        self.marked = False  # whether `mark_unread` looked at the scope (before it runs)
        self.retired = False  # whether `retire` forgot the scope's operators

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
        if self.retired:  # loud, not an empty result: the assumption below broke
            raise RuntimeError(f"{self.name}: a retired iteration scope was asked to run at {time}")
        if not self.marked:
            self.marked = True
            mark_unread(self.inner)
        self.inner.fused = fused_rounds(self.inner)
        self.inner.run(time)
        if TUNING.retire_rounds and self.inner.totally_ordered:
            self.retire()

    def retire(self) -> None:
        """Forget the nested scope's operators and what they hold: it ran for the one
        time of a one-shot dataflow's root, and its result has left it (`Leave`), so
        the rest of the evaluation runs without its key sets and arrangements.

        A one-shot evaluation already relies on a nested scope's inputs being complete
        when it runs (its rounds are advanced and compacted as they go, ADR 0062): its
        root runs each operator at its one time, after the ones feeding it."""
        self.inner.forget(set())
        self.inner.operators = []
        self.retired = True

    def describe(self) -> str:
        return f"{self.name}[{len(self.inner.operators)} operators]"


class Variable:
    """A recursively defined collection of an iteration scope (starts empty)."""

    def __init__(self, scope: Scope, dtypes: Sequence[np.dtype], name: str = "") -> None:
        assert scope.parent is not None, "variables live in iteration scopes"
        self.scope = scope
        self.output = Stream(scope, dtypes, name)
        self.defined = False
        scope.variables.append(self.output)

    def set(self, result: Stream) -> None:
        """Define the variable: its value at iteration `i + 1` is `result` at `i`."""
        assert not self.defined, "a variable is set once"
        assert result.scope is self.scope and result.arity == self.output.arity
        self.defined = True
        self.output.upstream = (result,)  # the feedback edge, for explain
        result.connect(Feedback(self.output))
