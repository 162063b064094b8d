"""The growing step of `distinct`: while its input only grows, emit the keys not yet out.

Layer: differential (operators). Imports `batch`, `dataflow`, `time`, `trace`, the
arrange operator and the reduce tactics.

With all input history at times `<= t` and nothing scheduled at `t`, the output
accumulated at `t` is already `distinct` of that history (every interesting time up
to here was evaluated), and adding positive multiplicities can only make absent
keys present. No input history is read. While the output's keys are kept in a key
set (`seen`), membership is a probe, and neither the input's changes nor the
output are arranged (`unbuilt`: nothing sorts them until someone reads the trace;
a one-shot dataflow never does). The first step that is not growing settles the
output into the trace and drops the key set (`stop`). Fused rounds drive this
state through the reduce's public protocol (`ReduceOp.holds`, `ReduceOp.grown`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from differential.batch import Column, Updates, concat, consolidate, uniform_diffs
from differential.dataflow import check_budget
from differential.operators.arrange import Arranged, ArrangeOp, Owner
from differential.operators.reduce_tactics import all_positive
from differential.sort import run_starts
from differential.time import Antichain, Time, column, join_times, uniform_times
from differential.trace.batch import Hashes, key_hash
from differential.trace.keyset import KeySet
from differential.trace.spine import Spine
from differential.tuning import TUNING

Row = tuple[object, ...]


class GrowingDistinct:
    """`distinct`'s growing tactic, and the output's key set while it applies."""

    def __init__(self, source: Arranged, trace: Spine) -> None:
        self.source, self.trace = source, trace
        k, dtypes = source.key_arity, source.dtypes
        self.seen: KeySet | None = KeySet(dtypes[:k], k == 1 and dtypes[0].kind in "iu")
        self.unbuilt: list[Updates] = []  # output of growing steps, not arranged yet
        # In a totally ordered scope (a one-shot read, ADR 0062) the output is not kept:
        # it is the key set's keys, each once, at times up to `latest` (None: none
        # since the last settle), of which the first `settled` stored keys and the
        # overflow keys in `settled_overflow` are in the trace already.
        self.compacted: bool | None = None  # whether it keeps no copy (decided once)
        # A time's changes consolidated when they came with retractions that cancel
        # (`applies`; `Tuning.growing_net`): what the step then admits.
        self.net: tuple[Time, Updates] | None = None
        self.latest: Time | None = None
        self.settled = 0
        self.settled_overflow: set[Row] = set()
        if isinstance(source, ArrangeOp):  # its rows counted in `seen` (ADR 0067)
            source.count_into(self.seen)

    def applies(self, time: Time) -> bool:
        """Only insertions at the step's time (the driver checks the history): as they
        came, or once consolidated (`Tuning.growing_net`: an antijoin's `x - x ⋉ y`
        sends rows with their retractions, which cancel; False: the reference, which
        leaves such a time to the general reduce)."""
        self.net = None
        changes = self.source.updates_at(time)
        if changes is None:
            return False
        if all_positive(changes.diffs):
            return True
        if not TUNING.growing_net or self.seen is None:  # (a live distinct's retraction)
            return False
        net = consolidate(changes)
        if not all_positive(net.diffs):
            return False
        self.net = (time, net)
        return True

    def step(self, time: Time) -> Updates | None:
        """The keys of the changes at `time` not in the output yet (None: none)."""
        counted = self.seen is not None and isinstance(self.source, ArrangeOp)
        found = self._step(time)
        if counted:  # admitted: the rows need not wait for the arrangement's next step
            assert isinstance(self.source, ArrangeOp)
            self.source.release()
        return found

    def _step(self, time: Time) -> Updates | None:
        if self.seen is not None:
            net, self.net = self.net, None
            if net is not None and net[0] == time:  # (rows and retractions that cancel)
                updates, hashes = net[1], key_hash(net[1].columns)
            else:
                changes = self.source.changes(time)
                assert changes is not None
                updates, hashes = changes
            keys: tuple[Column, ...] = updates.columns
            fresh = _admit(self.seen, hashes, keys)
        else:  # (the delta is consolidated: a cancelled row is not in it)
            self.net = None
            delta = self.source.delta(time)
            assert delta is not None
            first = np.flatnonzero(run_starts([delta.hashes, *delta.columns]))
            keys = tuple(c[first] for c in delta.columns)
            owner, found = self.trace.lookup(keys, delta.hashes[first])
            counts = np.zeros(len(first), dtype=np.int64)  # int64: exact for any count
            np.add.at(counts, owner, found.diffs)
            fresh = np.flatnonzero(counts <= 0)
        n = len(fresh)
        if not n:
            return None
        if n < len(keys[0]):
            keys = tuple(k[fresh] for k in keys)
        return Updates(keys, column(time, n), _ones(n))

    def keep(self, change: Updates) -> bool:
        """Hold a step's output unarranged while the key set answers membership."""
        if self.seen is None:
            return False
        self._hold(change)
        return True

    def _hold(self, change: Updates) -> None:
        if self.compacted is None:  # the scope's order is fixed before it runs
            self.compacted = self.source.scope.compacts_rounds
        if self.compacted:
            latest = tuple(int(t) for t in change.times.max(axis=1))
            self.latest = join_times(self.latest, latest)
        else:
            self.unbuilt.append(change)

    def holds(self) -> Callable[[int, Row], bool]:
        """Membership of a key (its hash, its row) in the output, while growing."""
        assert self.seen is not None
        return self.seen.holds

    def held(self, limit: int) -> set[Row] | None:
        """The output's keys as Python rows while growing, if at most `limit`."""
        assert self.seen is not None
        return self.seen.rows(limit)

    def grown(self, result: Updates) -> None:
        """Record new keys that fused rounds emitted (each once, none held yet)."""
        seen = self.seen
        assert seen is not None
        if seen.identity:
            seen.admit_absent(key_hash(result.columns), result.columns)
        else:
            added = seen.admit(key_hash(result.columns), result.columns)
            assert len(added) == len(result), "fused rounds admit each new key once"
        self._hold(result)

    def settle(self) -> None:
        """Arrange the output of growing steps into the trace, all in one batch."""
        if self.latest is not None:
            self._settle_keys(self.latest)
        if self.unbuilt:
            updates = concat(self.unbuilt)
            self.unbuilt = []
            lower = Antichain([tuple(int(t) for t in updates.times.min(axis=1))])
            self.trace.insert(updates, lower, Antichain())

    def _settle_keys(self, latest: Time) -> None:
        """`settle` where the output was not kept (`_hold`): the keys added since the
        last settle, each once, at `latest`, the trace compacted to it (no reader asks
        about an earlier time again)."""
        assert self.seen is not None
        fresh, overflow = self.seen.keys_from(self.settled, self.settled_overflow)
        self.settled, self.latest = self.seen.size, None
        self.settled_overflow |= overflow
        n = len(fresh[0]) if fresh else 0
        if n:
            self.trace.default_since = Antichain([latest])
            updates = Updates(fresh, uniform_times(latest, n), _ones(n))
            self.trace.insert(updates, Antichain([latest]), Antichain(), latest)

    def stop(self) -> None:
        """Settle, and read the trace from here on (it may now lose keys)."""
        self.settle()
        self.seen = None

    def unbuilt_size(self) -> int:
        held = sum(len(part) for part in self.unbuilt)
        if self.latest is not None and self.seen is not None:
            held += len(self.seen) - self.settled - len(self.settled_overflow)
        return held


def _ones(n: int) -> npt.NDArray[np.int64]:
    """New keys' diffs: one, as one repeated value from `TUNING.uniform_from` rows on (the
    rounds' arrangements, queues and next rounds would hold a column of ones)."""
    return uniform_diffs(1, n) if n >= TUNING.uniform_from else np.ones(n, dtype=np.int64)


def _admit(seen: KeySet, hashes: Hashes, keys: Sequence[Column]) -> Owner:
    """`seen.admit` of many keys a run of `TUNING.history` at a time, the budget checked in
    between (a run admitted stays admitted: the operator's state is dropped with its
    dataflow when the step fails)."""
    n = len(hashes)
    if n <= TUNING.history:
        return seen.admit(hashes, keys)
    parts = []
    for lo in range(0, n, TUNING.history):
        check_budget()
        run = slice(lo, lo + TUNING.history)
        parts.append(seen.admit(hashes[run], tuple(k[run] for k in keys)) + lo)
    return np.concatenate(parts)
