"""Base relations' arrangements, kept by the engine and read by many dataflows.

Layer: differential (operators). Imports `differential.dataflow`, `trace` and
`operators.arrange`.

A `SharedArrangement` holds one input's updates by one key, across epochs; each
dataflow that reads it owns an `ImportOp`, the `Arranged` view of it in the
dataflow's root scope, holding a `TraceHandle` that keeps compaction from passing
the times the dataflow may still ask about.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from differential.batch import Updates
from differential.dataflow import Scope
from differential.operators.arrange import BatchesArranged
from differential.time import Antichain, Time
from differential.trace.batch import Batch, Description, Hashes
from differential.trace.cursor import Entry, FewKeys, lookup_entries
from differential.trace.spine import Spine, TraceHandle


class SharedArrangement:
    """A base relation's arrangement by one key, kept by the engine, read by many dataflows.

    Updates of epoch `e` sit in `pending` while dataflows run epoch `e`, then
    `seal` appends them to the spine. Readers hold `TraceHandle`s; the spine
    compacts to the lower envelope of their frontiers.
    """

    def __init__(self, key_arity: int, dtypes: Sequence[np.dtype], name: str = "") -> None:
        self.name = name
        self.key_arity = key_arity
        self.dtypes = tuple(np.dtype(d) for d in dtypes)
        self.spine = Spine(key_arity, self.dtypes, 1)
        self.pending: Batch | None = None
        self.pending_epoch: int | None = None

    def stage(self, updates: Updates, epoch: int, hashes: Hashes | None = None) -> Batch:
        """Set the updates of `epoch` (times `(epoch,)`) as the pending batch (`hashes`:
        their key hashes, when known)."""
        description = Description(Antichain([(epoch,)]), Antichain([(epoch + 1,)]), Antichain())
        built = Batch.build(updates, self.key_arity, description, hashes=hashes)
        return self.stage_batch(built, epoch)

    def stage_batch(self, batch: Batch, epoch: int) -> Batch:
        """Set an arranged batch of `epoch` (keyed like this arrangement, described as
        `stage` describes it) as the pending batch: one that another arrangement of
        the same key staged already (`Input.stage`)."""
        self.pending = batch
        self.pending_epoch = epoch
        return batch

    def unstage(self) -> None:
        self.pending, self.pending_epoch = None, None

    def seal(self, next_epoch: int) -> None:
        if self.pending is not None:
            self.spine.append(self.pending)
            self.pending = None
            self.pending_epoch = None
        self.spine.advance(Antichain([(next_epoch,)]))

    def handle(self, epoch: int) -> TraceHandle:
        return self.spine.handle(Antichain([(epoch,)]))

    @property
    def readers(self) -> int:
        return len(self.spine.handles)

    def held(self) -> tuple[int, int]:
        """`(updates, batches)` held now, the pending batch included; measuring merges
        nothing."""
        pending = self.pending is not None
        return len(self), self.spine.held_batches + pending

    def contents(self) -> Updates:
        """Every update ever sealed (compacted), times included."""
        return self.spine.updates()

    def __len__(self) -> int:
        return len(self.spine) + (len(self.pending) if self.pending is not None else 0)


class ImportOp(BatchesArranged):
    """A dataflow's view of a `SharedArrangement` in its root scope.

    The dataflow is built between epochs; at its first time `start` the whole
    trace arrives as one delta (times advanced to `start`), after that each
    epoch's pending batch does.
    """

    name = "import"

    def __init__(self, scope: Scope, shared: SharedArrangement, start: int) -> None:
        super().__init__(scope)
        self.shared = shared
        self.key_arity = shared.key_arity
        self.dtypes = shared.dtypes
        self.start = start
        self.delivered: int = start - 1
        desc = Description(Antichain([(start,)]), Antichain([(start + 1,)]), Antichain())
        self.snapshot: Batch | None = shared.spine.snapshot((start,), desc)
        # Last: a snapshot that raises (an interrupt in its merge) must leave no claim
        # that no dataflow holds, or the arrangement would never compact past `start`.
        self.handle = shared.handle(start)

    def pending(self, prefix: Time) -> Iterable[Time]:
        if self.snapshot is not None:
            return [(self.start,)] if self.delivered < self.start else ()
        e = self.shared.pending_epoch
        if e is not None and e > self.delivered:
            return [(e,)]
        return ()

    def ready(self, time: Time) -> bool:
        return time in list(self.pending(()))

    def step(self, time: Time) -> None:
        self.delivered = time[0]

    def delta(self, time: Time) -> Batch | None:
        if self.snapshot is not None:
            return self.snapshot if time == (self.start,) else None
        if self.shared.pending_epoch == time[0]:
            return self.shared.pending
        return None

    def seen(self, time: Time, include_delta: bool) -> list[Batch]:
        if self.snapshot is not None:
            return [self.snapshot] if include_delta else []
        pending = self.shared.pending
        visible = pending is not None and (include_delta or self.shared.pending_epoch != time[0])
        return [*self.shared.spine.batches, *([pending] if visible and pending else [])]

    def trace(self) -> Spine | None:
        return self.shared.spine if self.snapshot is None else None

    def _pending_seen(self, time: Time, include_delta: bool) -> Batch | None:
        """The pending batch, if a reader at `time` sees it (not while snapshotting)."""
        pending = self.shared.pending
        if pending is not None and (include_delta or self.shared.pending_epoch != time[0]):
            return pending
        return None

    def lookup_entries(
        self, keys: FewKeys, time: Time, include_delta: bool, limit: int
    ) -> list[Entry] | None:
        """Without arranging the few rows waiting in the trace (read by key)."""
        if self.snapshot is not None:
            return super().lookup_entries(keys, time, include_delta, limit)
        found: list[Entry] = []
        if not self.shared.spine.find_entries(keys, found, limit):
            return None
        pending = self._pending_seen(time, include_delta)
        if pending is not None and not lookup_entries(pending, keys, found, limit):
            return None
        return found

    def visible(self, time: Time, include_delta: bool) -> int:
        if self.snapshot is not None:
            return super().visible(time, include_delta)
        pending = self._pending_seen(time, include_delta)
        return len(self.shared.spine) + (len(pending) if pending is not None else 0)

    def history_before(self, time: Time) -> bool:
        if self.snapshot is not None:  # the whole trace, at `start`
            return self.start <= time[0]
        epoch = self.shared.pending_epoch
        return self.shared.spine.all_at_or_before(time) and (epoch is None or epoch <= time[0])

    def advance(self, epoch: int) -> None:
        self.snapshot = None
        self.handle.set_frontier(Antichain([(epoch,)]))

    def release(self) -> None:
        self.handle.release()

    def describe(self) -> str:
        return f"import({self.shared.name})"
