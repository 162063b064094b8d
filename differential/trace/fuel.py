"""Fueled merges: a spine's large merges done a slice of keys at a time (ADR 0054).

Layer: differential (trace). Imports numpy, `differential.batch` and `trace.batch`.

A merge of the spine's batches used to run whole on the commit that found the
geometric invariant broken, so one commit in a few hundred paid for merging a trace's
largest batches (differential-dataflow spreads that work with fuel). A `Merging`
holds its input batches, which stay in the spine and answer every reader until the
merge is done, and builds the merged batch by ranges of key hashes: batches are
sorted by hash and all entries of one hash sit together, so merging the entries of
each input whose hashes fall in `[lo, hi)` gives a consolidated piece, and the pieces
of consecutive ranges, laid end to end, are the merged batch `merge(inputs)` would
build (same entries, same order). Each `work(fuel)` call merges about `fuel` entries;
the last one lays the pieces end to end (a copy, no sort).

A merge of batches that lookups index (`Tuning.merge_index`, ADR 0069) then builds
the merged batch's index the same way, `fuel` runs a call (`IndexBuild`), before the
batch replaces its inputs: the first lookups of a new large batch otherwise built its
whole index on one commit (the slowest rounds of a streamed triangle count).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from differential.batch import Updates, compact_uniform, concat
from differential.time import Antichain
from differential.trace.batch import Batch, Description, build_merged
from differential.trace.index import IndexBuild
from differential.tuning import TUNING


class Merging:
    """A merge of adjacent batches in progress, advanced by `work(fuel)`."""

    def __init__(self, inputs: Sequence[Batch], since: Antichain) -> None:
        self.inputs = list(inputs)
        first, last = inputs[0], inputs[-1]
        self.description = Description(first.description.lower, last.description.upper, since)
        self.cursors = [0] * len(inputs)  # entries of each input merged so far
        self.pieces: list[Batch] = []
        self.result: Batch | None = None
        # Build the merged batch's index too, when lookups indexed an input.
        self.indexed = TUNING.merge_index and any(b.cache.index is not None for b in inputs)
        self._merged: Batch | None = None  # every entry merged; its index being built
        self._index: IndexBuild | None = None
        if self.remaining == 0:
            self._laid(_laid_end_to_end([], inputs[0], self.description))

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.inputs)

    @property
    def remaining(self) -> int:
        return sum(len(b) - c for b, c in zip(self.inputs, self.cursors, strict=True))

    def work(self, fuel: int) -> int:
        """Merge about `fuel` more entries (at least one key's); the fuel spent. Once
        every entry is merged, `result` holds the merged batch."""
        spent = 0
        while self.result is None and (spent < fuel or not spent):
            if self._index is not None:
                spent += self._index_some(max(fuel - spent, 1))
            else:
                spent += self._piece(max(fuel - spent, 1))
        return spent

    def finish(self) -> Batch:
        """The merged batch, merging (and indexing) whatever is left now."""
        while self.result is None:
            self.work(max(self.remaining, 1 << 62))
        return self.result

    def _laid(self, merged: Batch) -> None:
        """Every entry is merged: the result, or first its index."""
        if self.indexed and len(merged):
            self._merged, self._index = merged, IndexBuild(merged.hashes)
        else:
            self.result = merged

    def _index_some(self, fuel: int) -> int:
        """Place about `fuel` more runs of the merged batch's index; once all are, it
        is the batch's index and the batch the result."""
        assert self._index is not None and self._merged is not None
        spent = self._index.work(fuel)
        if self._index.index is not None:
            self._merged.cache.keys.index = self._index.index
            self.result, self._merged, self._index = self._merged, None, None
        return spent

    def _piece(self, fuel: int) -> int:
        """Merge the entries below one hash boundary chosen so that the input with the
        most entries left gives about `fuel` of them."""
        left = [len(b) - c for b, c in zip(self.inputs, self.cursors, strict=True)]
        widest = int(np.argmax(left))
        ends = [len(b) for b in self.inputs]
        if left[widest] > fuel:
            batch = self.inputs[widest]
            bound = batch.hashes[self.cursors[widest] + max(fuel, 1)]
            ends = [int(np.searchsorted(b.hashes, bound, side="left")) for b in self.inputs]
            if ends == self.cursors:  # one hash holds every entry left below `bound`
                ends = [int(np.searchsorted(b.hashes, bound, side="right")) for b in self.inputs]
        parts = [
            _rows(b, c, e) for b, c, e in zip(self.inputs, self.cursors, ends, strict=True) if e > c
        ]
        hashes = None  # an identity key is its own hash (`key_hash`): not copied twice
        if not self.inputs[0].identity_hash:
            cuts = zip(self.inputs, self.cursors, ends, strict=True)
            hashes = np.concatenate([b.hashes[c:e] for b, c, e in cuts])
        spent = sum(e - c for c, e in zip(self.cursors, ends, strict=True))
        piece = build_merged(parts, self.inputs[0], self.description, hashes)
        if len(piece):
            self.pieces.append(piece)
        self.cursors = ends
        if self.remaining == 0:
            self._laid(_laid_end_to_end(self.pieces, self.inputs[0], self.description))
            self.pieces = []
        return spent


def _rows(batch: Batch, start: int, end: int) -> Updates:
    """Entries `start:end` of `batch` as updates (views, not copies)."""
    if (start, end) == (0, len(batch)):
        return batch.updates()
    cut = slice(start, end)
    columns = tuple(c[cut] for c in batch.columns)
    return Updates(columns, batch.times[:, cut], batch.diffs[cut])


def _laid_end_to_end(pieces: Sequence[Batch], like: Batch, description: Description) -> Batch:
    """One batch of consecutive pieces (each sorted and consolidated, their hash
    ranges disjoint and increasing): the pieces' columns one after the other, an int64
    key column still shared with the hashes."""
    if not pieces:
        dtypes = [c.dtype for c in like.columns]
        empty = Updates.empty(len(dtypes), like.times.shape[0], dtypes)
        return Batch.build(empty, like.key_arity, description)
    if len(pieces) == 1:
        only = pieces[0]
        return Batch(only.hashes, only.columns, only.key_arity, only.times, only.diffs, description)
    shared = all(p.columns[0] is p.hashes for p in pieces)
    hashes = np.concatenate([p.hashes for p in pieces])
    rest = [Updates(p.columns[1:] if shared else p.columns, p.times, p.diffs) for p in pieces]
    updates = concat(rest)
    columns = (hashes, *updates.columns) if shared else updates.columns
    times, diffs = compact_uniform(updates.times, updates.diffs)
    return Batch(hashes, columns, like.key_arity, times, diffs, description)
