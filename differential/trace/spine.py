"""The spine: a trace as a list of batches of geometrically growing size.

Layer: differential (trace).

Invariant, whenever a reader sees the batches: they are ordered oldest to
newest and, in a trace of more than `TUNING.small_trace` entries, each batch is more
than twice the size of the one after it, except for a tail of at most
`TUNING.small_batches` batches of at most `TUNING.tail` entries each; so a trace of `n`
entries has O(log n) batches and each entry takes part in O(log n) merges
(amortized merging; differential-dataflow spreads that work with fuel, we do it
when a reader next looks). A smaller trace holds at most `TUNING.small_batches` batches.
Appends only queue batches: nothing merges until someone reads (or
`TUNING.lazy_batches` wait).

Compaction: readers hold `TraceHandle`s, each with a frontier saying how far
back it may still look. The trace's `since` is the lower envelope of those
frontiers; every merge advances times by it and consolidates, so history
before `since` collapses while every accumulation a reader can ask for (at
times beyond its own frontier) is unchanged.

Merges happen when someone reads, so a trace nobody reads (a join's side that
only the other side's changes would look up) would keep every update it was
ever given. Its owner therefore calls `advance` once the frontier has moved
(an epoch closed): a trace that holds more than twice what its last full
compaction left, plus `TUNING.few`, merges everything into one batch compacted
to `since`. What a trace holds thus stays within a constant factor of its
compacted contents however often they change, and each compaction is paid for
by at least as many updates as it reads (ADR 0040).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from differential.batch import Column, Updates, concat, consolidate, run_starts, uniform
from differential.time import Antichain, Time, join_times, le, less_equal, uniform_times
from differential.trace.batch import Batch, Description, Hashes, key_hash
from differential.trace.cursor import Entry, FewKeys, Index, lookup_batch, lookup_entries
from differential.trace.fuel import Merging
from differential.trace.recent import Recent
from differential.trace.runs import Known, merge
from differential.trace.sift import Sieve
from differential.tuning import TUNING


class TraceHandle:
    """A reader's claim on a trace: holds compaction back to `frontier`."""

    def __init__(self, spine: Spine, frontier: Antichain) -> None:
        self.spine = spine
        self.frontier = frontier
        self.released = False

    def set_frontier(self, frontier: Antichain) -> None:
        self.frontier = frontier

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.spine.released_handle(self)


class Spine:
    """A trace of arranged batches, keyed by the first `key_arity` columns."""

    def __init__(self, key_arity: int, dtypes: Sequence[np.dtype], depth: int) -> None:
        self.key_arity = key_arity
        self.dtypes = tuple(np.dtype(d) for d in dtypes)
        self.depth = depth
        self._batches: list[Batch] = []
        self._unmerged = 0  # batches appended since the spine last restored its invariant
        self._appended = 0  # entries appended since then (they bring merges fuel)
        self._merging: list[Merging] = []  # merges in progress, inputs in `_batches`
        # coordinate-wise maximum of every time ever appended (None: nothing yet)
        self.latest: Time | None = None
        self.handles: list[TraceHandle] = []
        self.default_since = Antichain([(0,) * depth])
        self._recent = Recent()
        self._sieve: Sieve | None = None  # built on first use (`sieve`), then kept up
        # Updates held after the last full compaction (None: not measured yet): the
        # trace compacts once it holds more than twice that (`overgrown`).
        self._settled: int | None = None
        self._compacting: Merging | None = None  # a fueled compaction under way
        self._held_at_advance = 0  # updates held at the last `advance` that compacted
        self._known: Known | None = None  # a merge's order found ahead (`expect`)

    # -- readers and compaction -------------------------------------------------

    def handle(self, frontier: Antichain | None = None) -> TraceHandle:
        h = TraceHandle(self, frontier or Antichain([(0,) * self.depth]))
        self.handles.append(h)
        return h

    def released_handle(self, handle: TraceHandle) -> None:
        """Forget a reader that released its handle (its frontier holds nothing back)."""
        self.handles.remove(handle)

    @property
    def since(self) -> Antichain:
        """The lower envelope of the readers' frontiers (or the default)."""
        if not self.handles:
            return self.default_since
        envelope = Antichain()
        for h in self.handles:
            for t in h.frontier:
                envelope.insert(t)
        return envelope

    # -- writing ----------------------------------------------------------------

    def expect(self, known: Known | None) -> None:
        """An order found ahead for a compaction at the seal (`trace.runs.Known`)."""
        self._known = known

    def insert(
        self, updates: Updates, lower: Antichain, upper: Antichain, latest: Time | None = None
    ) -> None:
        """Add `updates`: a few rows of integer columns wait unarranged (`Recent`)
        until a reader needs batches; others are arranged into a new batch now.
        `latest`: the coordinate-wise maximum of their times, when the caller knows it."""
        if len(updates) == 0:
            return
        if len(updates) <= TUNING.few and self._recent.fits(updates.columns, len(updates)):
            self._recent.add(updates, lower)
            if latest is None:
                latest = tuple(updates.times.max(axis=1).tolist())
            self.latest = join_times(self.latest, latest)
            return
        self._arrange_recent()
        batch = Batch.build(updates, self.key_arity, Description(lower, upper, Antichain()))
        self.append(batch)

    def _arrange_recent(self) -> None:
        """The batches waiting in `Recent` join the spine (those that came as updates
        arranged into one batch first, which may consolidate to nothing). All are built
        before any leaves `Recent`, and all join before the spine merges: an interrupt
        (KeyboardInterrupt, MemoryError) while they are arranged or merged loses none."""
        batches = [batch for batch in self._recent.take(self.key_arity) if len(batch)]
        for batch in batches:
            self._batches.append(batch)
            self._unmerged += 1
            self._appended += len(batch)
        for batch in batches:
            self._sieved(batch)
        if self._unmerged > TUNING.lazy_batches:
            self._maintain()

    def append(self, batch: Batch) -> None:
        """Append an already arranged batch (same key arity) and restore the invariant;
        a batch of a few rows waits in `Recent` (indexed by key) until a reader
        needs batches."""
        if not len(batch):
            return
        self.latest = join_times(self.latest, tuple(batch.times.max(axis=1).tolist()))
        if len(batch) <= TUNING.few and self._recent.fits(batch.columns, len(batch)):
            self._recent.hold(batch)
            return
        self._arrange_recent()  # batches stay in the order they came
        self._push(batch)

    def _push(self, batch: Batch) -> None:
        self._batches.append(batch)
        self._unmerged += 1
        self._appended += len(batch)
        self._sieved(batch)
        if self._unmerged > TUNING.lazy_batches:
            self._maintain()

    def _sieved(self, batch: Batch) -> None:
        """Let the sieve pass `batch`'s keys, or give way to a larger one once full
        (`Sieve.then`; a sieve that fails to is dropped: one missing a key would hide
        it from lookups)."""
        sieve = self._sieve
        if sieve is not None:
            try:
                self._sieve = sieve.then(batch.hashes, lambda: [b.hashes for b in self._batches])
            except BaseException:
                self._sieve = None
                raise

    @property
    def batches(self) -> list[Batch]:
        """The batches, merged into geometric sizes first.

        Merging is deferred until someone reads the trace (or too many batches
        wait): an arrangement nobody reads for a while, like the input of a
        `distinct` whose input only grows, then costs no merges at all.
        """
        self._arrange_recent()
        if self._unmerged:
            self._maintain()
        return self._batches

    def _maintain(self) -> None:
        """Merge adjacent batches until each is more than twice the next (newest first);
        a small trace merges all its batches once it holds more than a few. A merge of
        more than `TUNING.merge_fuel` entries is started, not done: its inputs stay and
        answer readers, and each call merges some more of every merge in progress
        (`_work`), so no one commit pays for a whole merge of the largest batches."""
        self._unmerged = 0
        fuel = max(TUNING.merge_fuel, TUNING.merge_effort * self._appended)
        self._appended = 0
        self._work(fuel)  # first: a merge about to be taken into a larger one may finish
        self._plan()
        self._work(fuel)

    def _plan(self) -> None:
        """Combine batches (`_combine`) until the invariant holds, counting each merge
        in progress as the one batch it will be."""
        batches = self._batches
        if sum(len(b) for b in batches) <= TUNING.small_trace:
            if len(batches) > TUNING.small_batches:
                self._combine(0, len(batches))
            return
        tail = len(batches)
        while tail and len(batches[tail - 1]) <= TUNING.tail and not self._merging_at(tail - 1):
            tail -= 1
        if len(batches) - tail > TUNING.small_batches:  # merge the small batches at once
            self._combine(tail, len(batches))
            if len(batches) == tail or len(batches[tail]) <= TUNING.tail:
                return
            tail = len(batches)
        while True:  # the geometric invariant, among the units before the tail
            units = self._units(tail)
            sizes = [sum(len(b) for b in batches[i:j]) for i, j in units]
            pairs = [i for i in range(len(sizes) - 1) if sizes[i] <= 2 * sizes[i + 1]]
            if not pairs:
                return
            i = pairs[-1]
            tail -= self._combine(units[i][0], units[i + 1][1])

    def _merging_at(self, position: int) -> Merging | None:
        """The merge in progress that `_batches[position]` is an input of, if any."""
        if not self._merging:
            return None
        batch = self._batches[position]
        return next((m for m in self._merging if any(b is batch for b in m.inputs)), None)

    def _units(self, end: int) -> list[tuple[int, int]]:
        """`_batches[:end]` as ranges: the inputs of one merge in progress, or one batch."""
        units, i = [], 0
        while i < end:
            merging = self._merging_at(i)
            j = i + (len(merging.inputs) if merging is not None else 1)
            units.append((i, j))
            i = j
        return units

    def _combine(self, start: int, end: int) -> int:
        """Merge `_batches[start:end]` (whole merges in progress among them are
        dropped, their inputs merged again): at once when small or unfueled, else
        started. The number of batches that left the list."""
        batches = self._batches
        inputs = batches[start:end]
        self._merging = [m for m in self._merging if not any(b is m.inputs[0] for b in inputs)]
        if TUNING.merge_fuel and sum(len(b) for b in inputs) > TUNING.merge_fuel:
            self._merging.append(Merging(inputs, self.since))
            return 0
        merged = merge(inputs, self.since)
        batches[start:end] = [merged] if len(merged) else []
        return len(inputs) - (1 if len(merged) else 0)

    def _work(self, fuel: int) -> None:
        """Spend `fuel` on each merge in progress, newest first; a finished merge's
        batch replaces its inputs."""
        if not self._merging:
            return
        for merging in reversed(self._merging[:]):
            merging.work(fuel)
            if merging.result is not None:
                self._merging.remove(merging)
                first = next(i for i, b in enumerate(self._batches) if b is merging.inputs[0])
                done = [merging.result] if len(merging.result) else []
                self._batches[first : first + len(merging.inputs)] = done

    def settle(self) -> None:
        """Do now the maintenance a reader of the batches would do (arrange what waits
        in `_Recent`, merge to the invariant): before a hypothetical epoch, so that
        it is done once, not once per hypothetical (`differential.savepoint`)."""
        if self._recent.rows or self._unmerged:
            self.batches  # noqa: B018 (the property does the work)

    def sieve(self) -> Sieve:
        """A sieve passing the hash of every entry of every batch (`trace.sift`)."""
        batches = self.batches
        if self._sieve is None:
            self._sieve = Sieve.of([b.hashes for b in batches])
        return self._sieve

    def sieve_arrays(self) -> list[npt.NDArray[np.generic]]:
        """The arrays of the sieve, if it has been built (for measuring memory)."""
        return [] if self._sieve is None else self._sieve.arrays()

    def all_at_or_before(self, time: Time) -> bool:
        """Every entry's time is `<= time` (no history a reduce would revisit later)."""
        return self.latest is None or le(self.latest, time)

    def compact(self) -> None:
        """Merge everything into one batch, compacted to `since` (reusing `expect`'s)."""
        self._arrange_recent()
        self._unmerged = 0
        self._merging = []
        self._compacting = None
        since = self.since
        if len(self._batches) > 1 or any(b.description.since != since for b in self._batches):
            merged = merge(self._batches, since, self._known)
            self._batches = [merged] if len(merged) else []
        self._settled = len(self)

    def overgrown(self, waiting: int = 0) -> bool:
        """Whether the trace, with `waiting` more updates its owner holds for it
        unarranged, holds more than twice what its last full compaction left (plus
        `TUNING.few`). The first call measures and answers False: what a dataflow's
        first epoch left is taken as compact, so starting one sorts nothing more."""
        held = len(self) + waiting
        if self._settled is None:
            self._settled = held
            return False
        return held > 2 * self._settled + TUNING.few

    def advance(self, since: Antichain) -> None:
        """Readers without handles will look at times beyond `since` only (the
        default since); compact everything if the trace has outgrown its last
        compaction (`overgrown`). Owners call it when an epoch closes.

        A large compaction is a fueled merge of every batch (`Tuning.fueled_compaction`,
        ADR 0069), advanced here as well as by readers: a growing trace outgrows itself
        at every doubling, and its whole merge landed on one commit."""
        self.default_since = since
        if self._compacting is None and not self.overgrown():
            return  # (the usual case: the trace is summed once)
        grown, self._held_at_advance = len(self) - self._held_at_advance, len(self)
        if self._compacting is not None:
            if self._compacting in self._merging:
                self._work(max(TUNING.merge_fuel, TUNING.merge_effort * grown))
            if self._compacting not in self._merging:  # done (or taken into another)
                self._compacting = None
                self._settled = len(self)
        elif TUNING.fueled_compaction and TUNING.merge_fuel and len(self) > TUNING.merge_fuel:
            self._arrange_recent()
            self._combine(0, len(self._batches))
            self._compacting = self._merging[-1] if self._merging else None
            if self._compacting is None:  # merged at once after all
                self._settled = len(self)
        else:
            self.compact()

    # -- reading ----------------------------------------------------------------

    def __len__(self) -> int:
        return sum(len(b) for b in self._batches) + self._recent.rows

    @property
    def batch_count(self) -> int:
        return len(self.batches)

    @property
    def merges_in_progress(self) -> int:
        """Fueled merges started and not yet done (`trace.fuel`): a measurement."""
        return len(self._merging)

    @property
    def held_batches(self) -> int:
        """Batches held now, counting updates waiting unarranged as one and merging
        nothing (`batch_count` merges first): a measurement that changes no state."""
        return len(self._batches) + (1 if self._recent.rows else 0)

    def lookup(
        self,
        keys: Sequence[Column],
        hashes: Hashes | None = None,
        columns: Sequence[int] | None = None,
        rare: bool = False,
        ordered: bool = False,
    ) -> tuple[npt.NDArray[np.intp], Updates]:
        """Every entry whose key equals a query key, as `(query row, entries)`;
        `columns` picks the columns gathered (default all). `rare`: the caller
        expects most keys to be absent (the rows a set input is asked to insert),
        so the trace's sieve is worth asking first (`sifted`). `ordered`: the
        hashes ascend and are asked once (`cursor.seek`)."""
        hashes = key_hash(keys) if hashes is None else hashes
        if rare:
            found = self.sifted(self.batches, keys, hashes, columns, ordered)
        else:
            found = [
                part
                for batch in self.batches
                if (part := lookup_batch(batch, keys, hashes, columns)) is not None
            ]
        if not found:
            return np.empty(0, dtype=np.intp), self.empty(columns)
        return np.concatenate([owner for owner, _ in found]), concat([p for _, p in found])

    def sifted(
        self,
        batches: Sequence[Batch],
        keys: Sequence[Column],
        hashes: Hashes,
        columns: Sequence[int] | None = None,
        ordered: bool = False,
    ) -> list[tuple[Index, Updates]]:
        """`lookup_batch` in each of `batches`, for keys most of which no batch holds
        (a join's validations): the trace's own batches are asked only about the keys
        its sieve passes, when enough keys meet enough batches for that to pay."""
        own = {id(b) for b in self.batches}
        sift = len(hashes) >= TUNING.sifted_keys and len(own) >= TUNING.sifted_batches
        rows = np.flatnonzero(self.sieve().passes(hashes)) if sift else None
        passed = (keys, hashes) if rows is None else ([k[rows] for k in keys], hashes[rows])
        parts = []
        for batch in batches:
            if rows is None or id(batch) not in own:
                part = lookup_batch(batch, keys, hashes, columns, ordered)
            elif (part := lookup_batch(batch, *passed, columns, ordered)) is not None:
                part = (rows[part[0]], part[1])
            if part is not None:
                parts.append(part)
        return parts

    def lookup_entries(self, keys: FewKeys) -> list[Entry]:
        """`lookup` for a few keys, answered as Python entries `(query row, time,
        values, diff)`."""
        found: list[Entry] = []
        self.find_entries(keys, found)
        return found

    def find_entries(self, keys: FewKeys, found: list[Entry], limit: int | None = None) -> bool:
        """Append `lookup_entries` to `found`; False (`found` incomplete) once they
        are more than `limit`."""
        if self._unmerged:
            self._maintain()
        for batch in self._batches:  # what waits in `Recent` is read by key as it is
            if not lookup_entries(batch, keys, found, limit):
                return False
        self._recent.lookup(keys, self.key_arity, found)
        return limit is None or len(found) <= limit

    def updates(self) -> Updates:
        """Every entry of the trace (not consolidated across batches)."""
        if not self.batches:
            return self.empty()
        return concat([b.updates() for b in self.batches])

    def accumulate(self, as_of: Time | None = None) -> Updates:
        """The collection accumulated at `as_of` (all time if None), at time `as_of`."""
        return self.state(as_of)[0]

    def state(self, as_of: Time | None = None) -> tuple[Updates, Hashes | None]:
        """`accumulate(as_of)`, and the key hashes of its rows when they are the entries
        of the trace's one batch as they are (a loaded relation, in order: shared, not
        copied; its times one repeated value)."""
        upd = self.updates()
        if as_of is not None and not (self.latest is None or le(self.latest, as_of)):
            upd = upd.take(less_equal(upd.times, np.asarray(as_of).reshape(-1, 1)))
        at = as_of if as_of is not None else (0,) * self.depth
        state = consolidate(upd.with_times(uniform_times(at, len(upd))))
        batches = self._batches
        if len(batches) == 1 and state.columns and state.columns[0] is batches[0].columns[0]:
            return state, batches[0].hashes  # consolidating found it in order: as it was
        return state, None

    def snapshot(self, as_of: Time, description: Description) -> Batch:
        """The trace accumulated at `as_of` as one batch at time `as_of` (every entry
        must be at a time `<= as_of`).

        The merged batch already has the snapshot's order: only its times change,
        unless one (key, value) sits at several times and they must consolidate.
        Columns and the hash index are shared with the trace, not copied.
        """
        since = Antichain([as_of])
        batches = self.batches
        if not batches:
            return Batch.build(self.empty(), self.key_arity, description)
        whole = batches[0] if len(batches) == 1 else merge(batches, since)
        at = uniform_times(as_of, len(whole))
        # One time: consolidated, the batch holds each (key, value) once already.
        if (
            len(whole) > 1
            and not uniform(whole.times)
            and not run_starts([whole.hashes, *whole.held_values])[1:].all()
        ):
            return Batch.build(whole.updates().with_times(at), self.key_arity, description)
        return Batch(
            whole.hashes,
            whole.held,
            whole.key_arity,
            at,
            whole.diffs,
            description,
            whole.cache.for_other_times(),
            whole.packed_keys,
            whole.narrowed or (),  # (decided: shared with the trace, not narrowed again)
        )

    def empty(self, columns: Sequence[int] | None = None) -> Updates:
        dtypes = self.dtypes if columns is None else [self.dtypes[i] for i in columns]
        return Updates.empty(len(dtypes), self.depth, dtypes)
