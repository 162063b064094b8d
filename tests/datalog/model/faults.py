"""Injected faults: KeyboardInterrupt or MemoryError raised at a sampled point.

The kinds of fault point, each counted separately while a fault is armed:

- `callback`: a subscriber callback, after it recorded its change;
- `functor`: a call of the Python function bound to `.functor mix`;
- `engine:<point>`: inside the engine (`ENGINE_POINTS`): an operator's `step` or
  `advance`, a chain's fused `round`, an input's `seal` (what
  `tests/datalog/test_commit_faults.py` counts), an `insert` into a trace, the
  `build` of a batch (where a big commit allocates) and the `drop` of a dataflow
  (a Ctrl-C landing while a query's dataflow is torn down).
  Counting each family apart reaches its last calls as often as its first ones.
  `engine_hooks` wraps those methods for the duration of one operation: with
  `measures.eager_compaction`, the only places the model test reaches below the
  public API.

`Faults.arm(kind, error, nth)` raises `error` at the `nth` point of that kind and
then disarms itself: one fault per operation, and never in the repairs after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from unittest import mock

from differential.dataflow import Operator
from differential.engine import Engine
from differential.inputs import Input
from differential.operators.chain import Chain
from differential.trace.batch import Batch
from differential.trace.spine import Spine

ENGINE_POINTS = ("step", "advance", "round", "seal", "insert", "build", "drop")
ERRORS: dict[str, type[BaseException]] = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "MemoryError": MemoryError,
}


@dataclass
class Faults:
    """At most one armed fault (see the module docstring)."""

    kind: str | None = None
    error: type[BaseException] = KeyboardInterrupt
    nth: int = 0
    calls: int = 0
    fired: bool = False

    def arm(self, kind: str, error: type[BaseException], nth: int) -> None:
        self.kind, self.error, self.nth, self.calls, self.fired = kind, error, nth, 0, False

    def disarm(self) -> None:
        self.kind = None

    def point(self, kind: str) -> None:
        if self.kind != kind:
            return
        self.calls += 1
        if self.calls == self.nth:
            self.kind, self.fired = None, True
            raise self.error(f"injected at {kind} point {self.nth}")

    def hook(self, kind: str) -> Callable[[], None]:
        return lambda: self.point(kind)


def _operator_classes() -> list[type]:
    found, todo = [], [Operator]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def _wrapped(real: Callable[..., Any], faults: Faults, point: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        faults.point(f"engine:{point}")
        return real(*args, **kwargs)

    return call


def _methods() -> list[tuple[type, str, str]]:
    """(class, method, point) for every engine fault point."""
    found = [
        (cls, method, method)
        for cls in _operator_classes()
        for method in ("step", "advance")
        if method in vars(cls)
    ]
    others = [(Chain, "run", "round"), (Input, "seal", "seal"), (Spine, "insert", "insert")]
    return [*found, *others, (Batch, "build", "build"), (Engine, "drop", "drop")]


@contextmanager
def engine_hooks(faults: Faults) -> Iterator[None]:
    """The engine's points are fault points within the block."""
    with ExitStack() as stack:
        for cls, method, point in _methods():
            real = vars(cls)[method]
            wrapped: Any = _wrapped(real, faults, point)
            if isinstance(real, staticmethod):
                wrapped = staticmethod(wrapped)
            stack.enter_context(mock.patch.object(cls, method, wrapped))
        yield
