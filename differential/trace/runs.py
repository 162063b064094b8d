"""Merging a spine's batches of keys only as sorted runs (ADR 0075).

Layer: differential (trace). Imports numpy, `differential.batch`, `small`, `time`
and `trace.batch`.

`merge` is `trace.batch.merge`, with one tactic of its own (`Tuning.key_runs`): batches
that hold keys only, of two columns or more (no value columns: a set input's presence
arrangement, keyed by all its columns), with one time coordinate, given oldest first.
Each batch is sorted by `(hash, key, time)` and, times advancing monotonically by a
one-coordinate `since`, every time of a batch is at most every time of the next; so
one stable sort of the concatenated hashes (timsort, which merges sorted runs in about
linear time) orders the entries by `(hash, time)`, each key's entries together unless
two keys share a hash. Keys whose columns all fit the packed hash are their hash,
unpacked (no collision); others are gathered and compared where hashes tie. Entries
consolidate where hashes tie only. Against `Batch.build` of the concatenation, it
skips packing the times into the sort key, the check for interleaved keys, gathering
the hashes twice and every column, and comparing every column to find runs: a merge
of 234,000 entries in three runs (a 100% commit into reach's input of 100,000 edges)
takes 4-5 ms instead of 12-13.

A set input's bulk insert found its new rows by the same sort (`Input.absent`); the
seal's merge of them into the state reuses it (`Known`).

Any other merge (a few entries, keys of one integer column, batches not in time order
after advancing, colliding hashes) is `trace.batch.merge` (the reference); the result
is the same batch, array for array.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from differential.batch import Column, compact_uniform, uniform, uniform_diff
from differential.small import packed_width
from differential.time import Antichain, Times, uniform_times
from differential.trace.batch import Batch, Description, rows_of_hashes
from differential.trace.batch import merge as merge_built
from differential.tuning import TUNING


@dataclass
class Known:
    """A merge's order found before its last batch was built: a set input's bulk insert
    sorted the hashes of its presence batches and of the rows asked, to decide which
    were new (`Input.absent`), and the batch of the new ones, staged, is merged into
    those batches at the seal: that merge reuses the sort (ADR 0075)."""

    batches: tuple[Batch, ...]  # the spine's batches the rows were sorted with
    order: npt.NDArray[np.intp]  # their entries, then the asked rows, sorted stably by hash
    ordered: npt.NDArray[np.int64]  # the hashes in that order
    asked: int  # rows asked: the last batch holds them but `dropped`, in their order
    dropped: npt.NDArray[np.intp]  # positions in `order` of asked rows held already
    last: Batch | None = None  # the batch staged (`Input.stage`)

    def fits(self, runs: Sequence[Batch]) -> bool:
        """Whether `runs` are the sorted batches and then the staged one, at one time
        with one diff (the asked rows' positions hold its time and diff)."""
        last = runs[-1]
        return (
            last is self.last
            and len(runs) == len(self.batches) + 1
            and all(a is b for a, b in zip(runs, self.batches, strict=False))
            and len(last) == self.asked - len(self.dropped)
            and uniform_diff(last.diffs) is not None
            and _span(last.times, None)[0] == _span(last.times, None)[1]
        )


def merge(batches: Sequence[Batch], since: Antichain, known: Known | None = None) -> Batch:
    """One batch holding the consolidated contents of `batches` (oldest first),
    compacted to `since` (module docstring); `known`: an order found for them."""
    found = merge_key_runs(batches, since, known) if TUNING.key_runs else None
    return merge_built(batches, since) if found is None else found


def merge_key_runs(
    batches: Sequence[Batch], since: Antichain, known: Known | None = None
) -> Batch | None:
    """`merge` of batches of keys only with one time coordinate by one stable sort of
    their hashes (or `known`'s, when it fits), or None when they are not such batches
    in time order, or two of their keys share a hash. A few entries (`Tuning.few`)
    merge faster as Python lists, and keys of one integer column, their own hash, by
    packing (`build_parts`): both are left to the reference."""
    first, last = batches[0], batches[-1]
    runs = [b for b in batches if len(b)]
    if len(runs) < 2 or first.held_values or first.identity_hash or first.times.shape[0] != 1:
        return None
    if len(since) > 1 or sum(len(b) for b in runs) <= TUNING.few:
        return None
    floor = next(iter(since))[0] if len(since) else None
    spans = [_span(b.times, floor) for b in runs]
    if any(hi > lo for (_, hi), (lo, _) in itertools.pairwise(spans)):
        return None  # not oldest first: the sort would need the times
    packed = _packed(runs)
    sizes = [len(b) for b in runs]
    if known is not None and packed and known.fits(runs):
        order, ordered = known.order, known.ordered
        if len(known.dropped):
            order, ordered = np.delete(order, known.dropped), np.delete(ordered, known.dropped)
        sizes[-1] = known.asked  # (asked rows' positions: all at the staged batch's time)
    else:
        hashes = np.concatenate([b.hashes for b in runs])
        order = np.argsort(hashes, kind="stable")
        ordered = hashes[order]
    tied = np.flatnonzero(ordered[1:] == ordered[:-1])
    keys: list[Column] = []
    if not packed:
        held = [b.columns for b in runs]  # (read back once from packed hashes: ADR 0083)
        keys = [np.concatenate([c[i] for c in held])[order] for i in range(len(held[0]))]
        if len(tied) and any(bool((k[tied] != k[tied + 1]).any()) for k in keys):
            return None  # two keys share a hash: the reference sorts by the keys too
    times = _times(runs, spans, floor, order, sizes)
    diffs = _diffs(runs, order, sizes)
    if len(tied) and not uniform(times):
        tied = tied[times[0, tied] == times[0, tied + 1]]
    if len(tied):  # the same key at the same time in two batches: summed
        starts = np.ones(len(ordered), dtype=bool)
        starts[tied + 1] = False
        at = np.flatnonzero(starts)
        diffs = np.add.reduceat(diffs, at)
        ordered, times, keys = ordered[at], times[:, at], [k[at] for k in keys]
    if not (uniform(diffs) and diffs[0] != 0):
        keep = np.flatnonzero(diffs != 0)
        if len(keep) < len(diffs):
            ordered, times, diffs = ordered[keep], times[:, keep], diffs[keep]
            keys = [k[keep] for k in keys]
    times, diffs = compact_uniform(times, diffs)
    if packed:  # every key is its hash, unpacked
        keys = list(rows_of_hashes(ordered, [c.dtype for c in first.columns]))
    description = Description(first.description.lower, last.description.upper, since)
    return Batch(ordered, tuple(keys), first.key_arity, times, diffs, description)


def _span(times: Times, floor: int | None) -> tuple[int, int]:
    """The least and greatest time of a batch's one coordinate, advanced to `floor`."""
    lo, hi = (int(times[0, 0]),) * 2 if uniform(times) else (int(times.min()), int(times.max()))
    return (lo, hi) if floor is None else (max(lo, floor), max(hi, floor))


def _times(
    batches: Sequence[Batch],
    spans: list[tuple[int, int]],
    floor: int | None,
    order: npt.NDArray[np.intp],
    sizes: Sequence[int],
) -> Times:
    """The batches' times, advanced to `floor`, laid end to end (`sizes` entries each:
    a batch at one time may stand for more) and taken in `order`: one repeated time
    stays one."""
    if all(lo == hi for lo, hi in spans) and len({lo for lo, _ in spans}) == 1:
        return uniform_times((spans[0][0],), len(order))
    laid = np.empty(sum(sizes), dtype=np.int64)
    start = 0
    for b, (lo, hi), size in zip(batches, spans, sizes, strict=True):
        part = laid[start : start + size]
        if lo == hi:  # one time (or all advanced to one)
            part.fill(lo)
        elif floor is None or floor <= int(b.times[0].min()):
            part[:] = b.times[0]
        else:
            np.maximum(b.times[0], floor, out=part)
        start += size
    return laid[order].reshape(1, -1)


def _packed(batches: Sequence[Batch]) -> bool:
    """Whether the batches' keys, of two integer columns or more, are hashed by packing
    them side by side (`key_hash`: every value fits its share of the bits), so their
    hashes order them and unpack to them (`rows_of_hashes`)."""
    columns = batches[0].columns
    if len(columns) < 2 or any(c.dtype.kind not in "iu" for c in columns):
        return False
    top = 1 << packed_width(len(columns))
    return all(
        (b.packed_keys is not None and not b.held_values)  # its keys are its packed hashes
        or all(int(c.max()) < top and (c.dtype.kind == "u" or int(c.min()) >= 0) for c in b.columns)
        for b in batches
    )


def _diffs(
    batches: Sequence[Batch], order: npt.NDArray[np.intp], sizes: Sequence[int]
) -> npt.NDArray[np.int64]:
    """The batches' diffs laid end to end (`sizes` entries each: a batch of one diff
    may stand for more) and taken in `order`: one diff they all carry stays one."""
    each = [uniform_diff(b.diffs) for b in batches]
    if len(set(each)) == 1 and each[0] is not None:
        return np.broadcast_to(np.int64(each[0]), (len(order),))
    laid = np.empty(sum(sizes), dtype=np.int64)
    start = 0
    for b, diff, size in zip(batches, each, sizes, strict=True):
        if diff is not None:
            laid[start : start + size] = diff
        else:
            laid[start : start + size] = b.diffs
        start += size
    return laid[order]
