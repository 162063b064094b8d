"""A subscription's answer accumulated from its changes, for tests that compare it.

The callback of `db.subscribe`: the snapshot and every change are summed per row;
`rows()` checks set semantics (every count 0 or 1) and returns the present rows.
`Recorder` also keeps every `Change` it was given (their epochs, the last one).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from datalog import Change


class Accumulated:
    """A subscription's answer: its snapshot plus every change since."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[Any, ...]] = Counter()

    def __call__(self, change: Change) -> None:
        for row, diff in zip(change.rows, change.diffs, strict=True):
            self.counts[row] += diff

    def rows(self) -> set[tuple[Any, ...]]:
        assert all(n in (0, 1) for n in self.counts.values()), self.counts
        return {row for row, n in self.counts.items() if n}


class Recorder(Accumulated):
    """An accumulated answer that also keeps every change; `last()` is the latest one
    as sorted (row, diff) pairs."""

    def __init__(self) -> None:
        super().__init__()
        self.changes: list[Change] = []

    def __call__(self, change: Change) -> None:
        super().__call__(change)
        self.changes.append(change)

    def last(self) -> list[tuple[tuple[object, ...], int]]:
        return sorted(zip(self.changes[-1].rows, self.changes[-1].diffs, strict=True))
