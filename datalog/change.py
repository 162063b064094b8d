"""What a subscriber receives. A module of its own, light on purpose.

Layer: datalog (API). Imports the standard library only, so that
`server.client` (which hands its users the same `Change`) loads no engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    """What a subscriber receives: rows with their diffs (+1 in, -1 out) at an epoch."""

    rows: list[tuple[Any, ...]]
    diffs: list[int]
    epoch: int
    snapshot: bool = False

    def __iter__(self) -> Iterator[Any]:
        return iter((self.rows, self.diffs, self.epoch))


Callback = Callable[[Change], None]
