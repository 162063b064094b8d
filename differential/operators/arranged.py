"""What joins and reduces read: an arrangement's delta at a time and lookups into its
trace, before or after that delta (`Arranged`), and the default reading of one held
as a list of batches (`BatchesArranged`).

Layer: differential (operators). Imports `differential.dataflow`, `trace`.

Every join and reduce input is an `Arranged`: at a time `t` it offers the
batch of updates that arrived at exactly `t` (`delta`) and lookups into the
trace either without that batch ("before") or with it ("after"). A binary join
at `t` computes `dA ⋈ B_after + A_before ⋈ dB`, which derives each pair of
updates exactly once whatever the order of arrival.

Three kinds exist: `ArrangeOp` (in `arrange.py`) arranges a stream inside a dataflow;
`ImportOp` (in `shared.py`) reads a `SharedArrangement` kept by the engine for a base
relation and shared by every dataflow; `EnterArranged` (in `enter.py`) brings an outer
arrangement into an iteration scope (times gain a coordinate, 0).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from differential.batch import (
    Column,
    Updates,
    compact_uniform,
    concat,
    consolidate,
    joined_with,
)
from differential.dataflow import Operator
from differential.time import Time
from differential.trace.batch import Batch, Hashes
from differential.trace.cursor import (
    Entry,
    FewKeys,
    combine,
    count_in,
    lookup_batch,
    lookup_entries,
    python_entries,
)
from differential.trace.spine import Spine

Owner = npt.NDArray[np.intp]


class Arranged(Operator, ABC):
    """An arrangement readable by joins and reduces in `scope`."""

    key_arity: int
    dtypes: tuple[np.dtype, ...]

    @abstractmethod
    def delta(self, time: Time) -> Batch | None:
        """The batch of updates at exactly `time`, if any arrived then."""

    @abstractmethod
    def lookup(
        self,
        keys: Sequence[Column],
        hashes: Hashes,
        time: Time,
        include_delta: bool,
        columns: Sequence[int] | None = None,
    ) -> tuple[Owner, Updates]:
        """Entries under the query keys, with (`include_delta`) or without the delta at `time`.

        `columns` picks the columns gathered (default all): a caller that needs
        only times and diffs, or only the values, does not copy the keys.
        """

    def lookup_joined(
        self,
        keys: Sequence[Column],
        hashes: Hashes,
        time: Time,
        include_delta: bool,
        columns: Sequence[int] | None,
        at: Time,
    ) -> tuple[Owner, Updates]:
        """`lookup` with every found time joined with `at` (`t ⊔ at`), for a reader that
        joins them with `at` anyway (a delta query's prefixes all at one time, ADR 0086):
        entries at or before `at` are found at `at`, one repeated time, not a time a row."""
        owner, found = self.lookup(keys, hashes, time, include_delta, columns)
        return owner, found.with_times(joined_with(found.times, at))

    def lookup_entries(
        self, keys: FewKeys, time: Time, include_delta: bool, limit: int
    ) -> list[Entry] | None:
        """`lookup` for a few keys, answered as Python entries `(query row, time,
        values, diff)`, or None when they are more than `limit`: for steps that work
        on lists while they are short."""
        if not len(keys):
            return []
        columns, hashes = keys.columns(self.dtypes[: self.key_arity])
        owner, found = self.lookup(columns, hashes, time, include_delta)
        return python_entries(owner, found, self.key_arity) if len(owner) <= limit else None

    def batch_entries(
        self, keys: FewKeys, time: Time, include_delta: bool, limit: int
    ) -> list[Entry] | None:
        """`lookup_entries` reading what `lookup` reads: an arrangement that leaves a
        few rows unarranged for readers by key arranges (and merges) them first, so
        that history that cancels is not met. For a reader whose work grows with
        every entry it meets (a join's products), not only with the keys."""
        return self.lookup_entries(keys, time, include_delta, limit)

    @abstractmethod
    def entries(self, time: Time, include_delta: bool) -> Updates:
        """Every entry `lookup` may find, under any key, consolidated (a scan)."""

    @abstractmethod
    def count(self, hashes: Hashes, time: Time, include_delta: bool) -> Owner:
        """Entries per query key (an upper bound for mixed hashes), as `lookup` sees them."""

    @abstractmethod
    def visible(self, time: Time, include_delta: bool) -> int:
        """How many entries `lookup` may see (0: it finds nothing for any key)."""

    def has_delta(self, time: Time) -> bool:
        """Whether updates arrived at exactly `time` (without arranging them)."""
        return self.delta(time) is not None

    def changes(self, time: Time) -> tuple[Updates, Hashes] | None:
        """The updates at exactly `time` and their key hashes, arranged or not:
        for readers that scan them rather than look keys up in them."""
        batch = self.delta(time)
        return None if batch is None else (batch.updates(), batch.hashes)

    def updates_at(self, time: Time) -> Updates | None:
        """The updates at exactly `time` (as `changes`), without their key hashes."""
        found = self.changes(time)
        return None if found is None else found[0]

    def history_before(self, time: Time) -> bool:
        """Whether every entry (the delta at `time` included) is at a time `<= time`.

        Conservatively False where unknown.
        """
        return False

    def empty(self, columns: Sequence[int] | None = None) -> Updates:
        dtypes = self.dtypes if columns is None else [self.dtypes[i] for i in columns]
        return Updates.empty(len(dtypes), self.scope.depth, dtypes)


class BatchesArranged(Arranged):
    """An arrangement read as the list of batches a reader at a time sees: the
    trace, and the pending batch when it is visible (`seen`)."""

    @abstractmethod
    def seen(self, time: Time, include_delta: bool) -> list[Batch]:
        """The batches `lookup` reads at `time`, with or without the delta at `time`."""

    def lookup(
        self,
        keys: Sequence[Column],
        hashes: Hashes,
        time: Time,
        include_delta: bool,
        columns: Sequence[int] | None = None,
    ) -> tuple[Owner, Updates]:
        parts = self._found(keys, hashes, time, include_delta, columns)
        if not parts:
            return np.empty(0, dtype=np.intp), self.empty(columns)
        return combine(parts)

    def lookup_joined(
        self,
        keys: Sequence[Column],
        hashes: Hashes,
        time: Time,
        include_delta: bool,
        columns: Sequence[int] | None,
        at: Time,
    ) -> tuple[Owner, Updates]:
        """Each batch's found times joined with `at` before the parts are put together:
        a batch at one time at or before `at` adds no time column, so parts of batches of
        different rounds concatenate into one repeated time, not a time a row; and the
        diffs of each part, where they agree (a small batch's ones), into one diff."""
        parts = self._found(keys, hashes, time, include_delta, columns)
        if not parts:
            return np.empty(0, dtype=np.intp), self.empty(columns)
        for i, (owner, found) in enumerate(parts):  # (each part's own times freed at once)
            times, diffs = compact_uniform(joined_with(found.times, at), found.diffs, 2)
            parts[i] = owner, Updates(found.columns, times, diffs)
        return combine(parts)

    def _found(
        self,
        keys: Sequence[Column],
        hashes: Hashes,
        time: Time,
        include_delta: bool,
        columns: Sequence[int] | None,
    ) -> list[tuple[Owner, Updates]]:
        """`lookup`'s parts, one for each batch seen that holds a query key."""
        batches = self.seen(time, include_delta)
        if columns is not None and not columns and (trace := self.trace()) is not None:
            return trace.sifted(batches, keys, hashes, columns)
        found = (lookup_batch(b, keys, hashes, columns) for b in batches)
        return [part for part in found if part is not None]

    def trace(self) -> Spine | None:
        """The trace whose batches `seen` lists (the pending one aside), if any."""
        return None

    def lookup_entries(
        self, keys: FewKeys, time: Time, include_delta: bool, limit: int
    ) -> list[Entry] | None:
        return self.batch_entries(keys, time, include_delta, limit)

    def batch_entries(
        self, keys: FewKeys, time: Time, include_delta: bool, limit: int
    ) -> list[Entry] | None:
        found: list[Entry] = []
        for batch in self.seen(time, include_delta):
            if not lookup_entries(batch, keys, found, limit):
                return None
        return found

    def entries(self, time: Time, include_delta: bool) -> Updates:
        return consolidate(
            concat([self.empty(), *(b.updates() for b in self.seen(time, include_delta))])
        )

    def count(self, hashes: Hashes, time: Time, include_delta: bool) -> Owner:
        return count_in(self.seen(time, include_delta), hashes)

    def visible(self, time: Time, include_delta: bool) -> int:
        return sum(len(b) for b in self.seen(time, include_delta))
