"""Ctrl-C at a safe point: an interrupt never lands in the middle of bookkeeping.

Layer: datalog (API). Imports the standard library only.

A commit is interruptible while it computes (an interrupt then aborts it: nothing
happened), but once its epoch is decided the rest (sealing, delivering, handing
joiners their answers, registering a new subscription) must run to its end, or the
database would be left half-way. `guard()` routes SIGINT through a handler of ours
for its block: until `defer()` is called an interrupt is raised at once, as Python's
own handler does; after it, the interrupt is remembered and raised as
`KeyboardInterrupt` when the outermost guard ends (unless another exception is
already on its way out). Guards nest and share one state.

Only the main thread receives signals, and only Python's default handler is
replaced: elsewhere, or when the program installed a handler of its own, a guard
does nothing (the program's handler decides).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class _State:
    depth = 0  # guards entered and not left
    deferring = 0  # of those, the ones that called `defer`
    pending = False  # an interrupt arrived while deferring


_STATE = _State()


class Guard:
    """One `guard()` block's handle."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.deferred = False

    def defer(self) -> None:
        """From now on until the block ends, an interrupt waits for the block's end."""
        if self.active and not self.deferred:
            self.deferred = True
            _STATE.deferring += 1


def _handle(signum: int, frame: FrameType | None) -> None:
    if _STATE.deferring:
        _STATE.pending = True
        return
    raise KeyboardInterrupt


@contextmanager
def guard() -> Iterator[Guard]:
    """A block whose interrupts wait once it calls `defer()` (module docstring)."""
    outer = _STATE.depth == 0
    active = threading.current_thread() is threading.main_thread() and (
        not outer or signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    if not active:
        yield Guard(False)
        return
    if outer:
        signal.signal(signal.SIGINT, _handle)
    _STATE.depth += 1
    handle = Guard(True)
    ok = False
    try:
        yield handle
        ok = True
    finally:
        _STATE.depth -= 1
        if handle.deferred:
            _STATE.deferring -= 1
        if outer:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        pending = _STATE.pending and not _STATE.deferring
        if pending:
            _STATE.pending = False
        if pending and ok:
            raise KeyboardInterrupt


@contextmanager
def deferred() -> Iterator[None]:
    """A block that an interrupt never cuts: it is raised once the block is done."""
    with guard() as handle:
        handle.defer()
        yield
