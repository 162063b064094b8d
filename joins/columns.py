"""A delta query's pipeline on numpy columns: the reference tactic.

Layer: joins. Imports `differential` and the extenders.

Prefixes are `Prefixes` (`Updates` whose columns follow the variables bound so
far), proposals are `Proposals`; every binding is an extender of
`joins.extenders` (`CollectionExtender`, `UnaryExtender`, `ConstantExtender`,
`AntijoinExtender`) and the extension is the one algorithm of `joins.extend`,
over `ColumnShape`. The driver (`delta_query.DeltaQueryOp`) walks the pipeline.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from differential.batch import Updates, concat, weighed_runs
from differential.dataflow import row_limit
from differential.time import Time
from differential.tuning import TUNING
from joins.extend import Extender, extend, extend_parts
from joins.extenders import (
    AntijoinExtender,
    CollectionExtender,
    ConstantExtender,
    Owner,
    Prefixes,
    Proposals,
    UnaryExtender,
)
from joins.pipeline import Query, Stage

ColumnExtender = Extender[Prefixes, Proposals, Owner, Owner]


class ColumnShape:
    """`Prefixes` and `Proposals` of numpy columns, for `joins.extend.extend`."""

    def __init__(self, dtype: np.dtype, keep: tuple[str, ...] | None = None) -> None:
        self.dtype = dtype  # of the variable being bound
        self.keep = keep  # the variables extended prefixes hold (None: all, and the new)

    def size(self, prefixes: Prefixes) -> int:
        return len(prefixes)

    def fewest(self, counts: Sequence[Owner]) -> tuple[Owner, Owner]:
        stacked = np.stack(counts)
        winner = np.argmin(stacked, axis=0)
        return winner, np.take_along_axis(stacked, winner[None, :], axis=0)[0]

    def total(self, sizes: Owner) -> int:
        return int(sizes.sum())

    def chunks(self, n: int, sizes: Owner | None) -> Iterator[Owner]:
        """Consecutive runs of the rows `0..n`: about `TUNING.proposals` candidates each
        by their proposal `sizes`, or `TUNING.prefixes` rows each when unknown."""
        if sizes is not None:
            yield from weighed_runs(np.cumsum(sizes), TUNING.proposals)
            return
        for lo, hi in itertools.pairwise([*range(0, n, TUNING.prefixes), n]):
            yield np.arange(lo, hi, dtype=np.intp)

    def won(self, rows: Owner, winner: Any, w: int) -> Owner:
        return rows if winner is None else rows[winner[rows] == w]

    def extended(self, prefixes: Prefixes, proposals: Proposals, var: str) -> Prefixes:
        return proposals.extend(prefixes, var, self.keep)

    def gathered(self, prefixes: Prefixes, var: str, parts: list[Prefixes]) -> Prefixes:
        if not parts:
            empty = Proposals(np.zeros(0, dtype=np.intp), np.zeros(0, dtype=self.dtype))
            return empty.extend(prefixes, var, self.keep)
        return Prefixes(parts[0].vars, concat([p.updates for p in parts]))


class ColumnsPipeline:
    """One pipeline's steps on columns, at `time`, with the bindings in `new` seen
    with this time's changes."""

    def __init__(self, query: Query, new: frozenset[int], time: Time) -> None:
        self.query, self.new, self.time = query, new, time

    def start(self, vars_: tuple[str, ...], changes: Updates) -> Prefixes:
        return Prefixes(vars_, changes)

    def empty(self, prefixes: Prefixes) -> bool:
        return not len(prefixes)

    def parts(self, prefixes: Prefixes, stage: Stage) -> Iterable[Prefixes]:
        """Bind `stage.variable`: its proposers compete, negations now bound check.
        The survivors come chunk by chunk (the walk carries each on before the next
        is proposed), or as one part under a row limit, which counts a stage whole."""
        proposers = self.proposers(stage, self._joined())
        negations = [self._antijoin(j, stage.variable) for j in stage.negations]
        shape = ColumnShape(self.query.dtypes[stage.variable], stage.keep)
        args = (shape, prefixes, stage.variable, proposers, negations, self.time)
        return extend_parts(*args) if row_limit() is None else [extend(*args)]

    def check(self, prefixes: Prefixes, stage: Stage) -> Prefixes:
        """The checks placed after `stage` (negations of a later stage ran in `extend`)."""
        query, time = self.query, self.time
        for k in stage.fixed:
            prefixes = self._constant(k).filter(prefixes, time)
        for j in stage.unary:
            prefixes = self._unary(j, self._joined()).filter(prefixes, time)
        for j in stage.complete:
            prefixes = self._whole(j, self._joined()).filter(prefixes, time)
        if not stage.variable:
            for j in stage.negations:
                prefixes = self._antijoin(j).filter(prefixes, time)
        for k in stage.predicates:
            prefixes = query.predicates[k].filter(prefixes, time)
        return prefixes

    def finish(self, prefixes: Prefixes) -> Updates:
        """The output's columns, in its variables' order."""
        query = self.query
        if not len(prefixes) and not set(query.out_vars) <= set(prefixes.vars):
            dtypes = [query.dtypes[v] for v in query.out_vars]
            return Updates.empty(len(dtypes), len(self.time), dtypes)
        order = [prefixes.vars.index(v) for v in query.out_vars]
        u = prefixes.updates
        return Updates(tuple(u.columns[i] for i in order), u.times, u.diffs)

    def proposers(self, stage: Stage, at: Time | None = None) -> list[ColumnExtender]:
        """Constants first (they win ties), then binary bindings, then unary ones (`at`:
        the time their lookups join the found times with, `_joined`)."""
        patterns, var = self.query.patterns, stage.variable
        out: list[ColumnExtender] = [self._constant(k) for k in stage.constants]
        binary = [j for j in stage.proposers if len(patterns[j].vars) == 2]
        out += [self._collection(j, var, at) for j in binary]
        out += [self._unary(j, at) for j in stage.proposers if j not in binary]
        return out

    def _joined(self) -> Time | None:
        """The time lookups join their found times with (`TUNING.joined_lookups`, ADR
        0086): the step's. Every prefix's time is at or after it (the source's changes
        are at it, and each stage joins times), and every time a candidate meets is
        joined with its prefix's in the end, so joining it earlier changes no time."""
        return self.time if TUNING.joined_lookups else None

    def _collection(self, j: int, var: str, at: Time | None = None) -> CollectionExtender:
        p = self.query.patterns[j]
        first = p.vars[1] == var
        by_key = p.by_first if first else p.by_second
        assert by_key is not None
        key = p.vars[0] if first else p.vars[1]
        both = (p.vars[0], p.vars[1])
        return CollectionExtender(key, var, by_key, p.by_both, both, j in self.new, at)

    def _unary(self, j: int, at: Time | None = None) -> UnaryExtender:
        p = self.query.patterns[j]
        return UnaryExtender(p.vars[0], p.by_both, j in self.new, at)

    def _antijoin(self, j: int, proposing: str = "") -> AntijoinExtender:
        p = self.query.patterns[j]
        return AntijoinExtender(p.vars, p.by_both, j in self.new, proposing)

    def _constant(self, k: int) -> ConstantExtender:
        const = self.query.constants[k]
        return ConstantExtender(const.var, const.value, self.query.dtypes[const.var])

    def _whole(self, j: int, at: Time | None) -> UnaryExtender | CollectionExtender:
        p = self.query.patterns[j]
        if len(p.vars) == 1:
            return self._unary(j, at)
        assert p.by_first is not None
        both = (p.vars[0], p.vars[1])
        new = j in self.new
        return CollectionExtender(p.vars[0], p.vars[1], p.by_first, p.by_both, both, new, at)
