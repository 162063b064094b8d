"""Arrangements crossing scopes or leaving the arranged form.

Layer: differential (operators). Imports `differential.operators.arrange`.

`EnterArranged` brings an outer arrangement into an iteration scope (times
gain a coordinate, 0); `AsCollection` turns an arrangement's deltas back into
a stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from differential.batch import Column, Updates, entered_times, joined_with
from differential.dataflow import Operator, Scope, Stream
from differential.operators.arrange import Arranged, Owner
from differential.time import Time
from differential.trace.batch import Batch, Hashes
from differential.trace.cursor import Entry, FewKeys


class EnterArranged(Arranged):
    """An outer arrangement seen from an iteration scope: times `t` become `(t, 0)`."""

    name = "enter_arranged"

    def __init__(self, scope: Scope, outer: Arranged) -> None:
        super().__init__(scope)
        self.outer = outer
        self.key_arity = outer.key_arity
        self.dtypes = outer.dtypes
        self.done: Time | None = None

    def pending(self, prefix: Time) -> Iterable[Time]:
        if len(prefix) != self.scope.depth - 1 or prefix == self.done:
            return ()
        return [(*prefix, 0)] if self.outer.has_delta(prefix) else ()

    def ready(self, time: Time) -> bool:
        return time[-1] == 0 and self.done != time[:-1] and self.outer.has_delta(time[:-1])

    def step(self, time: Time) -> None:
        self.done = time[:-1]

    def delta(self, time: Time) -> Batch | None:
        if time[-1] != 0:
            return None
        batch = self.outer.delta(time[:-1])
        return None if batch is None else _lift_batch(batch)

    def lookup(
        self,
        keys: Sequence[Column],
        hashes: Hashes,
        time: Time,
        include_delta: bool,
        columns: Sequence[int] | None = None,
    ) -> tuple[Owner, Updates]:
        include = include_delta or time[-1] != 0
        owner, ups = self.outer.lookup(keys, hashes, time[:-1], include, columns)
        return owner, _lift(ups)

    def lookup_joined(
        self,
        keys: Sequence[Column],
        hashes: Hashes,
        time: Time,
        include_delta: bool,
        columns: Sequence[int] | None,
        at: Time,
    ) -> tuple[Owner, Updates]:
        """The outer lookup joined with `at` less its last coordinate, then entered and
        joined with `at` (entered times are at iteration 0, so that is `at`'s)."""
        include = include_delta or time[-1] != 0
        owner, ups = self.outer.lookup_joined(keys, hashes, time[:-1], include, columns, at[:-1])
        return owner, ups.with_times(joined_with(entered_times(ups.times), at))

    def lookup_entries(
        self, keys: FewKeys, time: Time, include_delta: bool, limit: int
    ) -> list[Entry] | None:
        include = include_delta or time[-1] != 0
        found = self.outer.lookup_entries(keys, time[:-1], include, limit)
        return None if found is None else [(o, (*t, 0), v, d) for o, t, v, d in found]

    def batch_entries(
        self, keys: FewKeys, time: Time, include_delta: bool, limit: int
    ) -> list[Entry] | None:
        include = include_delta or time[-1] != 0
        found = self.outer.batch_entries(keys, time[:-1], include, limit)
        return None if found is None else [(o, (*t, 0), v, d) for o, t, v, d in found]

    def entries(self, time: Time, include_delta: bool) -> Updates:
        return _lift(self.outer.entries(time[:-1], include_delta or time[-1] != 0))

    def count(self, hashes: Hashes, time: Time, include_delta: bool) -> Owner:
        return self.outer.count(hashes, time[:-1], include_delta or time[-1] != 0)

    def visible(self, time: Time, include_delta: bool) -> int:
        return self.outer.visible(time[:-1], include_delta or time[-1] != 0)

    def history_before(self, time: Time) -> bool:
        # Entries come in at iteration 0 of their outer time.
        return self.outer.history_before(time[:-1])

    def describe(self) -> str:
        return f"enter({self.outer.describe()})"

    def inputs(self) -> Sequence[Operator | Stream]:
        return (self.outer,)


def _lift(updates: Updates) -> Updates:
    return updates.with_times(entered_times(updates.times))


def _lift_batch(batch: Batch) -> Batch:
    return Batch(
        batch.hashes,
        batch.held,
        batch.key_arity,
        entered_times(batch.times),
        batch.diffs,
        batch.description,
        batch.cache.for_other_times(),  # same keys, same index; times of its own
        batch.packed_keys,
        batch.narrowed or (),  # (decided: the outer's columns, shared, are not copied)
    )


class AsCollection(Operator):
    """The updates of an arrangement as a stream again (each delta, once)."""

    name = "as_collection"

    def __init__(self, arranged: Arranged) -> None:
        super().__init__(arranged.scope)
        self.arranged = arranged
        self.output = Stream(arranged.scope, arranged.dtypes, arranged.describe(), producer=self)
        self.sent: Time | None = None

    def ready(self, time: Time) -> bool:
        return self.sent != time and self.arranged.has_delta(time)

    def step(self, time: Time) -> None:
        batch = self.arranged.delta(time)
        self.sent = time
        if batch is not None:
            self.output.send(batch.updates())

    def inputs(self) -> Sequence[Operator | Stream]:
        return (self.arranged,)
