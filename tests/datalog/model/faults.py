"""Injected faults: KeyboardInterrupt or MemoryError raised at a sampled point.

Three kinds of fault point, each counted separately while a fault is armed:

- `callback`: a subscriber callback, after it recorded its change;
- `functor`: a call of the Python function bound to `.functor mix`;
- `engine`: an operator step or advance, a fused round of a chain, an input's
  seal (the engine's own steps, as `tests/datalog/test_commit_faults.py` counts
  them). `engine_hooks` wraps those methods for the duration of one operation:
  the one place the model test reaches below the public API.

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
from differential.inputs import Input
from differential.operators.chain import Chain

KINDS = ("callback", "functor", "engine")
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


def _wrapped(real: Callable[..., Any], faults: Faults) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        faults.point("engine")
        return real(*args, **kwargs)

    return call


@contextmanager
def engine_hooks(faults: Faults) -> Iterator[None]:
    """Engine steps are fault points within the block."""
    with ExitStack() as stack:
        for cls in _operator_classes():
            for method in ("step", "advance"):
                if method in vars(cls):
                    stack.enter_context(
                        mock.patch.object(cls, method, _wrapped(vars(cls)[method], faults))
                    )
        stack.enter_context(mock.patch.object(Chain, "run", _wrapped(Chain.run, faults)))
        stack.enter_context(mock.patch.object(Input, "seal", _wrapped(Input.seal, faults)))
        yield
