"""Rows and small batches waiting unarranged at the end of a spine (`Recent`).

Layer: differential (trace). Imports numpy and `differential.batch`/`time`.
"""

from __future__ import annotations

from collections.abc import Sequence

from differential.batch import Column, Updates, concat, integral, python_rows, python_times
from differential.time import Antichain, Time
from differential.trace.batch import Batch, Description
from differential.trace.cursor import Entry, FewKeys
from differential.tuning import TUNING


class Recent:
    """Updates and batches of a few rows each, appended to a trace without merging
    them, and indexed by key in a dict: a reader of a few keys finds them in Python,
    and the first reader that needs batches gets them all (updates arranged into one
    batch). A reduce step over a few keys then builds no batch for its output, and a
    trace growing by one small batch per commit is read by key with one dict probe
    instead of one search per batch."""

    def __init__(self) -> None:
        self.parts: list[Updates | Batch] = []
        self.rows = 0
        self.lower: Antichain | None = None
        self.loose = False  # some parts are updates, not batches
        self.by_key: dict[tuple[object, ...], list[tuple[Time, tuple[object, ...], int]]] = {}
        self.indexed = 0  # parts in `by_key`: the others wait for a reader by key

    def _clear(self) -> None:
        self.parts, self.rows, self.lower, self.by_key = [], 0, None, {}
        self.loose, self.indexed = False, 0

    def fits(self, columns: Sequence[Column], rows: int) -> bool:
        return bool(columns) and self.rows + rows <= TUNING.recent_rows and integral(columns)

    def add(self, updates: Updates, lower: Antichain) -> None:
        self.parts.append(updates)
        self.rows += len(updates)
        self.loose = True
        if self.lower is None:
            self.lower = lower

    def hold(self, batch: Batch) -> None:
        self.parts.append(batch)
        self.rows += len(batch)
        if self.lower is None:
            self.lower = batch.description.lower

    def _index(self, key_arity: int) -> None:
        """Index the parts added since the last reader by key (a trace that nobody
        reads by key, like an arrangement only scanned, never converts its rows)."""
        for part in self.parts[self.indexed :]:
            updates = part.updates() if isinstance(part, Batch) else part
            rows = python_rows(updates.columns, len(updates))
            times = python_times(updates.times)
            for row, time, diff in zip(rows, times, updates.diffs.tolist(), strict=True):
                self.by_key.setdefault(row[:key_arity], []).append((time, row[key_arity:], diff))
        self.indexed = len(self.parts)

    def lookup(self, keys: FewKeys, key_arity: int, found: list[Entry]) -> None:
        if self.rows:
            if self.indexed < len(self.parts):
                self._index(key_arity)
            for i, row in enumerate(keys.rows):
                for time, values, diff in self.by_key.get(row, ()):
                    found.append((i, time, values, diff))

    def take(self, key_arity: int) -> list[Batch]:
        """The waiting parts as batches, in order (updates among them arranged, with
        everything else, into one); then none wait. If arranging them raises, they
        all still wait."""
        parts = self.parts
        if not parts:
            return []
        if not self.loose:  # batches only: they are arranged already
            self._clear()
            return parts  # type: ignore[return-value]
        assert self.lower is not None
        updates = concat([p.updates() if isinstance(p, Batch) else p for p in parts])
        batch = Batch.build(updates, key_arity, Description(self.lower, Antichain(), Antichain()))
        self._clear()
        return [batch]
