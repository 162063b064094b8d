"""A delta query's pipeline over a few changes, in plain Python.

Layer: joins. Imports `differential` only.

A single-edge update starts every pipeline of a delta query from one change,
and each count, propose and validate then costs a dozen numpy calls (hashing,
`searchsorted`, gathering) to move a handful of values: that fixed cost is the
whole cost. Below `TUNING.few` changes a pipeline runs here instead, on Python
tuples: prefixes are `(row, time, diff)` with the row in the pipeline's variable
order, and every lookup is one `Arranged.lookup_entries` call per extender over
all prefixes at once, answered as Python entries.

The steps are those of `joins.extenders` (the fewest entries propose, every other
binding validates, times join and multiplicities multiply), so the results are
the numpy path's up to order. A lookup that finds more than `TUNING.few_pairs`
entries (a hub) returns None and the caller runs the numpy path from the start:
lists pay only while they are short. Only integer columns take this path (`FewKeys`'
identity hashes), and only bindings, not negations, propose or validate here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from differential import small
from differential.batch import Updates, python_rows, python_times
from differential.operators.arrange import Arranged
from differential.time import Time
from differential.trace.cursor import FewKeys, columns_of
from differential.tuning import TUNING

Row = tuple[object, ...]  # integers, as `FewKeys` rows
Prefix = tuple[Row, Time, int]  # variable values in pipeline order, time, multiplicity
Entries = list[tuple[object, Time, int]]  # proposed values, with time and multiplicity


def prefixes_of(updates: Updates) -> list[Prefix]:
    """The changes a pipeline starts from, as Python prefixes."""
    rows = python_rows(updates.columns, len(updates))
    times = python_times(updates.times)
    return list(zip(rows, times, updates.diffs.tolist(), strict=True))


def to_updates(prefixes: list[Prefix], dtypes: Sequence[np.dtype], depth: int) -> Updates:
    """Python prefixes as `Updates` with columns of `dtypes`."""
    if not prefixes:
        return Updates.empty(len(dtypes), depth, dtypes)
    rows, times, diffs = zip(*prefixes, strict=True)
    columns = tuple(columns_of(rows, dtypes))
    return Updates(
        columns, np.array(times, dtype=np.int64).T.copy(), np.array(diffs, dtype=np.int64)
    )


def join(a: Time, b: Time) -> Time:
    """The least upper bound of two times (coordinate-wise maximum)."""
    return a if a == b else tuple(map(max, a, b))


def few_keys(rows: list[Row]) -> FewKeys:
    """Query keys with the hashes `key_hash` gives their columns (uint64 values above
    2**63 wrap as they do in an int64 hash column)."""
    return FewKeys(rows, small.key_hashes(rows, len(rows[0]) == 1))  # type: ignore[arg-type]


def matched(
    prefixes: list[Prefix],
    positions: Sequence[int],
    arranged: Arranged,
    time: Time,
    include_delta: bool,
) -> list[Prefix] | None:
    """The prefixes whose values at `positions` are a key of `arranged` (keyed by all
    its columns), each met with every entry found (a `Check`'s filter)."""
    if not prefixes:
        return prefixes
    keys = few_keys([tuple(row[p] for p in positions) for row, _, _ in prefixes])
    found = arranged.lookup_entries(keys, time, include_delta, TUNING.few_pairs)
    if found is None:
        return None
    out: list[Prefix] = []
    for i, t, _, d in found:
        row, pt, pd = prefixes[i]
        out.append((row, join(pt, t), pd * d))
    return out


def constant(prefixes: list[Prefix], position: int, value: object) -> list[Prefix]:
    """The prefixes whose value at `position` equals `value`."""
    return [p for p in prefixes if p[0][position] == value]


class Binding:
    """A binary binding seen from a stage: `by_key` proposes values under the key at
    `key_position` (the same collection `by_both` holds, keyed by the pair)."""

    def __init__(self, key_position: int, by_key: Arranged, new: bool) -> None:
        self.key_position = key_position
        self.by_key, self.new = by_key, new

    def proposals(self, prefixes: list[Prefix], time: Time) -> list[Entries] | None:
        """Per prefix, the `(value, time, diff)` entries under its key."""
        keys = few_keys([(row[self.key_position],) for row, _, _ in prefixes])
        found = self.by_key.lookup_entries(keys, time, self.new, TUNING.few_pairs)
        if found is None:
            return None
        groups: list[Entries] = [[] for _ in prefixes]
        for i, t, values, d in found:
            groups[i].append((values[0], t, d))
        return groups


def extend(prefixes: list[Prefix], bindings: list[Binding], time: Time) -> list[Prefix] | None:
    """Bind one more variable: per prefix, the binding with the fewest entries
    proposes, the others validate; survivors carry the value at the row's end.

    Every binding's entries under the prefix's key are at hand (they were counted
    by fetching them), so a candidate is validated against them: the entries a
    lookup of the pair `(key, value)` in `by_both` would find are those with that
    value, since both arrangements hold the same collection."""
    if not prefixes:
        return prefixes
    groups = []
    for binding in bindings:
        found = binding.proposals(prefixes, time)
        if found is None:
            return None
        groups.append(found)
    out: list[Prefix] = []
    for i, (row, pt, pd) in enumerate(prefixes):
        mine = [g[i] for g in groups]
        w = min(range(len(mine)), key=lambda k: len(mine[k]))
        candidates = [(v, join(pt, t), pd * d) for v, t, d in mine[w]]
        for o, entries in enumerate(mine):
            if o != w and candidates:
                candidates = _met(candidates, entries)
        out.extend(((*row, v), t, d) for v, t, d in candidates)
    return out


def _met(candidates: Entries, entries: Entries) -> Entries:
    """Each candidate met with every entry of its value: times join, diffs multiply."""
    by_value: dict[object, list[tuple[Time, int]]] = {}
    for v, t, d in entries:
        by_value.setdefault(v, []).append((t, d))
    return [(v, join(ct, t), cd * d) for v, ct, cd in candidates for t, d in by_value.get(v, ())]
