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
"""

from __future__ import annotations

from differential.batch import Updates, concat, consolidate
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

    def take(self, deferred: Deferred, latest: Time) -> Deferred:
        """Count the rows of `deferred` (at times from its first to `latest`): what is
        left of it, the rows whose key is not in the set yet."""
        self.keys.count_inputs()
        left = []
        step = max(TUNING.index_chunk, 1)  # a probe's temporaries: about 40 bytes a row
        for item, _ in deferred:
            part = item.updates() if isinstance(item, Batch) else item
            for lo in range(0, len(part), step):
                columns = tuple(c[lo : lo + step] for c in part.columns)
                diffs = part.diffs[lo : lo + step]
                absent = self.keys.count(key_hash(columns), columns, diffs)
                if len(absent):
                    left.append(part.take(absent + lo))
        first = deferred[0][1]
        self.first = first if self.first is None else min(self.first, first)  # (ordered)
        self.latest = join_times(self.latest, latest)
        if not left:
            return []
        # Rows and their retractions (an antijoin's `x - x ⋉ y`) whose key never enters
        # the set cancel here, or they would wait, and be probed, at every settle.
        waiting = consolidate(concat(left))
        return [(waiting, first)] if len(waiting) else []

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
