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
build (same entries, same order). Each `work(fuel)` call merges about `fuel` entries
and copies them into the merged batch's arrays, allocated when the merge starts.

A merge of batches that lookups index (`Tuning.merge_index`, ADR 0069) then builds
the merged batch's index the same way, `fuel` runs a call (`IndexBuild`), before the
batch replaces its inputs: the first lookups of a new large batch otherwise built its
whole index on one commit (the slowest rounds of a streamed triangle count).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from differential.batch import Column, Updates, compact_uniform, concat
from differential.time import Antichain
from differential.trace.batch import Batch, Description, build_merged, narrowed_also
from differential.trace.index import IndexBuild
from differential.trace.narrow import Narrowed, merge_values
from differential.tuning import TUNING


class Merging:
    """A merge of adjacent batches in progress, advanced by `work(fuel)`."""

    def __init__(self, inputs: Sequence[Batch], since: Antichain) -> None:
        self.inputs = list(inputs)
        first, last = inputs[0], inputs[-1]
        self.description = Description(first.description.lower, last.description.upper, since)
        self.cursors = [0] * len(inputs)  # entries of each input merged so far
        packed = inputs[0].packed_keys  # every input's keys are its hashes: so the merged
        packed = packed if all(b.packed_keys == packed for b in inputs) else None
        # Value columns of one width in every input, int32 where all can be (ADR 0085).
        self.kept, self.values = merge_values([(b.held_values, b.narrowed) for b in inputs])
        self.laying = _Laying(inputs[0], self.size, packed, self.kept)  # piece by piece
        self.result: Batch | None = None
        # Build the merged batch's index too when lookups indexed inputs holding most of
        # its entries (a small batch indexed by one large lookup does not make a large
        # batch worth an index).
        indexed = sum(len(b) for b in inputs if b.cache.index is not None)
        self.indexed = TUNING.merge_index and 2 * indexed >= self.size > 0
        self._merged: Batch | None = None  # every entry merged; its index being built
        self._index: IndexBuild | None = None
        if self.remaining == 0:
            self._laid(self.laying.batch(self.description))

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
        slices = zip(self.inputs, self.values, self.cursors, ends, strict=True)
        parts = [_rows(b, v, c, e) for b, v, c, e in slices if e > c]
        hashes = None  # an identity key is its own hash (`key_hash`): not copied twice
        if not self.inputs[0].identity_hash:
            cuts = zip(self.inputs, self.cursors, ends, strict=True)
            hashes = np.concatenate([b.hashes[c:e] for b, c, e in cuts])
        spent = sum(e - c for c, e in zip(self.cursors, ends, strict=True))
        self.laying.add(build_merged(parts, self.inputs[0], self.description, hashes))
        self.cursors = ends
        if self.remaining == 0:
            self._laid(self.laying.batch(self.description))
        return spent


def _rows(batch: Batch, values: tuple[Column, ...], start: int, end: int) -> Updates:
    """Entries `start:end` of `batch`, of value columns `values` (its own, as merged:
    `merge_values`), as updates (views, not copies)."""
    cut = slice(start, end)
    if (start, end) == (0, len(batch)):
        return Updates((*batch.keys, *values), batch.times, batch.diffs)
    columns = (*batch.keys_at(cut), *(c[cut] for c in values))
    return Updates(columns, batch.times[:, cut], batch.diffs[cut])


class _Laying:
    """The merged batch's hashes and columns, each piece copied into arrays sized for
    every input entry as it is merged (ADR 0069): the pieces are not held until the
    end and then laid end to end, which held the merged entries twice (the pieces and
    their copy) and copied them all on one commit. Times and diffs, one repeated
    value in most pieces, are kept by piece and joined at the end. An int64 key column
    is its own hash: one array holds both. Value columns `kept` narrow (ADR 0085) are
    laid at int32; a piece's column held at int32 is laid into an int64 one as it is."""

    def __init__(
        self, like: Batch, size: int, packed: tuple[np.dtype, ...] | None, kept: Narrowed
    ) -> None:
        self.like = like
        # Keys read back from the hashes (ADR 0083): the value columns only are laid.
        self.packed = packed
        self.kept = kept
        self.shared = like.identity_hash and like.held[0].dtype == np.int64
        self.hashes = np.empty(size, dtype=np.int64)
        k = like.key_arity
        dtypes = [
            np.dtype(np.int32) if i >= k and i - k in kept else dtype
            for i, dtype in enumerate(like.dtypes)
        ]
        self.columns = [
            self.hashes if self.shared and i == 0 else np.empty(size, dtype=dtype)
            for i, dtype in enumerate(dtypes[k:] if packed is not None else dtypes)
        ]
        self.rest: list[Updates] = []  # each piece's times and diffs
        self.at = 0

    def add(self, piece: Batch) -> None:
        n, at = len(piece), self.at
        if not n:
            return
        self.hashes[at : at + n] = piece.hashes
        laid = piece.held_values if self.packed is not None else (*piece.keys, *piece.held_values)
        for i, (column, mine) in enumerate(zip(laid, self.columns, strict=True)):
            if not (self.shared and i == 0):  # equal to the hashes
                mine[at : at + n] = column
        self.rest.append(Updates((), piece.times, piece.diffs))
        self.at += n

    def batch(self, description: Description) -> Batch:
        """The merged batch (arrays cut to the entries merged: copied when
        consolidation left much less than was sized, so that no large tail is held)."""
        if not self.rest:
            dtypes = self.like.dtypes
            empty = Updates.empty(len(dtypes), self.like.times.shape[0], dtypes)
            return Batch.build(empty, self.like.key_arity, description)
        n = self.at
        cut = (lambda a: a[:n]) if 4 * n >= 3 * len(self.hashes) else (lambda a: a[:n].copy())
        hashes = cut(self.hashes)
        columns = tuple(hashes if c is self.hashes else cut(c) for c in self.columns)
        rest = concat(self.rest)
        times, diffs = compact_uniform(rest.times, rest.diffs)
        merged = Batch(
            hashes, columns, self.like.key_arity, times, diffs, description, packed_keys=self.packed
        )
        return narrowed_also(merged, self.kept)
