"""Arranging a stream inside a dataflow (`ArrangeOp`): its updates queued by time,
the current time's kept as they came until read, earlier ones deferred behind a
private trace and arranged when something reads them.

Layer: differential (operators). Imports `differential.dataflow`, `trace`.

What readers see of an arrangement (`Arranged`, the delta and lookups before or
after it) is `arranged.py`'s; its names are imported from here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from differential.batch import Updates, concat, consolidate
from differential.dataflow import Operator, Receiver, Stream, TimeQueue
from differential.operators.arranged import Arranged as Arranged
from differential.operators.arranged import BatchesArranged as BatchesArranged
from differential.operators.arranged import Owner as Owner
from differential.operators.counted import CountedInput
from differential.time import Antichain, Time, join_times, le, uniform_times
from differential.trace.batch import Batch, Description, Hashes, build_parts, key_hash
from differential.trace.cursor import Entry, FewKeys, lookup_entries, scan_entries
from differential.trace.keyset import KeySet
from differential.trace.spine import Spine
from differential.tuning import TUNING


class ArrangeOp(BatchesArranged):
    """Arranges a stream by its first `key_arity` columns into a private trace."""

    name = "arrange"
    holds_trace = True

    def __init__(self, stream: Stream, key_arity: int) -> None:
        super().__init__(stream.scope)
        self.key_arity = key_arity
        self.dtypes = stream.dtypes
        self.queue = TimeQueue()
        self.source = stream
        stream.connect(self.receive)
        self.spine = Spine(key_arity, self.dtypes, stream.scope.depth)
        # The updates at the current time, as they came (parts: concatenated when read
        # unarranged), arranged into a batch only when read.
        self.pending_parts: list[Updates] | None = None
        self.pending_time: Time | None = None
        self._pending_batch: Batch | None = None
        # Earlier times' updates nobody has read through the trace yet, oldest first.
        self.deferred: list[tuple[Batch | Updates, Time]] = []
        self._deferred_latest: Time | None = None  # their latest time
        # Whether settling advances and consolidates rounds (`_settle_compacted`): in a
        # totally ordered scope, until a settle finds too little to consolidate.
        self.compacting: bool | None = None  # decided at the first settle (`_compacts`)
        self._compacted = 0  # entries the trace held after its last compaction there
        self._settles = self._settled_rows = 0  # settles compacted, and the rows they took
        # Rows counted in the reading distinct's key set while nobody reads the trace
        # (`count_into`, `operators.counted`, ADR 0067).
        self.counted: CountedInput | None = None
        self.unread = False  # whether nobody reads its trace (`keep_nothing`)

    def keep_nothing(self) -> None:
        """Hold no time's updates past its step: no reader looks its trace up again
        (`operators.unread`, ADR 0077)."""
        self.unread = True

    def count_into(self, keys: KeySet) -> None:
        """Let the growing distinct reading this arrangement count its rows in its key
        set while the scope compacts rounds (`Tuning.counted_inputs`; off: reference)."""
        if TUNING.counted_inputs and self.key_arity == len(self.dtypes):
            self.counted = CountedInput(keys)

    def receive(self, updates: Updates) -> None:
        """Queue the input's updates, but those the distinct's key set counts at once."""
        counted = self.counted if self._compacts() else None
        for part in [updates] if counted is None else counted.arrive(updates, self):
            self.queue.push(part)

    def release(self) -> None:
        """The counting distinct admitted this time's rows: count them now, not later
        (if it alone reads them: another reader may come after it)."""
        if self.counted is not None and self._compacts() and self.counted.alone(self):
            self.seal()

    def pending(self, prefix: Time) -> Iterable[Time]:
        return self.queue.times()

    def ready(self, time: Time) -> bool:
        return self.queue.has(time)

    def step(self, time: Time) -> None:
        self.seal()
        parts = self.queue.pop_parts(time)
        if not parts:
            return
        self.pending_parts, self.pending_time = parts, time

    @property
    def pending_updates(self) -> Updates | None:
        """The current time's updates, unarranged, in one `Updates`."""
        parts = self.pending_parts
        if parts is not None and len(parts) > 1:
            self.pending_parts = parts = [concat(parts)]
        return parts[0] if parts is not None else None

    @property
    def pending_batch(self) -> Batch | None:
        """The current time's updates, arranged (built on first use)."""
        if self._pending_batch is None and self.pending_parts is not None:
            assert self.pending_time is not None
            self._pending_batch = _arrange(self.pending_parts, self.key_arity, self.pending_time)
        return self._pending_batch

    def seal(self) -> None:
        """Move the current time's updates behind the trace, still unarranged if unread."""
        if self.pending_parts is not None:
            assert self.pending_time is not None
            batch = self._pending_batch
            unread = batch if batch is not None else self.pending_updates
            assert unread is not None
            time, self.pending_parts, self.pending_time = self.pending_time, None, None
            self._pending_batch = None
            self.defer(unread, time, time)

    def defer(self, updates: Batch | Updates, first: Time, latest: Time) -> None:
        """Updates at times from `first` to `latest`, after every update held, moved
        behind the trace unarranged: one time's by `seal`, many by fused rounds."""
        self.seal()
        if self.unread:
            return
        self.deferred.append((updates, first))
        self._deferred_latest = join_times(self._deferred_latest, latest)
        if len(self.deferred) > TUNING.deferred:  # a stream nobody reads: bound what waits
            self._coalesce()
        elif self._compacts():
            waiting = sum(len(part) for part, _ in self.deferred)
            if waiting > max(TUNING.deferred_rows, len(self.spine)):
                self._settle()  # consolidated as it goes: see `_settle_compacted`

    def _coalesce(self) -> None:
        """Concatenate the deferred parts into one, or arrange them once they are many."""
        parts = [i.updates() if isinstance(i, Batch) else i for i, _ in self.deferred]
        # `settle` reads only the first time (the arranged batch's lower bound).
        self.deferred = [(concat(parts), self.deferred[0][1])]
        if len(self.deferred[0][0]) > max(TUNING.deferred_rows, len(self.spine)):
            self._settle()

    def settle(self) -> Spine:
        """The trace, with every deferred time arranged into it (before any read of it).

        A time's updates are arranged when something reads them: its delta, or the
        trace. A one-shot dataflow whose arrangement only serves later epochs (a
        join's side that the other side's future changes would look up) never
        sorts them. Rows counted in a key set go into the trace at the first read.
        """
        if self.counted is not None and self._compacts():
            self._count()
            self.counted.into(self.spine)
            self.counted = None
        return self._settle()

    def _settle(self) -> Spine:
        """`settle` of the deferred rows alone (counted ones stay in the key set)."""
        latest = self._deferred_latest
        if latest is not None and self._compacts() and self.counted is not None:
            self._count()  # (the rows whose key is not in the set yet wait)
            return self.spine
        if latest is not None and self._compacts():
            self._settle_compacted(latest)
        elif len(self.deferred) == 1 and isinstance(self.deferred[0][0], Batch):
            self._advance(latest)
            self.spine.append(self.deferred[0][0])
        elif self.deferred:  # one sort for all of them, not one batch (and merge) per time
            self._advance(latest)
            parts = [i.updates() if isinstance(i, Batch) else i for i, _ in self.deferred]
            lower = Antichain([self.deferred[0][1]])
            self.spine.insert(concat(parts), lower, Antichain(), latest)  # a few rows wait unsorted
        self.deferred, self._deferred_latest = [], None
        return self.spine

    def _advance(self, latest: Time | None) -> None:
        """Rounds settled unconsolidated in a totally ordered scope: no reader asks about
        a time before `latest` again (as in `_settle_compacted`), so the trace's merges
        advance their times to it and keep one (`Tuning.advance_unsorted`, ADR 0078)."""
        if latest is not None and TUNING.advance_unsorted and self.scope.compacts_rounds:
            self.spine.default_since = Antichain([latest])

    def _compacts(self) -> bool:
        if self.compacting is None:  # the scope's order is fixed before it runs
            self.compacting = self.scope.compacts_rounds
            if not self.compacting:
                self.counted = None  # (counting stands for compacted rounds only)
        return self.compacting

    def _count(self) -> None:
        """Count the deferred rows in the key set; those whose key it lacks wait."""
        assert self.counted is not None
        if self._deferred_latest is not None:
            self.deferred = self.counted.take(self.deferred, self._deferred_latest)
            self._deferred_latest = self._deferred_latest if self.deferred else None

    def _settle_compacted(self, latest: Time) -> None:
        """`settle` in a totally ordered scope (`Scope.totally_ordered`): no reader asks
        about a time before `latest` again (the deferred updates are at times up to it,
        the scheduler is at it or later), so their times advance to `latest` and equal
        rows consolidate, in each new batch and in every merge of the trace (its
        `since`): a `distinct`'s input holds about one entry per distinct row, not one
        per derivation and round (ADR 0062). They are arranged a part at a time (at
        most the trace's size, or `TUNING.deferred_rows`), so that sorting one large
        round needs no copy of all of it, each part consolidated first (integer rows
        at one time pack into one value each: a value sort, no permutation, and the
        batch is then built from far fewer rows, usually in its order already); the
        trace compacts once it has doubled.

        Sorting pays only where rows repeat: once the trace holds more than
        `1 - TUNING.compact_gain` of the rows settled so far, after two settles (each
        row derived about once, as in a closure), the arrangement goes back to
        deferring them unsorted."""
        self.spine.default_since = Antichain([latest])
        lower = Antichain([self.deferred[0][1]])
        parts = [item.updates() if isinstance(item, Batch) else item for item, _ in self.deferred]
        self.deferred = []
        self._settles += 1
        self._settled_rows += sum(len(part) for part in parts)
        while parts:
            part = parts.pop(0)
            size = max(TUNING.deferred_rows, len(self.spine), 1)
            for lo in range(0, len(part), size):
                columns = tuple(c[lo : lo + size] for c in part.columns)
                diffs = part.diffs[lo : lo + size]
                piece = consolidate(Updates(columns, uniform_times(latest, len(diffs)), diffs))
                self.spine.insert(piece, lower, Antichain(), latest)
                if len(self.spine) > 2 * self._compacted + TUNING.few:
                    self.spine.compact()
                    self._compacted = len(self.spine)
            del part
        settled = self._settled_rows  # (0 while only empty updates were deferred)
        if self._settles > 1 and len(self.spine) > (1 - TUNING.compact_gain) * settled > 0:
            self.compacting = False  # (a first round has no repeats: the base rules' rows)

    # -- the protocol of fused rounds (`chain`, `later_rounds`, `chain_joins`) -------------

    @property
    def receiver(self) -> Receiver:
        """What the input stream sends to (a stream connected here feeds this queue)."""
        return self.receive

    def waiting_only(self, time: Time) -> list[Updates] | None:
        """The updates queued at `time`, when no other time is queued (None: one is)."""
        buckets = self.queue.buckets
        if not set(buckets) <= {time}:
            return None
        return buckets.get(time, [])

    def take_waiting(self, time: Time) -> None:
        """Drop the updates queued at `time`: fused rounds take them on themselves."""
        self.queue.buckets.pop(time, None)

    def enqueue(self, updates: Updates) -> None:
        """Queue updates for the scheduler, as the input stream would."""
        self.queue.push(updates)

    def entries_of(self, keys: FewKeys, found: list[Entry]) -> None:
        """Append every entry under `keys` (any time, deferred ones arranged first)."""
        self.settle().find_entries(keys, found)

    def lookup_entries(
        self, keys: FewKeys, time: Time, include_delta: bool, limit: int
    ) -> list[Entry] | None:
        """Without arranging the few rows that wait in the trace, nor this time's
        updates while they are unarranged (scanned)."""
        found: list[Entry] = []
        if not self.settle().find_entries(keys, found, limit):
            return None
        if self.pending_updates is None or not (include_delta or self.pending_time != time):
            return found
        if self._pending_batch is not None or len(self.pending_updates) > TUNING.few:
            pending = self.pending_batch
            assert pending is not None
            return found if lookup_entries(pending, keys, found, limit) else None
        scan_entries(self.pending_updates, self.key_arity, keys, found)
        return found if len(found) <= limit else None

    def delta(self, time: Time) -> Batch | None:
        return self.pending_batch if self.pending_time == time else None

    def has_delta(self, time: Time) -> bool:
        return self.pending_time == time and self.pending_parts is not None

    def changes(self, time: Time) -> tuple[Updates, Hashes] | None:
        if not self.has_delta(time):
            return None
        if self._pending_batch is not None:
            return self._pending_batch.updates(), self._pending_batch.hashes
        assert self.pending_updates is not None
        return self.pending_updates, _hashes(self.pending_updates, self.key_arity)

    def updates_at(self, time: Time) -> Updates | None:
        if not self.has_delta(time):
            return None
        batch = self._pending_batch
        return batch.updates() if batch is not None else self.pending_updates

    def seen(self, time: Time, include_delta: bool) -> list[Batch]:
        pending = self.pending_batch if include_delta or self.pending_time != time else None
        return [*self.settle().batches, *([pending] if pending is not None else [])]

    def trace(self) -> Spine:
        return self.spine

    def history_before(self, time: Time) -> bool:
        """Whether every entry is at a time `<= time` (deferred times count, unarranged)."""
        latest = self._deferred_latest
        counted = self.counted.latest if self.counted is not None else None
        return (
            self.spine.all_at_or_before(time)
            and (latest is None or le(latest, time))
            and (counted is None or le(counted, time))
            and self.pending_time in (None, time)
        )

    def visible(self, time: Time, include_delta: bool) -> int:
        """An upper bound (deferred updates are not consolidated yet); 0 when exact."""
        deferred = sum(len(item) for item, _ in self.deferred)
        deferred += len(self.counted) if self.counted is not None else 0
        extra = include_delta or self.pending_time != time
        pending = self._pending_size() if extra else 0
        return len(self.spine) + deferred + pending

    def advance(self, epoch: int) -> None:
        """Compact what epoch `epoch` made final, the updates nobody read (deferred)
        included: an arrangement only the other side's changes would read must not
        keep every epoch's updates (ADR 0040)."""
        self.seal()
        self.spine.default_since = Antichain([(epoch,) + (0,) * (self.scope.depth - 1)])
        if self.spine.overgrown(sum(len(part) for part, _ in self.deferred)):
            self.settle()
            self.spine.compact()

    def arranged_size(self) -> tuple[int, int]:
        """Updates and batches held, unarranged parts counted as they wait (nothing is
        arranged or merged to measure them); rows counted in a key set are its own."""
        deferred = sum(len(part) for part, _ in self.deferred)
        size = len(self.spine) + deferred + self._pending_size()
        held = self.spine.held_batches + len(self.deferred) + (self.pending_parts is not None)
        return size, held

    def _pending_size(self) -> int:
        return sum(map(len, self.pending_parts)) if self.pending_parts is not None else 0

    def describe(self) -> str:
        return f"arrange(key={self.key_arity} of {len(self.dtypes)})"

    def inputs(self) -> Sequence[Operator | Stream]:
        return (self.source,)


def _arrange(parts: list[Updates], key_arity: int, time: Time) -> Batch:
    """One time's updates, as they came in parts, arranged (`build_parts`: identity-keyed
    integer rows packed part by part, not concatenated first)."""
    description = Description(Antichain([time]), Antichain(), Antichain())
    if len(parts) == 1:
        return Batch.build(parts[0], key_arity, description)
    return build_parts(parts, key_arity, description)


def _hashes(updates: Updates, key_arity: int) -> Hashes:
    if key_arity:
        return key_hash(updates.columns[:key_arity])
    return np.zeros(len(updates), dtype=np.int64)
