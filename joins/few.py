"""A delta query's pipeline over a few changes, on Python lists: the rows tactic.

Layer: joins. Imports `differential` and `joins.extend`, `joins.pipeline`.

A single-edge update starts every pipeline of a delta query from one change,
and each count, propose and validate then costs a dozen numpy calls (hashing,
`searchsorted`, gathering) to move a handful of values: that fixed cost is the
whole cost. Below `TUNING.few` changes a pipeline runs here instead, on Python
tuples: prefixes are `(row, time, diff)` with the row in the pipeline's variable
order, proposals `(prefix index, value, time, diff)`, and every lookup is one
`Arranged.lookup_entries` call per extender over all prefixes at once, answered as
Python entries.

The extension is the one algorithm of `joins.extend` (the fewest entries propose,
every other binding validates, times join and multiplicities multiply), over
`RowShape`, with `Binding` as the extender; the pipeline's steps are `RowsPipeline`'s,
walked by the same driver as the columns tactic (`delta_query.DeltaQueryOp`). The
results are the columns tactic's up to order. A lookup that finds more than
`TUNING.few_pairs` entries (a hub) raises `Refused` and the driver runs the columns
tactic from the start: lists pay only while they are short. Only integer columns
take this path (`FewKeys`' identity hashes), and only bindings, not negations or
constants, propose or validate here; predicates filter the finished rows (they
commute with extending).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from differential import small
from differential.batch import Updates, python_rows, python_times
from differential.operators.arrange import Arranged
from differential.time import Time
from differential.trace.cursor import FewKeys, columns_of
from differential.tuning import TUNING
from joins import extend as extension
from joins.extenders import Prefixes
from joins.pipeline import Query, Stage

Row = tuple[object, ...]  # integers, as `FewKeys` rows
Prefix = tuple[Row, Time, int]  # variable values in pipeline order, time, multiplicity
Entries = list[tuple[object, Time, int]]  # proposed values, with time and multiplicity
Candidate = tuple[int, object, Time, int]  # prefix index, value, time and diff met so far


class Refused(Exception):
    """A lookup found more than `TUNING.few_pairs` entries: run the columns tactic."""


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
    `key_position` (the same collection `by_both` holds, keyed by the pair). An
    extender (`joins.extend.Extender`) over Python prefixes.

    Every entry under a prefix's key is fetched to count it, so a proposal is
    validated against them: the entries a lookup of the pair `(key, value)` in
    `by_both` would find are those with that value (both hold one collection)."""

    def __init__(self, key_position: int, by_key: Arranged, new: bool) -> None:
        self.key_position = key_position
        self.by_key, self.new = by_key, new
        self.of: list[Prefix] | None = None  # the prefixes `groups` are of
        self.groups: list[Entries] = []

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

    def entries(self, prefixes: list[Prefix], time: Time) -> list[Entries]:
        """`proposals`, fetched once per batch of prefixes (`Refused`: too many)."""
        if self.of is not prefixes:
            found = self.proposals(prefixes, time) if prefixes else []
            if found is None:
                raise Refused
            self.of, self.groups = prefixes, found
        return self.groups

    def count(self, prefixes: list[Prefix], time: Time) -> list[int]:
        return [len(g) for g in self.entries(prefixes, time)]

    def propose(self, prefixes: list[Prefix], rows: list[int], time: Time) -> list[Candidate]:
        groups = self.entries(prefixes, time)
        out: list[Candidate] = []
        for i in rows:
            _, pt, pd = prefixes[i]
            out.extend([(i, v, join(pt, t), pd * d) for v, t, d in groups[i]])
        return out

    def validate(
        self, prefixes: list[Prefix], proposals: list[Candidate], time: Time
    ) -> list[Candidate]:
        """Each candidate met with every entry of its value: times join, diffs multiply."""
        groups = self.entries(prefixes, time)
        out: list[Candidate] = []
        append = out.append
        last, by_value = -1, _by_value([])
        for o, v, ct, cd in proposals:  # (grouped by prefix, as proposed)
            if o != last:
                last, by_value = o, _by_value(groups[o])
            for t, d in by_value.get(v, ()):
                append((o, v, join(ct, t), cd * d))
        return out


def _by_value(entries: Entries) -> dict[object, list[tuple[Time, int]]]:
    by_value: dict[object, list[tuple[Time, int]]] = {}
    for v, t, d in entries:
        by_value.setdefault(v, []).append((t, d))
    return by_value


class RowShape:
    """Python prefixes and proposals, for `joins.extend.extend`."""

    def size(self, prefixes: list[Prefix]) -> int:
        return len(prefixes)

    def fewest(self, counts: Sequence[list[int]]) -> tuple[list[int], list[int]]:
        """Per prefix, the first extender with the fewest entries, and their number."""
        winner, sizes = [], []
        for per_prefix in zip(*counts, strict=True):
            w = min(range(len(per_prefix)), key=per_prefix.__getitem__)
            winner.append(w)
            sizes.append(per_prefix[w])
        return winner, sizes

    def total(self, sizes: list[int]) -> int:
        return sum(sizes)

    def chunks(self, n: int, sizes: list[int] | None) -> tuple[list[int]]:
        return (list(range(n)),)  # (a few prefixes: one chunk)

    def won(self, rows: list[int], winner: Any, w: int) -> list[int]:
        return rows if winner is None else [i for i in rows if winner[i] == w]

    def extended(
        self, prefixes: list[Prefix], proposals: list[Candidate], var: str
    ) -> list[Prefix]:
        return [((*prefixes[o][0], v), t, d) for o, v, t, d in proposals]

    def gathered(self, prefixes: list[Prefix], var: str, parts: list[list[Prefix]]) -> list[Prefix]:
        return [p for part in parts for p in part]


ROWS = RowShape()


def extend(prefixes: list[Prefix], bindings: list[Binding], time: Time) -> list[Prefix] | None:
    """Bind one more variable (`joins.extend.extend` over `RowShape`): survivors carry
    the value at the row's end (None: a lookup found too many entries)."""
    try:
        return extension.extend(ROWS, prefixes, "", bindings, [], time)
    except Refused:
        return None


class RowsPipeline:
    """One pipeline's steps on Python lists, at `time`, with the bindings in `new`
    seen with this time's changes. Predicates are kept for the end (`finish`)."""

    def __init__(self, query: Query, new: frozenset[int], time: Time) -> None:
        self.query, self.new, self.time = query, new, time
        self.vars: tuple[str, ...] = ()
        self.predicates: list[int] = []

    def start(self, vars_: tuple[str, ...], changes: Updates) -> list[Prefix]:
        self.vars = vars_
        return prefixes_of(changes)

    def empty(self, prefixes: list[Prefix]) -> bool:
        return not prefixes

    def parts(self, prefixes: list[Prefix], stage: Stage) -> list[list[Prefix]]:
        """Bind `stage.variable`, as one part (`Refused`: a lookup found too many
        entries). One part: the walk then goes stage by stage, as `self.vars` does."""
        bindings = [self._binding(j, stage.variable) for j in stage.proposers]
        found = extension.extend(ROWS, prefixes, stage.variable, bindings, [], self.time)
        self.vars = (*self.vars, stage.variable)
        return [found]

    def check(self, prefixes: list[Prefix], stage: Stage) -> list[Prefix]:
        """The stage's constants and complete or unary bindings; its predicates later."""
        query, vars_ = self.query, self.vars
        for k in stage.fixed:
            const = query.constants[k]
            prefixes = constant(prefixes, vars_.index(const.var), const.value.item())
        for j in (*stage.unary, *stage.complete):
            where = [vars_.index(v) for v in query.patterns[j].vars]
            found = matched(prefixes, where, query.patterns[j].by_both, self.time, j in self.new)
            if found is None:
                raise Refused
            prefixes = found
        self.predicates.extend(stage.predicates)
        return prefixes

    def finish(self, prefixes: list[Prefix]) -> Updates:
        """The rows as columns, filtered by the predicates, in the output's order."""
        query, vars_ = self.query, self.vars
        if not set(query.out_vars) <= set(vars_):  # (stopped early: nothing came through)
            vars_ = query.out_vars
            prefixes = []
        dtypes = [query.dtypes[v] for v in vars_]
        found = Prefixes(vars_, to_updates(prefixes, dtypes, len(self.time)))
        for k in self.predicates:
            found = query.predicates[k].filter(found, self.time)
        u = found.updates
        columns = tuple(u.columns[vars_.index(v)] for v in query.out_vars)
        return Updates(columns, u.times, u.diffs)

    def _binding(self, j: int, var: str) -> Binding:
        """Binary binding `j` proposing `var` from its variable bound in `self.vars`."""
        p = self.query.patterns[j]
        first = p.vars[1] == var
        by_key = p.by_first if first else p.by_second
        assert by_key is not None
        key = p.vars[0] if first else p.vars[1]
        return Binding(self.vars.index(key), by_key, j in self.new)
