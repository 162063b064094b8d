"""The spine: logarithmic batch count, vectorized lookups, compaction and handles."""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from unittest import mock

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from differential.batch import Updates
from differential.time import Antichain
from differential.trace import batch as trace_batch
from differential.trace import cursor
from differential.trace import spine as spine_module
from differential.trace.batch import Batch, Description, key_hash, merge
from differential.trace.cursor import Entry, FewKeys, python_entries
from differential.trace.spine import Spine
from differential.tuning import TUNING, tuned
from tests.differential.strategies import as_column, time_lists, updates

KEYED = st.sampled_from(
    [
        (("i", "i"), 1),  # identity hash
        (("i", "i", "i"), 2),  # multi-column key
        (("f", "i"), 1),  # float key
        (("f", "i", "f"), 2),  # mixed multi-column key
        (("i",), 1),  # keys only, no values
    ]
)
ZERO = Antichain([(0,)])


def dtypes_of(u: Updates) -> list[np.dtype]:
    return [c.dtype for c in u.columns]


@given(st.lists(st.integers(1, 60), min_size=1, max_size=120))
def test_spine_keeps_a_logarithmic_number_of_batches(sizes: list[int]) -> None:
    spine = Spine(1, [np.dtype(np.int64)], 1)
    total = 0
    for epoch, n in enumerate(sizes):
        keys = np.arange(total, total + n, dtype=np.int64)  # distinct: nothing cancels
        spine.insert(Updates.at([keys], (epoch,)), ZERO, ZERO)
        total += n
        lengths = [len(b) for b in spine.batches]
        assert sum(lengths) == total == len(spine)
        if total <= TUNING.small_trace:
            assert len(lengths) <= TUNING.small_batches
        else:  # geometric sizes, then a short tail of small batches
            head = len(lengths)
            while head and lengths[head - 1] <= TUNING.tail:
                head -= 1
            assert len(lengths) - head <= TUNING.small_batches
            assert all(old > 2 * new for old, new in itertools.pairwise(lengths[:head]))
            assert spine.batch_count <= math.log2(total) + 1 + TUNING.small_batches


@st.composite
def spine_and_queries(draw: st.DrawFn) -> tuple[Spine, list[Updates], tuple[np.ndarray, ...]]:
    kinds, key_arity = draw(KEYED)
    parts = draw(st.lists(updates(kinds=kinds, depth=2, domain=3), min_size=1, max_size=6))
    spine = Spine(key_arity, dtypes_of(parts[0]), 2)
    zero = Antichain([(0, 0)])
    for p, arranged in zip(parts, draw(st.lists(st.booleans(), min_size=6)), strict=False):
        if arranged:  # a batch built by its writer (a shared arrangement's epoch)
            spine.append(Batch.build(p, key_arity, Description(zero, zero, Antichain())))
        else:
            spine.insert(p, zero, zero)
    probe = draw(updates(kinds=kinds[:key_arity], depth=1, domain=4, max_size=30))
    return spine, parts, probe.columns


@given(spine_and_queries())
def test_lookups_of_many_keys_equal_a_dict_reference(
    case: tuple[Spine, list[Updates], tuple[np.ndarray, ...]],
) -> None:
    spine, parts, queries = case
    k = spine.key_arity
    by_key: dict[tuple[object, ...], dict[tuple[object, ...], int]] = defaultdict(
        lambda: defaultdict(int)
    )
    for p in parts:
        for row in p.rows():
            by_key[tuple(row[:k])][tuple(row[k:-1])] += row[-1]  # type: ignore[operator]
    for smallest in (0, 1 << 30):  # through hash indexes, and by binary search
        with (
            tuned(TUNING.but(min_indexed=smallest, few_keys=0)),
        ):
            check_lookup(spine, queries, by_key)


def check_lookup(
    spine: Spine,
    queries: tuple[np.ndarray, ...],
    by_key: dict[tuple[object, ...], dict[tuple[object, ...], int]],
    ordered: bool = False,
) -> None:
    k = spine.key_arity
    owner, found = spine.lookup(queries, rare=ordered, ordered=ordered)
    got: dict[int, dict[tuple[object, ...], int]] = defaultdict(lambda: defaultdict(int))
    for i, row in zip(owner.tolist(), found.rows(), strict=True):
        got[i][tuple(row[k:-1])] += row[-1]  # type: ignore[operator]
    n = len(queries[0])
    for i in range(n):
        key = tuple(c[i].item() for c in queries)
        assert {v: d for v, d in got[i].items() if d} == {
            v: d for v, d in by_key.get(key, {}).items() if d
        }, f"query {key}"
    assert all(
        tuple(c[j].item() for c in found.columns[:k]) == tuple(q[i].item() for q in queries)
        for i, j in zip(owner.tolist(), range(len(owner)), strict=True)
    )


def test_float_keys_treat_negative_zero_as_zero() -> None:
    spine = Spine(1, [np.dtype(np.float64), np.dtype(np.int64)], 1)
    spine.insert(Updates.at([np.array([-0.0, 1.5]), np.array([7, 8])], (0,)), ZERO, ZERO)
    owner, found = spine.lookup((np.array([0.0, 1.5, 2.0]),))
    assert sorted(zip(owner.tolist(), found.columns[1].tolist(), strict=True)) == [(0, 7), (1, 8)]
    assert key_hash([np.array([-0.0])])[0] == key_hash([np.array([0.0])])[0]


@st.composite
def compaction_case(draw: st.DrawFn) -> tuple[Spine, Antichain, list[tuple[int, ...]]]:
    """A spine of depth-2 updates, a frontier, and times at or beyond it."""
    kinds, key_arity = draw(KEYED)
    parts = draw(st.lists(updates(kinds=kinds, depth=2, domain=2), min_size=1, max_size=6))
    spine = Spine(key_arity, dtypes_of(parts[0]), 2)
    frontier = Antichain(draw(time_lists(2, 1, 3)))
    spine.handle(frontier)
    for p in parts:
        spine.insert(p, Antichain([(0, 0)]), Antichain([(0, 0)]))
    targets = []
    for f in frontier:
        targets.append(f)
        for bump in draw(time_lists(2, 1, 4)):
            targets.append((f[0] + bump[0], f[1] + bump[1]))
    return spine, frontier, targets


@given(compaction_case())
def test_compaction_never_changes_accumulations_beyond_the_frontier(
    case: tuple[Spine, Antichain, list[tuple[int, ...]]],
) -> None:
    spine, frontier, targets = case
    before = {t: spine.accumulate(t).rows() for t in targets}
    assert spine.since == frontier
    spine.compact()
    assert spine.batch_count <= 1
    for t in targets:
        assert spine.accumulate(t).rows() == before[t], f"at {t}"


def test_compaction_collapses_history_to_the_current_state() -> None:
    spine = Spine(1, [np.dtype(np.int64)], 1)
    for epoch, (key, diff) in enumerate([(1, 1), (2, 1), (1, -1), (3, 1), (2, -1)], start=1):
        spine.insert(Updates.at([np.array([key])], (epoch,), diff), ZERO, ZERO)
    spine.default_since = Antichain([(6,)])
    spine.compact()
    assert spine.updates().rows() == [(3, (6,), 1)]


class _Interrupted(BaseException):
    """Stands for a KeyboardInterrupt or MemoryError raised inside the spine."""


def _raising_once(real: object) -> object:
    """`real`, except that its first call raises `_Interrupted`."""
    calls = [0]

    def call(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] == 1:
            raise _Interrupted
        return real(*args, **kwargs)  # type: ignore[operator]

    return call


def test_an_interrupt_while_waiting_rows_are_arranged_loses_none_of_them() -> None:
    """Rows inserted a few at a time wait unarranged (`_Recent`) until a reader needs
    batches; a KeyboardInterrupt or MemoryError while they are arranged into a batch
    must leave them waiting, not drop them (the model test found a shared base
    arrangement answering without them after an interrupted `explain`)."""
    spine = Spine(1, [np.dtype(np.int64)], 1)
    for epoch, key in enumerate([3, 1, 2], start=1):
        spine.insert(Updates.at([np.array([key])], (epoch,)), ZERO, ZERO)
    build = _raising_once(Batch.build)
    with mock.patch.object(Batch, "build", staticmethod(build)):  # type: ignore[arg-type]
        try:
            spine.batches  # noqa: B018 (reading arranges the waiting rows)
        except _Interrupted:
            pass
        else:
            raise AssertionError("the interrupt was not raised")
        assert sorted(spine.accumulate((3,)).rows()) == [(1, (3,), 1), (2, (3,), 1), (3, (3,), 1)]
    assert len(spine) == 3


def test_an_interrupt_while_held_batches_join_the_trace_loses_none_of_them() -> None:
    """Small arranged batches are held (`_Recent.hold`) and join the trace together; an
    interrupt in the merge that the first of them triggers must not lose the others."""
    spine = Spine(1, [np.dtype(np.int64)], 1)
    for epoch, key in enumerate([3, 1, 2], start=1):
        batch = Batch.build(
            Updates.at([np.array([key])], (epoch,)), 1, Description(ZERO, ZERO, ZERO)
        )
        spine.append(batch)
    with (
        # every batch restores the invariant: the second merges
        tuned(TUNING.but(lazy_batches=0, small_batches=1)),
        mock.patch.object(spine_module, "merge", _raising_once(merge)),
    ):
        try:
            spine.batches  # noqa: B018
        except _Interrupted:
            pass
        else:
            raise AssertionError("the interrupt was not raised")
        assert sorted(spine.accumulate((3,)).rows()) == [(1, (3,), 1), (2, (3,), 1), (3, (3,), 1)]


def test_handles_hold_compaction_back_until_released() -> None:
    spine = Spine(1, [np.dtype(np.int64)], 1)
    early, late = spine.handle(Antichain([(2,)])), spine.handle(Antichain([(5,)]))
    spine.default_since = Antichain([(9,)])  # ignored while readers hold handles
    for epoch, key in enumerate([10, 11, 12, 13, 14, 15], start=1):
        spine.insert(Updates.at([np.array([key])], (epoch,)), ZERO, ZERO)
    assert spine.since == Antichain([(2,)])
    spine.compact()
    assert [len(spine.accumulate((t,))) for t in range(2, 7)] == [2, 3, 4, 5, 6]
    early.release()
    early.release()  # releasing twice is harmless
    assert spine.since == Antichain([(5,)]) and spine.handles == [late]
    spine.compact()
    assert len(spine.accumulate((4,))) == 0  # history before 5 is gone: the point of compaction
    assert [len(spine.accumulate((t,))) for t in (5, 6)] == [5, 6]
    late.set_frontier(Antichain([(6,)]))
    late.release()
    assert spine.since == Antichain([(9,)])


def test_depth_two_handles_keep_incomparable_frontier_elements() -> None:
    spine = Spine(1, [np.dtype(np.int64)], 2)
    spine.handle(Antichain([(3, 0)]))
    spine.handle(Antichain([(1, 4)]))
    assert spine.since == Antichain([(3, 0), (1, 4)])
    ts = as_column([(0, 0), (2, 9)], 2)
    spine.insert(Updates((np.array([1, 1]),), ts, np.array([1, 1])), ZERO, ZERO)
    spine.compact()
    assert len(spine) == 2  # (0,0) and (2,9) advance to (1,4) and (2,9): still distinct


def test_many_keys_are_found_as_by_a_per_key_scan() -> None:
    """Enough queries to build hash indexes, over a spine of several batches."""
    rng = np.random.default_rng(7)
    spine = Spine(1, [np.dtype(np.int64), np.dtype(np.int64)], 1)
    for epoch in range(5):
        keys = rng.integers(0, 3_000, size=4_000, dtype=np.int64)
        spine.insert(Updates.at([keys, keys * 10 + epoch], (epoch,)), ZERO, ZERO)
    probe = rng.integers(-10, 6_000, size=20_000, dtype=np.int64)
    with tuned(TUNING.but(min_indexed=1_000)):
        owner, found = spine.lookup([probe])
    assert all(b.cache.index is not None for b in spine.batches)
    assert np.array_equal(found.columns[0], probe[owner])
    entries = spine.updates().columns[0]
    expected = np.bincount(np.searchsorted(np.unique(entries), entries), minlength=3_000)
    per_query = np.bincount(owner, minlength=len(probe))
    inside = (probe >= 0) & np.isin(probe, entries)
    hit = np.searchsorted(np.unique(entries), probe[inside])
    assert np.array_equal(per_query[inside], expected[hit])
    assert not per_query[~inside].any()


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 1), st.integers(-2, 2)),
        max_size=60,
    )
)
def test_keys_sharing_a_hash_still_consolidate(rows: list[tuple[int, int, int, int]]) -> None:
    """With a hash that collides on purpose, a batch still holds each (key, time) once."""
    cols = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(3)]
    updates = Updates(tuple(cols[:2]), cols[2].reshape(1, -1), np.array([r[3] for r in rows]))
    with mock.patch.object(trace_batch, "key_hash", lambda keys: keys[0] % 2):
        halves = [updates.take(np.arange(len(rows)) % 2 == side) for side in (0, 1)]
        built = [Batch.build(h, 2, Description(ZERO, ZERO, Antichain())) for h in halves]
        merged = merge(built, Antichain())
    expected: Counter[tuple[int, int, int]] = Counter()
    for a, b, t, d in rows:
        expected[(a, b, t)] += d
    seen = [(a, b, t) for a, b, t in zip(*merged.columns, merged.times[0], strict=True)]
    assert len(seen) == len(set(seen))
    got = dict(zip(seen, merged.diffs.tolist(), strict=True))
    assert got == {k: d for k, d in expected.items() if d}


@given(spine_and_queries())
def test_a_few_keys_find_unarranged_updates_as_the_arranged_trace_holds_them(
    case: tuple[Spine, list[Updates], tuple[np.ndarray, ...]],
) -> None:
    """Few-row inserts may wait unarranged; read as Python entries they accumulate
    to what a lookup in the arranged trace finds, and arranging keeps every update."""
    spine, parts, probe = case
    keys = FewKeys.of(probe, key_hash(probe))
    k = spine.key_arity

    def summed(entries: list[Entry]) -> dict[tuple[object, ...], int]:
        total: Counter[tuple[object, ...]] = Counter()
        for owner, time, values, diff in entries:
            total[(owner, time, *values)] += diff
        return {key: n for key, n in total.items() if n}

    waiting = summed(spine.lookup_entries(keys))
    owner, found = spine.lookup(probe)  # arranges whatever waits
    assert waiting == summed(python_entries(owner, found, k))
    assert len(spine) == sum(len(b) for b in spine.batches)
    whole: Counter[tuple[object, ...]] = Counter()
    for p in parts:
        for *row, _, diff in p.rows():
            whole[tuple(row)] += diff
    arranged: Counter[tuple[object, ...]] = Counter()
    for *row, _, diff in spine.updates().rows():
        arranged[tuple(row)] += diff
    assert {r: n for r, n in whole.items() if n} == {r: n for r, n in arranged.items() if n}


@given(
    st.lists(st.integers(-50, 50), max_size=200),
    st.lists(st.integers(-60, 60), min_size=64, max_size=300),
)
def test_key_ranges_are_found_with_the_keys_in_any_order(
    entries: list[int], asked: list[int]
) -> None:
    """Without an index, many keys (`_FEW_KEYS` at least) are binary-searched in
    hash order and put back in query order: the ranges of each key alone."""
    keys = np.array(entries, dtype=np.int64)
    batch = Batch.build(Updates.at([keys, keys], (0,)), 1, Description(ZERO, ZERO, Antichain()))
    hashes = key_hash([np.array(asked, dtype=np.int64)])
    with tuned(TUNING.but(min_indexed=1 << 30)):
        lo, hi = cursor.key_ranges(batch, hashes)
    assert np.array_equal(lo, batch.hashes.searchsorted(hashes, "left"))
    assert np.array_equal(hi, batch.hashes.searchsorted(hashes, "right"))


def _merged_and_snapshot() -> tuple[Batch, Batch]:
    """A trace's one batch of entries at epochs 1 and 2, and its snapshot at 3."""
    spine = Spine(1, [np.dtype(np.int64), np.dtype(np.int64)], 1)
    for epoch in (1, 2):
        spine.insert(Updates.at([np.array([5, 6]), np.array([epoch, epoch])], (epoch,)), ZERO, ZERO)
    (whole,) = spine.batches
    at_three = Description(Antichain([(3,)]), Antichain([(4,)]), ZERO)
    return whole, spine.snapshot((3,), at_three)


def test_a_snapshot_reads_its_own_times_whichever_batch_was_read_first() -> None:
    """A snapshot shares its trace batch's columns and index, not what holds times:
    the few-key Python view of one must never answer for the other."""
    keys = FewKeys([(5,), (6,)], [5, 6])
    for reverse in (False, True):
        batches = _merged_and_snapshot()
        for batch in reversed(batches) if reverse else batches:
            found: list[Entry] = []
            assert cursor.lookup_entries(batch, keys, found)
            times = sorted(t for _, t, _, _ in found)
            assert times == sorted(tuple(int(c) for c in t) for t in batch.times.T), reverse


@given(spine_and_queries())
def test_lookups_of_ordered_keys_equal_a_dict_reference_and_build_no_index(
    case: tuple[Spine, list[Updates], tuple[np.ndarray, ...]],
) -> None:
    """A set input's bulk insert asks about its rows once, in hash order: searched in
    that order (`ordered`), they find what any lookup finds, and leave no index built
    (one built for a one-off question costs more than the search)."""
    spine, parts, queries = case
    k = spine.key_arity
    by_key: dict[tuple[object, ...], dict[tuple[object, ...], int]] = defaultdict(
        lambda: defaultdict(int)
    )
    for p in parts:
        for row in p.rows():
            by_key[tuple(row[:k])][tuple(row[k:-1])] += row[-1]  # type: ignore[operator]
    order = np.argsort(key_hash(queries), kind="stable")
    queries = tuple(c[order] for c in queries)
    with tuned(TUNING.but(min_indexed=0, few_keys=0, few=0)):
        check_lookup(spine, queries, by_key, ordered=True)
        assert all(b.cache.index is None for b in spine.batches)
