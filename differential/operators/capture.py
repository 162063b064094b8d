"""Probes and outputs: where a dataflow's results leave it.

Layer: differential (operators).

A `Capture` collects the updates of a root-scope stream as they are produced;
after the scheduler has finished an epoch, `drain` hands over that epoch's
changes consolidated, so observers never see half of an epoch.
"""

from __future__ import annotations

from differential.batch import Updates, concat, consolidate
from differential.dataflow import Stream


class Capture:
    """Buffers a root-scope stream's updates until `drain`."""

    def __init__(self, stream: Stream) -> None:
        assert stream.scope.parent is None, "capture root-scope streams"
        self.stream = stream
        self.parts: list[Updates] = []
        stream.connect(self._receive)

    def _receive(self, updates: Updates) -> None:
        self.parts.append(updates)

    def drain(self) -> Updates:
        """Every update since the last drain, consolidated (sorted, zero-free)."""
        if not self.parts:
            return self.stream.empty()
        parts, self.parts = self.parts, []
        whole = concat(parts)
        del parts  # (one copy of the answer at a time besides what consolidating builds)
        return consolidate(whole)
