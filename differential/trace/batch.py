"""An arranged batch: updates indexed by a key, immutable, with a description.

Layer: differential (trace). Imports numpy, `differential.batch`/`time` and
`trace.hashes` (the key hashes, whose names it re-exports).

Invariant: entries are sorted by `(hash, key columns, value columns, time)` and
consolidated (no two entries agree on key, value and time; no zero diffs).
`hash` is the key itself when the key is one integer column; otherwise the key
columns packed, or a mix of them (`trace.hashes.key_hash`). Lookups binary-search
the hash column and, for mixed hashes, confirm the key columns, so collisions cost
time, never correctness.

`Description(lower, upper, since)`: the batch holds the updates whose times
were produced in `[lower, upper)` of the scheduler's (lexicographic) progress,
and its times have been advanced by the frontier `since` (logical compaction):
accumulations at times beyond `since` are exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from differential import small
from differential.batch import (
    Column,
    Updates,
    compact_uniform,
    concat,
    consolidate_packed,
    consolidate_packed_parts,
    integral,
    order_of,
    run_starts,
    sort_order,
    uniform,
    uniform_diff,
)
from differential.budget import check_budget
from differential.time import Antichain, Times, advance_by, uniform_times
from differential.trace.hashes import Hashes, key_hash, rows_of_hashes
from differential.trace.hashes import ordered_hash as ordered_hash  # (re-exported)
from differential.trace.index import LookupCache
from differential.trace.narrow import (
    Narrowed,
    merge_values,
    narrowed_columns,
    widened,
    widened_at,
)
from differential.tuning import TUNING


@dataclass(frozen=True)
class Description:
    lower: Antichain
    upper: Antichain
    since: Antichain


@dataclass(frozen=True, eq=False)
class Batch:
    """Consolidated updates of one arrangement, sorted for lookup by key. `held`: its
    key columns, then value columns; or the value columns only, its keys read back from
    its packed hashes (`packed_keys`: their types; `Tuning.packed_batches`, ADR 0083).
    `narrowed`: the value columns held at int32 and read back at int64
    (`Tuning.narrow_values`, ADR 0085); None: not decided yet (`__post_init__` decides
    for a large batch in a nested scope), a tuple (maybe empty): decided."""

    hashes: Hashes
    held: tuple[Column, ...]
    key_arity: int
    times: Times
    diffs: npt.NDArray[np.int64]
    description: Description
    cache: LookupCache = field(default_factory=LookupCache, repr=False)
    packed_keys: tuple[np.dtype, ...] | None = field(default=None, repr=False)
    narrowed: Narrowed | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        held, arity, n = self.held, self.key_arity, len(self.hashes)
        if n < TUNING.packed_batches_from and n < TUNING.narrow_values_from:
            return  # (most batches: a small commit's)
        if arity > 1 and self.packed_keys is None and _keys_pack(held, arity, n, self.times):
            object.__setattr__(self, "packed_keys", tuple(c.dtype for c in self.keys))
            object.__setattr__(self, "held", self.held[self.key_arity :])
        if self.narrowed is None and _values_narrow(n, self.times):
            start = len(self.held) - len(self.held_values)
            keys = (self.hashes, *self.held[:start])
            narrowed, values = narrowed_columns(self.held_values, keys)
            object.__setattr__(self, "narrowed", narrowed)
            object.__setattr__(self, "held", (*self.held[:start], *values))

    def __len__(self) -> int:
        return len(self.diffs)

    @property
    def columns(self) -> tuple[Column, ...]:
        """Every column, key columns first (read back from the hashes when packed),
        value columns held narrowed read back at int64."""
        if self.packed_keys is None and not self.narrowed:
            return self.held
        return (*self.keys, *self.values)

    @property
    def dtypes(self) -> tuple[np.dtype, ...]:
        """The columns' types as handed out (nothing read back to tell them)."""
        keys = self.packed_keys or tuple(c.dtype for c in self.held[: self.key_arity])
        narrowed = self.narrowed or ()
        values = self.held_values
        wide = np.dtype(np.int64)
        return (*keys, *(wide if i in narrowed else c.dtype for i, c in enumerate(values)))

    @property
    def identity_hash(self) -> bool:
        return self.key_arity == 1 and self.held[0].dtype.kind in "iu"

    @property
    def keys(self) -> tuple[Column, ...]:
        if self.packed_keys is not None:
            return rows_of_hashes(self.hashes, self.packed_keys)
        return self.held[: self.key_arity]

    @property
    def values(self) -> tuple[Column, ...]:
        """The value columns, those held narrowed read back at int64 (copies)."""
        return widened(self.held_values, self.narrowed)

    @property
    def held_values(self) -> tuple[Column, ...]:
        """The value columns as held (narrowed ones at int32: see `narrowed`)."""
        return self.held if self.packed_keys is not None else self.held[self.key_arity :]

    def values_at(self, entries: npt.NDArray[np.intp] | slice) -> tuple[Column, ...]:
        """The value columns at `entries` only (a gather, or a slice), at their types."""
        narrowed = self.narrowed or ()
        values = self.held_values
        return tuple(widened_at(c, entries, i in narrowed) for i, c in enumerate(values))

    def keys_at(self, entries: npt.NDArray[np.intp] | slice) -> tuple[Column, ...]:
        """The key columns at `entries` only (a gather, or a slice)."""
        if self.packed_keys is not None:
            return rows_of_hashes(self.hashes[entries], self.packed_keys)
        return tuple(c[entries] for c in self.held[: self.key_arity])

    def columns_at(
        self, entries: npt.NDArray[np.intp], picked: Sequence[int] | None = None
    ) -> tuple[Column, ...]:
        """The columns `picked` (default all) at `entries`: key columns read back from
        the gathered hashes when packed, not unpacked whole."""
        k = self.key_arity
        values, narrowed = self.held_values, self.narrowed or ()
        picked = range(k + len(values)) if picked is None else picked
        if self.packed_keys is None and not narrowed:
            return tuple(self.held[i][entries] for i in picked)
        keys: tuple[Column, ...] = ()
        if any(i < k for i in picked):
            keys = self.keys_at(entries)
        return tuple(
            keys[i] if i < k else widened_at(values[i - k], entries, i - k in narrowed)
            for i in picked
        )

    def updates(self) -> Updates:
        return Updates(self.columns, self.times, self.diffs)

    @staticmethod
    def build(
        updates: Updates,
        key_arity: int,
        description: Description,
        runs: bool = False,
        hashes: Hashes | None = None,
    ) -> Batch:
        """Arrange `updates` (any order, possibly unconsolidated) by its first columns.

        `runs`: the updates are a few sorted runs (batches being merged); a
        stable sort (timsort) then merges them in about linear time. `hashes`:
        the key hashes, when already known.
        """
        times = _advanced(updates.times, description.since)
        # No key columns (a nullary collection): every row has the one empty key.
        # `key_hash` cannot know the row count without columns, so count the diffs.
        if hashes is not None:
            pass
        elif key_arity:
            hashes = key_hash(updates.columns[:key_arity])
        else:
            hashes = np.zeros(len(updates.diffs), dtype=np.int64)
        identity = key_arity == 1 and updates.columns[0].dtype.kind in "iu"
        if len(hashes) <= TUNING.few and integral(updates.columns):
            return _build_few(updates, key_arity, description, times, hashes)
        if len(hashes) >= TUNING.sorted_from:  # in order already (a sorted load): no sort
            found = _build_in_order(updates.with_times(times), key_arity, description, hashes)
            if found is not None:
                return found
        if identity:
            fast = _build_packed(updates.with_times(times), description)
            if fast is not None:
                return fast
        if not identity and _keys_pack(updates.columns, key_arity, len(hashes), times):
            values = Updates(updates.columns[key_arity:], times, updates.diffs)
            dtypes = tuple(c.dtype for c in updates.columns[:key_arity])
            return _build_by_hashes(values, hashes, dtypes, description, runs)
        # Sort by (hash, values, time): one packed key in the common case. Two keys
        # sharing a (mixed) hash may then interleave, so the rare batch where that
        # happens is sorted by its key columns as well, to keep each key's
        # entries contiguous and consolidate them.
        # A big batch takes several whole-column passes: the budget is checked between
        # them (building changes nothing, so stopping half-way leaves nothing half-done).
        order = sort_order([hashes, *updates.columns[key_arity:]], times, stable=runs, runs=runs)
        check_budget()
        if not identity and _keys_interleave(hashes, updates.columns[:key_arity], order):
            order = sort_order([hashes, *updates.columns], times, stable=runs, runs=runs)
        check_budget()
        ordered = hashes[order]
        # An int64 key column is its own hash (`key_hash`): gathered once, held once.
        columns = tuple(ordered if c is hashes else c[order] for c in updates.columns)
        check_budget()
        sorted_updates = Updates(columns, times[:, order], updates.diffs[order])
        return _consolidated(sorted_updates, key_arity, description, ordered)


def _keys_pack(columns: Sequence[Column], key_arity: int, n: int, times: Times) -> bool:
    """Whether a batch holds its keys as its hashes alone (`Tuning.packed_batches`): two
    or more int64 key columns whose every value fits the packed width (`key_hash` packed
    every key), `packed_batches_from` entries or more, in a nested scope (a base
    relation's presence batch shares its columns and is read whole: ADR 0044, 0083)."""
    if not TUNING.packed_batches or key_arity < 2 or times.shape[0] < 2:
        return False
    if n < max(TUNING.packed_batches_from, 1):
        return False
    keys = columns[:key_arity]
    if any(c.dtype != np.int64 for c in keys):
        return False
    width = small.packed_width(key_arity)
    return all(int(c.min()) >= 0 and int(c.max()) >> width == 0 for c in keys)


def _values_narrow(n: int, times: Times) -> bool:
    """Whether a batch of `n` entries holds int64 value columns that fit at int32
    (`Tuning.narrow_values`): `narrow_values_from` entries or more, in a nested scope
    (a base relation's batches share their columns with each other: ADR 0044, 0085)."""
    return TUNING.narrow_values and n >= max(TUNING.narrow_values_from, 1) and times.shape[0] > 1


def _advanced(times: Times, since: Antichain) -> Times:
    """`advance_by(times, since)`, keeping one repeated time (`uniform`) as one."""
    if since.empty or not uniform(times):
        return advance_by(times, since)
    advanced = advance_by(times[:, :1], since)
    return uniform_times(tuple(advanced[:, 0].tolist()), times.shape[1])


def _build_by_hashes(
    values: Updates,
    hashes: Hashes,
    key_dtypes: tuple[np.dtype, ...],
    description: Description,
    runs: bool,
) -> Batch:
    """`Batch.build` of entries whose keys all pack into `hashes` (`values`: their value
    columns, times advanced, and diffs): sorted by (hash, values, time), the key
    columns neither gathered nor held (`Tuning.packed_batches`, ADR 0083)."""
    order = sort_order([hashes, *values.columns], values.times, stable=runs, runs=runs)
    check_budget()
    ordered = hashes[order]
    columns = tuple(c[order] for c in values.columns)
    check_budget()
    sorted_updates = Updates(columns, values.times[:, order], values.diffs[order])
    return _consolidated(sorted_updates, len(key_dtypes), description, ordered, packed=key_dtypes)


def _consolidated(
    updates: Updates,
    key_arity: int,
    description: Description,
    hashes: Hashes,
    distinct: bool = False,
    packed: tuple[np.dtype, ...] | None = None,
) -> Batch:
    """The batch of updates sorted by (hash, key where hashes collide, values, time)
    (`distinct`: no two alike): equal entries summed, zeros dropped, one repeated
    time or diff held once. `packed`: the key columns' types, the keys being the
    hashes (`updates` then has the value columns only)."""
    identity = packed is None and key_arity == 1 and updates.columns[0].dtype.kind in "iu"
    rows = [hashes, *updates.columns[1 if identity else 0 :]]
    columns, times, diffs = updates.columns, updates.times, updates.diffs
    first = None if distinct else run_starts(rows, times)
    if first is not None and not first.all():
        starts = np.flatnonzero(first)
        diffs = np.add.reduceat(diffs, starts)
        hashes, times = hashes[starts], times[:, starts]
        columns = tuple(hashes if c is rows[0] else c[starts] for c in columns)
    if not (uniform(diffs) and diffs[0] != 0):
        keep = np.flatnonzero(diffs != 0)
        if len(keep) < len(diffs):
            kept = hashes[keep]
            columns = tuple(kept if c is hashes else c[keep] for c in columns)
            hashes, times, diffs = kept, times[:, keep], diffs[keep]
    times, diffs = compact_uniform(times, diffs)
    return Batch(hashes, columns, key_arity, times, diffs, description, packed_keys=packed)


def _build_in_order(
    updates: Updates, key_arity: int, description: Description, hashes: Hashes
) -> Batch | None:
    """`Batch.build` of updates already sorted by (hash, values, time), each key's
    entries together: consolidated in one pass, columns shared, not copied. None when
    they are not in that order."""
    values = updates.columns[key_arity:]
    found = order_of([hashes, *values, *updates.times])
    if found < 0:
        return None
    identity = key_arity == 1 and updates.columns[0].dtype.kind in "iu"
    # Hashes strictly increase when the rows do and only they and one time are compared.
    unique = found > 0 and not values and uniform(updates.times)
    if not identity and not unique and _ties_differ(hashes, updates.columns[:key_arity]):
        return None
    return _consolidated(updates, key_arity, description, hashes, distinct=found > 0)


def _ties_differ(hashes: Hashes, keys: Sequence[Column]) -> bool:
    """Whether neighbours with the same hash have different keys (a collision)."""
    tied = np.flatnonzero(hashes[1:] == hashes[:-1])
    return bool(len(tied)) and any(bool((k[tied] != k[tied + 1]).any()) for k in keys)


def _build_few(
    updates: Updates, key_arity: int, description: Description, times: Times, hashes: Hashes
) -> Batch:
    """`Batch.build` for a handful of rows: sorted by (hash, key, value, time) in Python.

    The key columns after the hash make no difference unless two keys share a
    hash, and then they keep each key's entries together, as the numpy path does.
    One row (a single-edge change) is sorted and consolidated as it is.
    """
    if len(hashes) == 1 and updates.diffs[0]:
        return Batch(hashes, updates.columns, key_arity, times, updates.diffs, description)
    keys = [hashes.tolist(), *(c.tolist() for c in updates.columns), *times.tolist()]
    rows, sums = small.consolidated_runs(keys, updates.diffs.tolist())
    at = np.array(rows, dtype=np.intp)
    return Batch(
        hashes=hashes[at],
        held=tuple(c[at] for c in updates.columns),
        key_arity=key_arity,
        times=times[:, at],
        diffs=np.array(sums, dtype=np.int64),
        description=description,
    )


def _keys_interleave(hashes: Hashes, keys: Sequence[Column], order: npt.NDArray[np.intp]) -> bool:
    """Whether, in `order`, neighbours with the same hash have different keys."""
    tied = np.flatnonzero(hashes[order[1:]] == hashes[order[:-1]])
    if not len(tied):
        return False
    here, there = order[tied], order[tied + 1]
    return any(bool((k[here] != k[there]).any()) for k in keys)


def _build_packed(updates: Updates, description: Description) -> Batch | None:
    """An identity-keyed batch whose rows (and times, and diffs unless they agree) pack
    into one int64: sort the packed rows themselves (no permutation, no gathers). Its
    order is the batch's: the key is the hash, then values, then time."""
    if not len(updates):
        return None
    diff = uniform_diff(updates.diffs)
    if diff is None and not TUNING.packed_diffs:
        return None
    packed = consolidate_packed(updates, diff)
    if packed is None:
        return None
    hashes = key_hash(packed.columns[:1])
    times, diffs = compact_uniform(packed.times, packed.diffs)
    return Batch(hashes, packed.columns, 1, times, diffs, description)


def merge(batches: Sequence[Batch], since: Antichain) -> Batch:
    """One batch holding the consolidated contents of `batches`, compacted to `since`."""
    first, last = batches[0], batches[-1]
    description = Description(first.description.lower, last.description.upper, since)
    hashes = None if first.identity_hash else np.concatenate([b.hashes for b in batches])
    dtypes = first.packed_keys
    kept, held = merge_values([(b.held_values, b.narrowed) for b in batches])
    if hashes is not None and dtypes and all(b.packed_keys == dtypes for b in batches):
        values = concat([Updates(v, b.times, b.diffs) for b, v in zip(batches, held, strict=True)])
        values = values.with_times(_advanced(values.times, since))
        return narrowed_also(_build_by_hashes(values, hashes, dtypes, description, True), kept)
    parts = [Updates((*b.keys, *v), b.times, b.diffs) for b, v in zip(batches, held, strict=True)]
    return narrowed_also(build_merged(parts, first, description, hashes), kept)


def narrowed_also(batch: Batch, kept: Narrowed) -> Batch:
    """`batch`, built of value columns `kept` at int32 (merged narrowed: `merge_values`),
    reading those back at int64 too."""
    if kept:
        narrowed = tuple(sorted({*(batch.narrowed or ()), *kept}))
        object.__setattr__(batch, "narrowed", narrowed)
    return batch


def build_merged(
    parts: Sequence[Updates], like: Batch, description: Description, hashes: Hashes | None
) -> Batch:
    """The batch of `parts`, entries of batches like `like` being merged (sorted runs;
    `hashes`: theirs, concatenated, unless the key is its own hash): `build_parts`."""
    return build_parts(parts, like.key_arity, description, runs=True, hashes=hashes)


def build_parts(
    parts: Sequence[Updates],
    key_arity: int,
    description: Description,
    runs: bool = False,
    hashes: Hashes | None = None,
) -> Batch:
    """`Batch.build(concat(parts), ...)`. Identity-keyed integer rows that pack are
    packed part by part into one array, not concatenated first, each part's times
    advanced on their own (one repeated time stays one value: `Tuning.packed_parts`,
    ADR 0063): a merge's batches, a round's changes from two joins."""
    nonempty = [p for p in parts if len(p)]
    identity = key_arity == 1 and bool(nonempty) and nonempty[0].columns[0].dtype.kind in "iu"
    if identity and TUNING.packed_parts and sum(map(len, nonempty)) > TUNING.few:
        since = description.since
        advanced = [p.with_times(_advanced(p.times, since)) for p in nonempty]
        diffs = {uniform_diff(p.diffs) for p in advanced}
        diff = diffs.pop() if len(diffs) == 1 else None
        packed = None
        if diff is not None or TUNING.packed_diffs:
            packed = consolidate_packed_parts(advanced, diff, runs)
        if packed is not None:
            times, kept = compact_uniform(packed.times, packed.diffs)
            return Batch(key_hash(packed.columns[:1]), packed.columns, 1, times, kept, description)
    return Batch.build(concat(parts), key_arity, description, runs=runs, hashes=hashes)
