"""What traces hold in memory, by kind of structure: bytes per tuple (ADR 0044).

Layer: differential (trace). Imports numpy and the trace's batch and spine.

A trace's memory is its batches' arrays (key hashes, data columns, times, diffs)
and what lookups build on them (a batch's hash index, its bitmap of pairs, the
trace's sieve). Several structures may hold one array: a relation's presence
batch and the arrangement keyed like it share everything, an arrangement keyed by
the first column shares the columns, an int64 key column is its own hash. Each
buffer is counted once, for the structure that is measured first; a repeated value
(`differential.batch.uniform`: one time or one diff for every entry) costs that
value. Python lists built for few-key lookups of small batches are not counted.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from differential.batch import uniform
from differential.trace.batch import Batch
from differential.trace.dense import DensePairs
from differential.trace.spine import Spine

KINDS = ("hashes", "columns", "times", "diffs", "index", "dense", "sieve")

Held = Iterator[tuple[str, npt.NDArray[np.generic]]]


class Footprint:
    """Bytes held by kind of structure; a buffer met again (shared) counts nothing."""

    def __init__(self, seen: dict[int, npt.NDArray[np.generic]] | None = None) -> None:
        self.bytes = dict.fromkeys(KINDS, 0)
        # Buffers counted (shared with the footprint this one was split from), kept:
        # their ids stay unique.
        self._seen: dict[int, npt.NDArray[np.generic]] = {} if seen is None else seen

    @property
    def total(self) -> int:
        return sum(self.bytes.values())

    def add(self, kind: str, array: npt.NDArray[np.generic]) -> None:
        if uniform(array):  # one value (per time coordinate), whatever the rows
            self.bytes[kind] += array.itemsize * (array.shape[0] if array.ndim == 2 else 1)
            return
        root = array
        while isinstance(root.base, np.ndarray):
            root = root.base
        if id(root) not in self._seen:
            self._seen[id(root)] = root
            self.bytes[kind] += root.nbytes

    def batch(self, batch: Batch) -> None:
        for kind, array in batch_arrays(batch):
            self.add(kind, array)

    def spine(self, spine: Spine) -> None:
        for batch in spine.batches:
            self.batch(batch)
        for array in spine.sieve_arrays():
            self.add("sieve", array)

    def split(self) -> Footprint:
        """An empty footprint that counts nothing this one has counted (for measuring
        the next structure apart: what it shares with this one is not its own)."""
        return Footprint(self._seen)


def batch_arrays(batch: Batch) -> Held:
    """`(kind, array)` for every array a batch holds, its lookup structures included."""
    yield "hashes", batch.hashes
    for column in batch.held:  # (keys read back from packed hashes are not held)
        yield "columns", column
    yield "times", batch.times
    yield "diffs", batch.diffs
    index = batch.cache.index
    for array in [] if index is None else index.arrays():
        yield "index", array
    dense = batch.cache.dense
    for array in dense.arrays() if isinstance(dense, DensePairs) else []:
        yield "dense", array
