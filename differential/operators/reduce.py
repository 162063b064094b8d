"""The reduce family: distinct, count, sum, min, max and user reducers.

Layer: differential (operators).

A reduce groups its arranged input by key and maintains, for every key and
every time `T`, `output@T = f(input accumulated at T)`. At a step at time `t`
it re-evaluates every key whose input changed at `t` or that was scheduled for
`t`, and emits the difference between `f(input@t)` and the output accumulated
at `t`.

Interesting times: when a key changes at `t` and its history holds a time `s`
not `<= t`, the accumulations at `t ⊔ s` may differ from both; the reduce
schedules the key for `t ⊔ s`. Re-evaluation there schedules further joins, so
the key is visited at the closure of its change times under `⊔` (DESIGN §3).
In the root scope history is always `<= t` and nothing is scheduled.

`ReduceOp` is the driver: it owns this algorithm and its time logic once (which
keys a step visits, `revisit`: the one rule of interesting times, and where the
change goes). The inner loop is a tactic's, chosen per step (ADR 0050):

- while the input only grows (no history beyond `t`, nothing scheduled at `t`) a
  growing tactic may answer from the step's changes alone: `GrowingDistinct`
  (`reduce_growing`) for `distinct`, `LeastGrowing` (`reduce_extreme`) for a
  reducer keeping a least value;
- otherwise the keys are re-evaluated by the first tactic that takes them:
  `RowsTactic` (a few keys, short history, Python lists) when every column is an
  integer one, then `ColumnsTactic` (numpy, the reference), both in
  `reduce_tactics`. The thresholds are `Tuning` fields.

Fused rounds (`chain`, `later_rounds`) drive a growing `distinct` through its
public protocol: `growing_at`, `holds`, `grown`, `stop_growing`, `first_scheduled`,
`output_entries` and `record`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from differential.batch import Column, Updates, concat, python_rows
from differential.dataflow import Operator, Stream
from differential.operators.arrange import Arranged, Owner
from differential.operators.reduce_extreme import LeastGrowing
from differential.operators.reduce_growing import GrowingDistinct
from differential.operators.reduce_tactics import (
    ColumnsTactic,
    KeyPart,
    Keys,
    RowsTactic,
    distinct_columns,
)
from differential.operators.reducers import (
    LINEAR,
    Counts,
    Groups,
    Reducer,
    count,
    distinct,
    maximum,
    minimum,
    monoid,
    sum_values,
)
from differential.time import Antichain, Time, join_times, le
from differential.trace.cursor import Entry, FewKeys, columns_of
from differential.trace.spine import Spine
from differential.tuning import TUNING

__all__ = [
    "LINEAR",
    "Counts",
    "Groups",
    "ReduceOp",
    "Reducer",
    "count",
    "distinct",
    "maximum",
    "minimum",
    "monoid",
    "sum_values",
]

Row = tuple[object, ...]
Growing = GrowingDistinct | LeastGrowing


class ReduceOp(Operator):
    """Applies `reducer` per key; output rows are `(key..., reducer columns...)`."""

    name = "reduce"
    holds_trace = True

    def __init__(
        self, source: Arranged, reducer: Reducer, out_dtypes: Sequence[np.dtype], name: str
    ) -> None:
        super().__init__(source.scope)
        self.name = name
        self.source = source
        self.reducer = reducer
        k = source.key_arity
        dtypes = (*source.dtypes[:k], *(np.dtype(d) for d in out_dtypes))
        self.output = Stream(source.scope, dtypes, name, producer=self)
        self.trace = Spine(k, dtypes, source.scope.depth)
        self.scheduled: dict[Time, list[KeyPart]] = {}
        # Small steps may run on Python lists when every value compares like numpy's.
        self.lists_ok = all(d.kind in "iu" for d in (*source.dtypes, *dtypes))
        self.identity = k == 1 and dtypes[0].kind in "iu"  # `key_hash` is the key itself
        self.tactics: list[RowsTactic | ColumnsTactic] = [
            *([RowsTactic(self)] if self.lists_ok else []),
            ColumnsTactic(self),
        ]
        self.growing: Growing | None = None
        self.growing_distinct: GrowingDistinct | None = None
        if reducer is distinct and len(source.dtypes) == k:  # keys only, no values
            self.growing = self.growing_distinct = GrowingDistinct(source, self.trace)
        elif (least := getattr(reducer, "growing_least", None)) is not None:
            self.growing = LeastGrowing(source, self.trace, least, self.reevaluate)

    def pending(self, prefix: Time) -> Iterable[Time]:
        return self.scheduled.keys()

    def ready(self, time: Time) -> bool:
        return time in self.scheduled or self.source.has_delta(time)

    def step(self, time: Time) -> None:
        """Re-evaluate the keys that changed at `time` or were scheduled for it, and
        emit the difference; a growing tactic answers while the input only grows."""
        growing = self.growing
        if growing is not None and growing.applies(time) and self._only_grows(time):
            self._emit(growing.step(time), time)
            return
        self.stop_growing()
        keys = self._keys_at(time)
        if keys is not None:
            self._emit(self.reevaluate(keys, time), time)

    def reevaluate(self, keys: Keys, time: Time) -> Updates | None:
        """The output change at `time` for `keys`: the first tactic that takes them."""
        for tactic in self.tactics:
            parts = tactic.reevaluate(keys, time)
            if parts is not None:
                return concat(parts) if parts else None
        raise AssertionError("the columns tactic takes every key")

    def revisit(
        self, keys: Keys, history: Iterable[tuple[Time, Owner | list[int]]], time: Time
    ) -> None:
        """The interesting times (DESIGN §3), the one rule: a key whose history holds
        a time `s` not `<= time` is revisited at `s ⊔ time`. `history`: times with
        the keys (positions in `keys`) that hold an entry at each."""
        for s, owners in history:
            if not le(s, time):
                self.scheduled.setdefault(join_times(s, time), []).append(keys.part(owners))

    def _only_grows(self, time: Time) -> bool:
        """No input history beyond `time` and nothing scheduled at it."""
        return time not in self.scheduled and self.source.history_before(time)

    def _emit(self, change: Updates | None, time: Time) -> None:
        if change is None or not len(change):
            return
        if self.growing_distinct is None or not self.growing_distinct.keep(change):
            self.trace.insert(change, Antichain([time]), Antichain(), time)
        self.output.send(change)

    def _keys_at(self, time: Time) -> Keys | None:
        """The keys to re-evaluate at `time`, sorted and distinct: a few as Python rows
        (when every column is an integer one), else as columns."""
        parts = self.scheduled.pop(time, [])
        k = self.source.key_arity
        changes = self.source.updates_at(time)  # scanned: they need not be arranged now
        if changes is not None:
            parts.append(changes.columns[:k])
        if not parts:
            return None
        dtypes = self.source.dtypes[:k]
        n = sum(len(p) if isinstance(p, list) else len(p[0]) for p in parts) if k else 0
        if k and self.lists_ok and n <= TUNING.few:
            rows: set[Row] = set()
            for p in parts:
                rows.update(p if isinstance(p, list) else python_rows(p, len(p[0])))
            return Keys(dtypes, self.identity, rows=sorted(rows))
        return Keys(dtypes, self.identity, columns=distinct_columns(self._columns(parts)))

    def _columns(self, parts: list[KeyPart]) -> tuple[Column, ...]:
        dtypes = self.source.dtypes[: self.source.key_arity]
        cols = [tuple(columns_of(p, dtypes)) if isinstance(p, list) else p for p in parts]
        return tuple(np.concatenate([c[i] for c in cols]) for i in range(len(dtypes)))

    # -- the protocol of fused rounds (`chain`, `later_rounds`): a growing distinct ----------

    def growing_at(self, time: Time) -> bool:
        """Whether the distinct's output is still a key set (`holds` answers) and
        nothing is scheduled: fused rounds may grow it from `time` on, given input
        history `<= time` (the arrangement's to say)."""
        growing = self.growing_distinct
        return growing is not None and growing.seen is not None and not self.scheduled

    def holds(self) -> Callable[[int, Row], bool]:
        """Membership of a key (hash, row) in the growing distinct's output."""
        assert self.growing_distinct is not None
        return self.growing_distinct.holds()

    def held(self, limit: int) -> set[Row] | None:
        """The growing distinct's output keys as Python rows, if at most `limit`."""
        assert self.growing_distinct is not None
        return self.growing_distinct.held(limit)

    def grown(self, result: Updates) -> None:
        """Record new keys that fused rounds emitted as growing steps would (the
        caller sends them on)."""
        assert self.growing_distinct is not None
        self.growing_distinct.grown(result)

    def stop_growing(self) -> None:
        """Arrange the growing steps' output into the trace and read the trace from
        here on (what a step that is not growing does first)."""
        if self.growing is not None:
            self.growing.stop()

    def first_scheduled(self, prefix: Time) -> int | None:
        """The least last coordinate of a time extending `prefix` at which keys are
        scheduled (None: none)."""
        mine = [t[-1] for t in self.scheduled if t[:-1] == prefix]
        return min(mine) if mine else None

    def output_entries(self, keys: FewKeys, found: list[Entry]) -> None:
        """Append the output's entries under `keys` to `found` (any time)."""
        self.trace.find_entries(keys, found)

    def record(self, result: Updates, first: Time, last: Time) -> None:
        """Insert output that fused rounds computed at times `first` to `last`, as
        this operator's own steps would have (the caller sends it on)."""
        self.trace.insert(result, Antichain([first]), Antichain(), last)

    # -- state ------------------------------------------------------------------------------

    def settle(self) -> None:
        """Arrange the output of growing steps into the trace, all in one batch."""
        if self.growing_distinct is not None:
            self.growing_distinct.settle()

    def advance(self, epoch: int) -> None:
        """Compact the output trace (`Spine.advance`); the output of growing steps
        (insertions of distinct keys not arranged yet) has nothing to compact."""
        self.trace.advance(Antichain([(epoch,) + (0,) * (self.scope.depth - 1)]))

    def arranged_size(self) -> tuple[int, int]:
        """Output updates held, those of growing steps not arranged yet included
        (nothing is arranged or merged to measure them)."""
        unbuilt = self.growing_distinct.unbuilt_size() if self.growing_distinct is not None else 0
        return len(self.trace) + unbuilt, self.trace.held_batches + bool(unbuilt)

    def describe(self) -> str:
        return f"{self.name}({self.source.describe()})"

    def inputs(self) -> Sequence[Operator | Stream]:
        return (self.source,)
