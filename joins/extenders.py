"""Prefix extenders: GenericJoin's count / propose / validate over arrangements.

Layer: joins. Imports `differential` only.

A prefix is an assignment of some variables, carried as `Updates` whose
columns follow `Prefixes.vars`, with the time and multiplicity of the
derivation so far. Extending by a variable `v`:

1. count: every extender says, per prefix, how many values of `v` it would
   propose (its number of entries under the prefix's key);
2. propose: the extender with the smallest count proposes for that prefix;
3. validate: every other extender keeps the proposals it also contains.

Each extender contributes its relation's multiplicity exactly once (by
proposing or by validating) and joins times (`⊔`), so a delta query computes
the same updates as a chain of binary joins, without intermediate state.

Every extender implements the `Extender` protocol (`joins.extend`, dogsdogsdogs'
`PrefixExtender`): `count(prefixes)`, `propose(prefixes, rows)` and
`validate(prefixes, proposals)`; these are its columns tactic (numpy), and
`joins.few.Binding` its rows tactic, both driven by the one `joins.extend.extend`.
Proposals carry only the prefix row they extend, the proposed value, and the
time and multiplicity met so far, so proposing and validating many more
candidates than survive moves three columns rather than whole prefixes. A
binding whose variables are all bound already is a `Check`: `filter(prefixes)`
keeps (and scales) the prefixes it agrees with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from differential.batch import (
    Column,
    Diffs,
    Updates,
    concat,
    joined_times,
    multiplied,
    take_diffs,
    take_times,
)
from differential.operators.arrange import Arranged, Owner
from differential.time import Time, Times
from differential.trace.batch import key_hash

NEVER = np.iinfo(np.intp).max  # the count of an extender that cannot propose


@dataclass(frozen=True)
class Prefixes:
    """Partial assignments: `updates.columns[i]` holds variable `vars[i]`."""

    vars: tuple[str, ...]
    updates: Updates

    def __len__(self) -> int:
        return len(self.updates)

    def column(self, var: str) -> Column:
        return self.updates.columns[self.vars.index(var)]

    def take(self, rows: Owner | npt.NDArray[np.bool_]) -> Prefixes:
        return Prefixes(self.vars, self.updates.take(rows))


@dataclass(frozen=True)
class Proposals:
    """Candidate extensions of prefixes, not yet materialized.

    Candidate `i` extends prefix row `owner[i]` by `value[i]`; `times`/`diffs`
    are the join of the times and the product of the multiplicities of the
    entries it met so far (None: none yet, the identity). Proposing and
    validating millions of candidates moves three columns; only the survivors
    gather the prefix's columns (`extend`).
    """

    owner: Owner
    value: Column
    times: Times | None = None
    diffs: Diffs | None = None

    def __len__(self) -> int:
        return len(self.owner)

    def met(self, rows: Owner, found: Updates) -> Proposals:
        """Candidates `rows` (repeated as matched), having met the `found` entries."""
        times, diffs = found.times, found.diffs
        if self.times is not None:
            times = joined_times(take_times(self.times, rows), times)
        if self.diffs is not None:
            diffs = multiplied(take_diffs(self.diffs, rows), diffs)
        return Proposals(self.owner[rows], self.value[rows], times, diffs)

    def extend(self, prefixes: Prefixes, var: str, keep: tuple[str, ...] | None = None) -> Prefixes:
        """The prefixes extended by `var`: prefix columns, times and diffs gathered now
        (of the variables in `keep`, in their order, when given: `var` last if kept)."""
        vars_ = prefixes.vars if keep is None else tuple(v for v in prefixes.vars if v in keep)
        if vars_ != prefixes.vars:
            kept = tuple(prefixes.column(v) for v in vars_)
            prefixes = Prefixes(vars_, prefixes.updates.with_columns(kept))
        mine = prefixes.updates.take(self.owner)
        times = mine.times if self.times is None else joined_times(mine.times, self.times)
        diffs = mine.diffs if self.diffs is None else multiplied(mine.diffs, self.diffs)
        if keep is not None and var not in keep:
            return Prefixes(vars_, Updates(mine.columns, times, diffs))
        return Prefixes((*vars_, var), Updates((*mine.columns, self.value), times, diffs))


def _matched(prefixes: Prefixes, owner: Owner, found: Updates) -> Updates:
    """The prefixes of `owner` with the found entries' times joined and diffs multiplied."""
    mine = prefixes.updates.take(owner)
    times, diffs = joined_times(mine.times, found.times), multiplied(mine.diffs, found.diffs)
    return Updates(mine.columns, times, diffs)


def _lookup(
    arranged: Arranged,
    keys: list[Column],
    time: Time,
    include_delta: bool,
    columns: list[int] | None,
    at: Time | None,
) -> tuple[Owner, Updates]:
    """`arranged.lookup`, or, given a time `at` at or before every prefix's, its found
    times joined with `at` as they are found (`lookup_joined`, ADR 0086): every time a
    candidate meets is joined with its prefix's time in the end, so joining `at` earlier
    changes no time, and the parts of batches at or before `at` add no time column."""
    hashes = key_hash(keys)
    if at is None:
        return arranged.lookup(keys, hashes, time, include_delta, columns)
    return arranged.lookup_joined(keys, hashes, time, include_delta, columns, at)


@dataclass
class CollectionExtender:
    """A binary relation `(key, value)`: proposes values of `value` for bound `key`.

    `by_key` arranges the relation by its key column (values: the other column),
    `by_both` by both columns; `include_delta` says whether this binding is
    seen as new (after the current time's changes) or old, by binding order.
    """

    key: str
    value: str
    by_key: Arranged
    by_both: Arranged
    both_order: tuple[str, str]
    include_delta: bool
    at: Time | None = None  # a time at or before every prefix's: lookups join it (ADR 0086)

    def count(self, prefixes: Prefixes, time: Time) -> Owner:
        keys = prefixes.column(self.key)
        return self.by_key.count(key_hash([keys]), time, self.include_delta)

    def propose(self, prefixes: Prefixes, rows: Owner, time: Time) -> Proposals:
        """Every value under the key of each prefix row in `rows`."""
        keys = prefixes.column(self.key)[rows]
        owner, found = _lookup(self.by_key, [keys], time, self.include_delta, [1], self.at)
        return Proposals(rows[owner], found.columns[0], found.times, found.diffs)

    def validate(self, prefixes: Prefixes, proposals: Proposals, time: Time) -> Proposals:
        """The proposals whose `(key, value)` pair is in the relation."""
        key = prefixes.column(self.key)[proposals.owner]
        keys = [key, proposals.value] if self.both_order[0] == self.key else [proposals.value, key]
        owner, found = _lookup(self.by_both, keys, time, self.include_delta, [], self.at)
        return proposals.met(owner, found)

    def filter(self, prefixes: Prefixes, time: Time) -> Prefixes:
        keys = [prefixes.column(v) for v in self.both_order]
        owner, found = _lookup(self.by_both, keys, time, self.include_delta, None, self.at)
        return Prefixes(prefixes.vars, _matched(prefixes, owner, found))


@dataclass
class UnaryExtender:
    """A set of values of one variable (a unary relation).

    It validates like any binding, and it may propose: its count is the size
    of its set whatever the prefix, and proposing crosses each prefix with
    every value (3DF's remedy for categorical skew: a small set beats a key
    with a huge fan-out).
    """

    value: str
    arranged: Arranged
    include_delta: bool
    at: Time | None = None  # a time at or before every prefix's: lookups join it (ADR 0086)
    _entries: Updates | None = field(default=None, init=False, repr=False)

    def count(self, prefixes: Prefixes, time: Time) -> Owner:
        return np.full(len(prefixes), self.arranged.visible(time, self.include_delta), np.intp)

    def propose(self, prefixes: Prefixes, rows: Owner, time: Time) -> Proposals:
        """Each prefix row in `rows` with every value of the set (read once per extender)."""
        if self._entries is None:
            self._entries = self.arranged.entries(time, self.include_delta)
        found = self._entries
        m = len(found)
        return Proposals(
            np.repeat(rows, m),
            np.tile(found.columns[0], len(rows)),
            np.tile(found.times, (1, len(rows))),
            np.tile(found.diffs, len(rows)),
        )

    def validate(self, prefixes: Prefixes, proposals: Proposals, time: Time) -> Proposals:
        keys = [proposals.value]
        owner, found = _lookup(self.arranged, keys, time, self.include_delta, [], self.at)
        return proposals.met(owner, found)

    def filter(self, prefixes: Prefixes, time: Time) -> Prefixes:
        keys = [prefixes.column(self.value)]
        owner, found = _lookup(self.arranged, keys, time, self.include_delta, None, self.at)
        return Prefixes(prefixes.vars, _matched(prefixes, owner, found))


@dataclass
class ConstantExtender:
    """A variable equal to a constant: count 1, proposes the constant, validates equality."""

    value: str
    constant: object
    dtype: np.dtype

    def count(self, prefixes: Prefixes, time: Time) -> Owner:
        return np.ones(len(prefixes), dtype=np.intp)

    def propose(self, prefixes: Prefixes, rows: Owner, time: Time) -> Proposals:
        return Proposals(rows, np.full(len(rows), self.constant, dtype=self.dtype))

    def validate(self, prefixes: Prefixes, proposals: Proposals, time: Time) -> Proposals:
        keep = np.flatnonzero(proposals.value == self.constant)
        times = None if proposals.times is None else proposals.times[:, keep]
        diffs = None if proposals.diffs is None else proposals.diffs[keep]
        return Proposals(proposals.owner[keep], proposals.value[keep], times, diffs)

    def filter(self, prefixes: Prefixes, time: Time) -> Prefixes:
        return prefixes.take(prefixes.column(self.value) == self.constant)


@dataclass
class AntijoinExtender:
    """A negated binding `!r(vars)` (stratified negation): validates only.

    In the product it is the factor `1 - N(vars)`, `N` the negated relation
    (a set). Validating multiplies each prefix by one minus `N`'s accumulation
    at the prefix's time: a prefix whose tuple is present drops, the others
    stay. Entries of `N` at times not at or before a prefix's (none when `N`
    is of a lower stratum) change the answer only later; they become
    correction rows at the joined time, so the factor is exact for partially
    ordered times too. `N`'s own changes are the source of a pipeline of their
    own (with negated diffs), like any other binding's.
    """

    vars: tuple[str, ...]  # the arrangement's key columns, in order
    arranged: Arranged
    include_delta: bool
    proposing: str = ""  # the variable whose values `validate`'s proposals carry

    def count(self, prefixes: Prefixes, time: Time) -> Owner:
        return np.full(len(prefixes), NEVER, dtype=np.intp)

    def filter(self, prefixes: Prefixes, time: Time) -> Prefixes:
        u = prefixes.updates
        keys = [prefixes.column(v) for v in self.vars]
        owner, found = self._lookup(keys, time)
        factor, later = _absence(len(u), u.times, owner, found)
        keep = np.flatnonzero(factor)
        mine = u.take(keep)
        kept = Updates(mine.columns, mine.times, mine.diffs * factor[keep])
        if not later.any():
            return Prefixes(prefixes.vars, kept)
        extra = _matched(prefixes, owner[later], _negated(found, later))
        return Prefixes(prefixes.vars, concat([kept, extra]))

    def validate(self, prefixes: Prefixes, proposals: Proposals, time: Time) -> Proposals:
        """The proposals whose tuple is absent (scaled by the exact factor)."""
        rows = proposals.owner
        keys = [
            proposals.value if v == self.proposing else prefixes.column(v)[rows] for v in self.vars
        ]
        times = prefixes.updates.times[:, rows]
        if proposals.times is not None:
            times = np.maximum(times, proposals.times)
        owner, found = self._lookup(keys, time)
        factor, later = _absence(len(proposals), times, owner, found)
        keep = np.flatnonzero(factor)
        diffs = factor[keep] if proposals.diffs is None else proposals.diffs[keep] * factor[keep]
        if not later.any():
            kept_times = None if proposals.times is None else proposals.times[:, keep]
            return Proposals(rows[keep], proposals.value[keep], kept_times, diffs)
        late = Proposals(rows, proposals.value, times, proposals.diffs).met(
            owner[later], _negated(found, later)
        )
        assert late.times is not None and late.diffs is not None
        return Proposals(
            np.concatenate([rows[keep], late.owner]),
            np.concatenate([proposals.value[keep], late.value]),
            np.concatenate([times[:, keep], late.times], axis=1),
            np.concatenate([diffs, late.diffs]),
        )

    def _lookup(self, keys: list[Column], time: Time) -> tuple[Owner, Updates]:
        return self.arranged.lookup(keys, key_hash(keys), time, self.include_delta, columns=[])


def _absence(
    n: int, times: Times, owner: Owner, found: Updates
) -> tuple[Diffs, npt.NDArray[np.bool_]]:
    """Per row, one minus the negated relation's accumulation at the row's time
    (its entries at or before that time), and which found entries are later."""
    before = np.all(found.times <= times[:, owner], axis=0)
    present = np.zeros(n, dtype=np.int64)  # summed in int64: exact for any count
    np.add.at(present, owner[before], found.diffs[before])
    return 1 - present, ~before


def _negated(found: Updates, rows: npt.NDArray[np.bool_]) -> Updates:
    return Updates(found.columns, found.times[:, rows], -found.diffs[rows])


@dataclass
class PredicateExtender:
    """A comparison between bound variables: validates only (the mask says which hold)."""

    needs: frozenset[str]
    holds: Callable[[Prefixes], npt.NDArray[np.bool_]]
    text: str = ""

    def filter(self, prefixes: Prefixes, time: Time) -> Prefixes:
        return prefixes.take(self.holds(prefixes)) if len(prefixes) else prefixes


class Check(Protocol):
    """A binding whose variables the prefixes already bind."""

    def filter(self, prefixes: Prefixes, time: Time) -> Prefixes:
        """The prefixes this binding agrees with (multiplicities and times met)."""
        ...
