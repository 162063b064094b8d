"""Subsumption as a reduce: keep, per group, the tuples no other tuple beats.

Layer: datalog (planner). Imports `differential` (the reduce and its `Groups`),
the datalog expressions (to evaluate conditions over numpy columns) and the
normalized clauses of `datalog.lang.subsumption`, whose semantics this implements.

A subsumed relation is the distinct union of its parts everywhere else; here that
`distinct` is replaced by a reduce keyed by the positions every clause groups by
(`shared_group`), whose values are the whole tuples. The reducer sees a group's
present tuples and returns the undominated ones. Inside an iteration scope the
reduce is the variable's definition, so differential's re-evaluation at every
interesting time keeps it exact under retractions.

Two ways to find the survivors: a single comparison between one column of both
tuples (`d2 <= d1`, `d1 > d2`, ...) keeps the group's extreme value (`_extremes`);
any other condition is evaluated on every ordered pair of a group's tuples
(`_beaten`, in chunks of at most `PAIRS` pairs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from datalog.eval.expressions import DTYPES, compile_comparison
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import ColumnType, Var
from datalog.lang.subsumption import Dominance, dominated_var, dominating_var, shared_group
from datalog.plan.plan import Step, Subsume
from differential.batch import Column, Updates, run_starts
from differential.dataflow import Stream
from differential.operators.arrange import ArrangeOp, Owner
from differential.operators.linear import map_updates, project
from differential.operators.reduce import Counts, Groups, ReduceOp, Reducer

PAIRS = 1 << 21  # pairs of tuples compared per numpy pass of the pairwise path
Mask = npt.NDArray[np.bool_]
Holds = Callable[[Sequence[Column], int], Mask]


def subsume(
    stream: Stream, dominances: Sequence[Dominance], symbols: SymbolTable, steps: list[Step]
) -> Stream:
    """The undominated tuples of `stream` (a relation's columns, any multiplicities)."""
    kinds = dominances[0].kinds
    key = list(shared_group(dominances))
    reducer = dominance_reducer(dominances, symbols)
    if key:
        arranged = ArrangeOp(project(stream, [*key, *range(len(kinds))]), len(key))
    else:  # no common group: one group of everything, under a constant key
        arranged = ArrangeOp(_constant_key(stream), 1)
    dtypes = [np.dtype(DTYPES[k]) for k in kinds]
    reduced = ReduceOp(arranged, reducer, dtypes, "subsume")
    how = "extreme value" if _extreme_column(dominances, key) else "pairwise conditions"
    steps.append(Subsume(dominances[0].relation, tuple(key), how))
    width = len(key) or 1
    return project(reduced.output, list(range(width, width + len(kinds))))


def _constant_key(stream: Stream) -> Stream:
    def add_key(u: Updates) -> Updates:
        return u.with_columns((np.zeros(len(u), dtype=np.int64), *u.columns))

    return map_updates(stream, add_key, (np.dtype(np.int64), *stream.dtypes))


def dominance_reducer(dominances: Sequence[Dominance], symbols: SymbolTable) -> Reducer:
    """A reducer over groups of whole tuples keeping those no other tuple beats."""
    kinds = dominances[0].kinds
    key = shared_group(dominances)
    ranks = _Ranks(kinds, symbols)
    extreme = _extreme_column(dominances, key)
    holds = None if extreme else _dominates(dominances, key, symbols)

    def reduce(groups: Groups) -> tuple[Owner, Sequence[Column], Counts]:
        present = groups.counts > 0
        owner, values = groups.owner[present], [v[present] for v in groups.values]
        if extreme is not None:
            keep = _extremes(owner, values, extreme, ranks)
        else:
            assert holds is not None
            keep = ~_beaten(owner, values, holds, ranks)
        return owner[keep], [v[keep] for v in values], np.ones(int(keep.sum()), np.int64)

    if extreme is not None and extreme.least and kinds[extreme.column] == "number":
        others = set(range(len(kinds))) - {extreme.column}
        if key and others <= set(key):  # the tuple is its group and the least value
            reduce.growing_least = extreme.column  # type: ignore[attr-defined]
    return reduce


@dataclass(frozen=True)
class _Extreme:
    """Survivors are the tuples whose `column` is the group's least (or greatest)."""

    column: int
    least: bool
    strict: bool


def _extreme_column(dominances: Sequence[Dominance], key: Sequence[int]) -> _Extreme | None:
    """The fast case: one clause whose condition compares one column of both tuples."""
    if len(dominances) != 1:
        return None
    condition = dominances[0].condition_within(key)
    if len(condition) != 1 or condition[0].op not in ("<", "<=", ">", ">="):
        return None
    cmp = condition[0]
    if not (isinstance(cmp.left, Var) and isinstance(cmp.right, Var)):
        return None
    for column, kind in enumerate(dominances[0].kinds):
        low, high = dominated_var(column), dominating_var(column)
        sides = (cmp.left.name, cmp.right.name)
        if kind != "symbol" and column not in key and sides in ((low, high), (high, low)):
            winner_left = sides[0] == high
            least = winner_left == (cmp.op in ("<", "<="))
            return _Extreme(column, least, cmp.op in ("<", ">"))
    return None


def _extremes(owner: Owner, values: list[Column], extreme: _Extreme, ranks: _Ranks) -> Mask:
    if len(owner) == 0:
        return np.zeros(0, dtype=bool)
    starts = np.flatnonzero(run_starts([owner]))
    sizes = np.diff(np.append(starts, len(owner)))
    column = values[extreme.column]
    fold = np.minimum if extreme.least else np.maximum
    keep: Mask = column == np.repeat(fold.reduceat(column, starts), sizes)
    if extreme.strict:
        return keep
    ties = np.add.reduceat(keep.astype(np.int64), starts)
    if (ties <= 1).all():
        return keep
    # equal extremes dominate each other: the least tuple survives
    rank = np.where(keep, ranks.of(values), len(owner))
    least = np.minimum.reduceat(rank, starts)
    result: Mask = rank == np.repeat(least, sizes)
    return result


def _dominates(dominances: Sequence[Dominance], key: Sequence[int], symbols: SymbolTable) -> Holds:
    """`holds(columns, n)`: whether the tuple of the second half of `columns`
    dominates the one of the first half, under any clause."""
    kinds = dominances[0].kinds
    names = [dominated_var(i) for i in range(len(kinds))]
    names += [dominating_var(i) for i in range(len(kinds))]
    types = dominances[0].types
    clauses = [
        [compile_comparison(c, names, types, symbols) for c in d.condition_within(key)]
        for d in dominances
    ]

    def holds(columns: Sequence[Column], n: int) -> Mask:
        found = np.zeros(n, dtype=bool)
        for comparisons in clauses:
            clause = np.ones(n, dtype=bool)
            for compare in comparisons:
                clause &= compare(columns, n)
            found |= clause
        return found

    return holds


def _beaten(owner: Owner, values: list[Column], holds: Holds, ranks: _Ranks) -> Mask:
    """The rows some other row of their group beats (see `datalog.lang.subsumption`)."""
    n = len(owner)
    beaten = np.zeros(n, dtype=bool)
    if n == 0:
        return beaten
    starts = np.flatnonzero(run_starts([owner]))
    sizes = np.diff(np.append(starts, n))
    group_size = np.repeat(sizes, sizes)  # per row: the size of its group
    group_start = np.repeat(starts, sizes)
    rank: npt.NDArray[np.int64] | None = None
    bounds = np.cumsum(group_size)
    first = 0
    while first < n:
        done = bounds[first] - group_size[first]  # pairs of the rows before `first`
        last = max(first + 1, int(np.searchsorted(bounds, done + PAIRS, side="right")))
        low, high = _pairs(first, last, group_size, group_start)
        forward = holds([*(v[low] for v in values), *(v[high] for v in values)], len(low))
        low, high = low[forward], high[forward]
        back = holds([*(v[high] for v in values), *(v[low] for v in values)], len(low))
        if back.any() and rank is None:
            rank = ranks.of(values)
        wins = ~back if rank is None else ~back | (rank[high] < rank[low])
        beaten[low[wins]] = True
        first = last
    return beaten


def _pairs(
    first: int, last: int, group_size: npt.NDArray[np.intp], group_start: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Every (row, other row of its group) for the rows `first:last`, row != other."""
    sizes = group_size[first:last]
    low = np.repeat(np.arange(first, last), sizes)
    offsets = np.arange(len(low)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    high = np.repeat(group_start[first:last], sizes) + offsets
    other = low != high
    return low[other], high[other]


class _Ranks:
    """The rank of each row in the order of values (symbols ordered as strings)."""

    def __init__(self, kinds: Sequence[ColumnType], symbols: SymbolTable) -> None:
        self.kinds = tuple(kinds)
        self.symbols = symbols

    def of(self, values: list[Column]) -> npt.NDArray[np.int64]:
        keys = []
        for column, kind in zip(values, self.kinds, strict=True):
            if kind == "symbol":
                column = np.unique(self.symbols.strings(column), return_inverse=True)[1]
            keys.append(column)
        order = np.lexsort(keys[::-1]) if keys else np.arange(len(values[0]))
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank
