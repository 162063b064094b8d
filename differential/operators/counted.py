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
(`updates`) and the arrangement arranges as before from then on.

A row whose key the set does not hold yet (fused rounds defer their inputs before
the distinct admits their outputs) waits to be counted at the next settle.
"""

from __future__ import annotations

from differential.batch import Updates
from differential.time import Time, join_times, uniform_times
from differential.trace.batch import key_hash
from differential.trace.keyset import KeySet
from differential.tuning import TUNING


class CountedInput:
    """The counts of an arrangement's rows kept in its reader's key set."""

    def __init__(self, keys: KeySet) -> None:
        self.keys = keys
        self.first: Time | None = None  # the earliest and latest time counted
        self.latest: Time | None = None

    def take(self, parts: list[Updates], first: Time, latest: Time) -> list[Updates]:
        """Count the rows of `parts` (at times from `first` to `latest`): the rows whose
        key is not in the set yet, not counted."""
        self.keys.count_inputs()
        left = []
        step = max(TUNING.index_chunk, 1)  # a probe's temporaries: about 40 bytes a row
        for part in parts:
            for lo in range(0, len(part), step):
                columns = tuple(c[lo : lo + step] for c in part.columns)
                diffs = part.diffs[lo : lo + step]
                absent = self.keys.count(key_hash(columns), columns, diffs)
                if len(absent):
                    left.append(part.take(absent + lo))
        self.first = first if self.first is None else min(self.first, first)  # (ordered)
        self.latest = join_times(self.latest, latest)
        return left

    def __len__(self) -> int:
        """Keys counted (at most: an upper bound of the entries they stand for)."""
        return len(self.keys) if self.latest is not None else 0

    def updates(self) -> Updates | None:
        """What was counted, each key once with its multiplicity at the latest time
        counted (None: nothing was)."""
        if self.latest is None:
            return None
        columns, counts = self.keys.counted()
        return Updates(columns, uniform_times(self.latest, len(counts)), counts)
