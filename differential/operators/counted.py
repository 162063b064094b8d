"""A growing distinct's input counted in its key set instead of arranged (ADR 0067).

Layer: differential (operators). Imports `batch`, `time` and the trace's key set.

In a totally ordered scope (a one-shot read, ADR 0062) the arrangement of a growing
`distinct`'s input (`ArrangeOp`) is read by nobody while the distinct grows: the
distinct admits each time's changes into its key set and emits the new keys. What
the arrangement must still hold, for the moment the distinct stops growing (a
retraction reaches it) or anyone else reads it, is the input's history advanced to
the latest time and consolidated: one multiplicity per key. The key set already
holds every key the input has had and finds a row's key with one probe, so it counts
the multiplicities (`KeySet.count`) and the arrangement keeps nothing of the rows:
no sort of each round's candidates to consolidate them (`_settle_compacted`'s
transient), no trace of them. The first read of the trace puts the counts into it
(`into`) and the arrangement arranges as before from then on.

A row whose key the set does not hold yet (fused rounds defer their inputs before
the distinct admits their outputs) waits to be counted at the next settle.

Rows are counted as they arrive (`arrive`, ADR 0072) where no one can tell the
difference: rows inserted at the very time the scope is processing (`Scope.now`)
into an arrangement that only the distinct reads, and whose key the set holds. The
distinct would find them present (their key is out already, and insertions only add
to its count), and no reader asks about an earlier time again, so counting them at
once is what its step and the settle after it would have done. Only the rows that
may be new keys wait in the queue: a round's candidates, mostly derivations of known
keys, never wait whole.
"""

from __future__ import annotations

from differential.batch import Updates, concat, consolidate
from differential.dataflow import Operator
from differential.sort import uniform
from differential.time import Antichain, Time, join_times, uniform_times
from differential.trace.batch import Batch, key_hash
from differential.trace.keyset import KeySet
from differential.trace.spine import Spine
from differential.tuning import TUNING

Deferred = list[tuple[Batch | Updates, Time]]  # an arrangement's rows waiting, by first time


class CountedInput:
    """The counts of an arrangement's rows kept in its reader's key set."""

    def __init__(self, keys: KeySet) -> None:
        self.keys = keys
        self.first: Time | None = None  # the earliest and latest time counted
        self.latest: Time | None = None
        self.sole: bool | None = None  # whether only the distinct reads (decided once)

    def take(self, deferred: Deferred, latest: Time) -> Deferred:
        """Count the rows of `deferred` (at times from its first to `latest`): what is
        left of it, the rows whose key is not in the set yet."""
        left = []
        for item, _ in deferred:
            left += self._count(item.updates() if isinstance(item, Batch) else item)
        self._counted(deferred[0][1], latest)
        if not left:
            return []
        # Rows and their retractions (an antijoin's `x - x ⋉ y`) whose key never enters
        # the set cancel here, or they would wait, and be probed, at every settle.
        waiting = consolidate(concat(left))
        return [(waiting, deferred[0][1])] if len(waiting) else []

    def arrive(self, updates: Updates, arrangement: Operator) -> list[Updates]:
        """Count the rows of `updates`, arriving at `arrangement`, whose key the set
        holds, if they are insertions at the time its scope is processing and only the
        distinct reads the arrangement (module docstring): the rows left to queue, in
        parts (`updates` itself when none was counted)."""
        now = arrangement.scope.now
        if not TUNING.counted_arrivals or now is None or not _at(updates, now):
            return [updates]
        if not _inserted(updates) or not self.alone(arrangement):
            return [updates]
        left = self._count(updates, arriving=True)
        if sum(len(part) for part in left) == len(updates):
            return [updates]  # (none counted: no time to record)
        self._counted(now, now)
        return left

    def _count(self, part: Updates, arriving: bool = False) -> list[Updates]:
        """Count `part`'s rows whose key the set holds: the others, in parts.
        `arriving`: a part most of whose keys a sample finds new is left whole and
        uncounted (its rows wait anyway: counting the few known would copy the rest)."""
        self.keys.count_inputs()
        left = []
        step = max(TUNING.index_chunk, 1)  # a probe's temporaries: about 40 bytes a row
        for lo in range(0, len(part), step):
            rows = _rows(part, lo, lo + step)
            if arriving and self._mostly_new(rows):
                left.append(rows)
                continue
            columns = rows.columns
            absent = self.keys.count(key_hash(columns), columns, rows.diffs)
            if len(absent) == len(rows):
                left.append(rows)
            elif len(absent):
                left.append(rows.take(absent))
        return left

    def _mostly_new(self, rows: Updates) -> bool:
        """Whether a sample of `rows` (every sixteenth) finds fewer keys known than
        `TUNING.arrival_share`."""
        columns = tuple(c[::16] for c in rows.columns)
        found = self.keys.find_counted(key_hash(columns), columns)
        return found.share() < TUNING.arrival_share

    def _counted(self, first: Time, latest: Time) -> None:
        self.first = first if self.first is None else min(self.first, first)  # (ordered)
        self.latest = join_times(self.latest, latest)

    def alone(self, arrangement: Operator) -> bool:
        """Whether one operator reads `arrangement`: its counting distinct. Another
        reader would miss a row counted on arrival, or released after the distinct's
        step, from that time's changes if it reads them after the distinct."""
        if self.sole is None:
            scope = arrangement.scope
            while scope.parent is not None:
                scope = scope.parent
            self.sole = len(scope.readers().get(id(arrangement), [])) == 1
        return self.sole

    def __len__(self) -> int:
        """Keys counted (at most: an upper bound of the entries they stand for)."""
        return len(self.keys) if self.latest is not None else 0

    def into(self, spine: Spine) -> None:
        """Put what was counted into `spine`: each key once with its multiplicity, at the
        latest time counted, the spine compacted to it."""
        if self.latest is None or self.first is None:
            return
        columns, counts = self.keys.counted()
        updates = Updates(columns, uniform_times(self.latest, len(counts)), counts)
        spine.default_since = Antichain([self.latest])
        spine.insert(updates, Antichain([self.first]), Antichain(), self.latest)


def _at(updates: Updates, time: Time) -> bool:
    """Whether every update is at `time` (and there is one)."""
    times = updates.times
    if not len(updates) or tuple(times[:, 0].tolist()) != time:
        return False
    return len(updates) == 1 or uniform(times) or bool((times == times[:, :1]).all())


def _inserted(updates: Updates) -> bool:
    """Whether every diff is positive (one repeated diff is read once)."""
    diffs = updates.diffs
    return bool(diffs[0] > 0) if uniform(diffs) else bool((diffs > 0).all())


def _rows(part: Updates, lo: int, hi: int) -> Updates:
    """Rows `lo` to `hi` of `part` (views: no copy; one repeated time or diff stays one)."""
    if lo == 0 and hi >= len(part):
        return part
    return Updates(tuple(c[lo:hi] for c in part.columns), part.times[:, lo:hi], part.diffs[lo:hi])
