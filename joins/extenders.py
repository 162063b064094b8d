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

The delta query works on `Proposals` (`proposals` and `check`): candidates
carry only the prefix row they extend, the proposed value, and the time and
multiplicity met so far, so proposing and validating many more candidates than
survive moves three columns rather than whole prefixes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from differential.batch import Column, Diffs, Updates
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
        times = found.times if self.times is None else np.maximum(self.times[:, rows], found.times)
        diffs = found.diffs if self.diffs is None else self.diffs[rows] * found.diffs
        return Proposals(self.owner[rows], self.value[rows], times, diffs)

    def extend(self, prefixes: Prefixes, var: str) -> Prefixes:
        """The prefixes extended by `var`: prefix columns, times and diffs gathered now."""
        mine = prefixes.updates.take(self.owner)
        times = mine.times if self.times is None else np.maximum(mine.times, self.times)
        diffs = mine.diffs if self.diffs is None else mine.diffs * self.diffs
        return Prefixes((*prefixes.vars, var), Updates((*mine.columns, self.value), times, diffs))


def _matched(prefixes: Prefixes, owner: Owner, found: Updates) -> Updates:
    """The prefixes of `owner` with the found entries' times joined and diffs multiplied."""
    mine = prefixes.updates.take(owner)
    return Updates(mine.columns, np.maximum(mine.times, found.times), mine.diffs * found.diffs)


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

    def count(self, prefixes: Prefixes, time: Time) -> Owner:
        keys = prefixes.column(self.key)
        return self.by_key.count(key_hash([keys]), time, self.include_delta)

    def proposals(self, prefixes: Prefixes, rows: Owner, time: Time) -> Proposals:
        """Every value under the key of each prefix row in `rows`."""
        keys = prefixes.column(self.key)[rows]
        hashes = key_hash([keys])
        owner, found = self.by_key.lookup([keys], hashes, time, self.include_delta, columns=[1])
        return Proposals(rows[owner], found.columns[0], found.times, found.diffs)

    def check(self, prefixes: Prefixes, proposals: Proposals, time: Time) -> Proposals:
        """The proposals whose `(key, value)` pair is in the relation."""
        key = prefixes.column(self.key)[proposals.owner]
        keys = [key, proposals.value] if self.both_order[0] == self.key else [proposals.value, key]
        hashes = key_hash(keys)
        owner, found = self.by_both.lookup(keys, hashes, time, self.include_delta, columns=[])
        return proposals.met(owner, found)

    def propose(self, prefixes: Prefixes, time: Time) -> Prefixes:
        rows = np.arange(len(prefixes), dtype=np.intp)
        return self.proposals(prefixes, rows, time).extend(prefixes, self.value)

    def validate(self, prefixes: Prefixes, time: Time) -> Prefixes:
        keys = [prefixes.column(v) for v in self.both_order]
        owner, found = self.by_both.lookup(keys, key_hash(keys), time, self.include_delta)
        return Prefixes(prefixes.vars, _matched(prefixes, owner, found))


@dataclass
class UnaryExtender:
    """A set of values of one variable (a unary relation): validates only.

    Proposing from a unary set would be a cross product; its count says never.
    """

    value: str
    arranged: Arranged
    include_delta: bool

    def count(self, prefixes: Prefixes, time: Time) -> Owner:
        return np.full(len(prefixes), NEVER, dtype=np.intp)

    def propose(self, prefixes: Prefixes, time: Time) -> Prefixes:
        raise AssertionError("a unary extender never wins the count")

    def proposals(self, prefixes: Prefixes, rows: Owner, time: Time) -> Proposals:
        raise AssertionError("a unary extender never wins the count")

    def check(self, prefixes: Prefixes, proposals: Proposals, time: Time) -> Proposals:
        keys = [proposals.value]
        hashes = key_hash(keys)
        owner, found = self.arranged.lookup(keys, hashes, time, self.include_delta, columns=[])
        return proposals.met(owner, found)

    def validate(self, prefixes: Prefixes, time: Time) -> Prefixes:
        keys = [prefixes.column(self.value)]
        owner, found = self.arranged.lookup(keys, key_hash(keys), time, self.include_delta)
        return Prefixes(prefixes.vars, _matched(prefixes, owner, found))


@dataclass
class ConstantExtender:
    """A variable equal to a constant: count 1, proposes the constant, validates equality."""

    value: str
    constant: object
    dtype: np.dtype

    def count(self, prefixes: Prefixes, time: Time) -> Owner:
        return np.ones(len(prefixes), dtype=np.intp)

    def propose(self, prefixes: Prefixes, time: Time) -> Prefixes:
        rows = np.arange(len(prefixes), dtype=np.intp)
        return self.proposals(prefixes, rows, time).extend(prefixes, self.value)

    def proposals(self, prefixes: Prefixes, rows: Owner, time: Time) -> Proposals:
        return Proposals(rows, np.full(len(rows), self.constant, dtype=self.dtype))

    def check(self, prefixes: Prefixes, proposals: Proposals, time: Time) -> Proposals:
        keep = np.flatnonzero(proposals.value == self.constant)
        times = None if proposals.times is None else proposals.times[:, keep]
        diffs = None if proposals.diffs is None else proposals.diffs[keep]
        return Proposals(proposals.owner[keep], proposals.value[keep], times, diffs)

    def validate(self, prefixes: Prefixes, time: Time) -> Prefixes:
        return prefixes.take(prefixes.column(self.value) == self.constant)


@dataclass
class PredicateExtender:
    """A comparison between bound variables: validates only (the mask says which hold)."""

    needs: frozenset[str]
    holds: Callable[[Prefixes], npt.NDArray[np.bool_]]
    text: str = ""

    def validate(self, prefixes: Prefixes, time: Time) -> Prefixes:
        return prefixes.take(self.holds(prefixes)) if len(prefixes) else prefixes


Extender = CollectionExtender | UnaryExtender | ConstantExtender
