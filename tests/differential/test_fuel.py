"""Fueled merges (ADR 0054): a merge done a slice of keys at a time builds exactly the
batch a whole merge builds, and a spine that spreads its merges over many appends
holds the same collection as one that merges at once, after every append."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from datalog import Change, Database
from datalog.eval import reference
from datalog.lang.checks import check_query
from datalog.lang.parser import parse_query
from differential.batch import Updates
from differential.time import Antichain
from differential.trace import fuel as fuel_module
from differential.trace import spine as spine_module
from differential.trace.batch import Batch, Description, key_hash, merge
from differential.trace.cursor import FewKeys
from differential.trace.fuel import Merging
from differential.trace.index import HashIndex, IndexBuild
from differential.trace.spine import Spine
from differential.tuning import TUNING, Tuning, tuned
from tests.differential.strategies import updates

ZERO = Antichain([(0,)])
EAGER = Tuning.default().but(merge_fuel=0)
# Merges of more than 8 entries spread, 2 entries of work per appended entry.
FUELED = Tuning.default().but(merge_fuel=8, merge_effort=2, small_trace=16, tail=4)
KEYED = st.sampled_from([(("i", "i"), 1), (("i", "i", "i"), 2), (("f", "i"), 1), (("i",), 1)])


def arranged(u: Updates, key_arity: int) -> Batch:
    return Batch.build(u, key_arity, Description(ZERO, ZERO, Antichain()))


def same_batch(a: Batch, b: Batch) -> None:
    assert np.array_equal(a.hashes, b.hashes)
    assert len(a.columns) == len(b.columns)
    for x, y in zip(a.columns, b.columns, strict=True):
        assert np.array_equal(x, y)
    assert np.array_equal(a.times, b.times) and np.array_equal(a.diffs, b.diffs)


@given(
    KEYED,
    st.lists(updates(max_size=40, domain=6), min_size=1, max_size=4),
    st.integers(0, 3),
    st.lists(st.integers(0, 20), min_size=1, max_size=6),
)
def test_a_fueled_merge_builds_the_batch_a_whole_merge_builds(
    keyed: tuple[tuple[str, ...], int], parts: list[Updates], at: int, fuels: list[int]
) -> None:
    kinds, key_arity = keyed
    parts = [updates_like(p, kinds) for p in parts]
    inputs = [arranged(p, key_arity) for p in parts]
    inputs = [b for b in inputs if len(b)] or inputs[:1]
    since = Antichain([(at,)])
    whole = merge(inputs, since)
    merging = Merging(inputs, since)
    steps = 0
    while merging.result is None:
        merging.work(fuels[steps % len(fuels)])
        steps += 1
        assert steps <= 10_000
    same_batch(merging.result, whole)
    assert merging.remaining == 0


def updates_like(u: Updates, kinds: tuple[str, ...]) -> Updates:
    """`u`'s columns cut or repeated to `kinds` (a float where asked)."""
    cols = [u.columns[i % len(u.columns)] for i in range(len(kinds))]
    typed = [c.astype(np.float64) / 2 if k == "f" else c for c, k in zip(cols, kinds, strict=True)]
    return Updates(tuple(typed), u.times, u.diffs)


def accumulated(spine: Spine) -> Counter[tuple[object, ...]]:
    counts: Counter[tuple[object, ...]] = Counter()
    state = spine.accumulate()
    for row in zip(*(c.tolist() for c in state.columns), state.diffs.tolist(), strict=True):
        counts[row[:-1]] += row[-1]
    return +counts


@pytest.mark.parametrize("seed", range(6))
def test_a_fueled_spine_holds_what_an_eager_one_holds_after_every_append(seed: int) -> None:
    rng = random.Random(seed)
    spines = {name: Spine(1, [np.dtype(np.int64)] * 2, 1) for name in ("eager", "fueled")}
    tunings = {"eager": EAGER, "fueled": FUELED}
    want: Counter[tuple[object, ...]] = Counter()
    started = 0
    for epoch in range(120):
        n = rng.choice([1, 2, 3, 5, 20, 60])
        rows = [(rng.randrange(40), rng.randrange(5)) for _ in range(n)]
        diffs = [rng.choice([1, 1, -1]) for _ in rows]
        for row, diff in zip(rows, diffs, strict=True):
            want[row] += diff
        upd = Updates.at([np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)], (epoch,))
        upd = Updates(upd.columns, upd.times, np.array(diffs, dtype=np.int64))
        asked = np.array([rng.randrange(40) for _ in range(3)], dtype=np.int64)
        keys = FewKeys.of([asked], key_hash([asked]))
        found = {}
        for name, spine in spines.items():
            with tuned(tunings[name]):
                spine.insert(upd, ZERO, ZERO)
                spine.batches  # noqa: B018 (a reader: merges advance)
                started = max(started, spine.merges_in_progress if name == "fueled" else 0)
                assert accumulated(spine) == +want, (name, epoch)
                found[name] = sorted(spine.lookup_entries(keys))
        assert consolidated_entries(found["eager"]) == consolidated_entries(found["fueled"])
    assert started, "no merge was ever in progress: the test would mean nothing"
    fueled = spines["fueled"]
    assert fueled.batch_count <= 3 * np.log2(len(fueled) + 2) + TUNING.small_batches + 2


def consolidated_entries(entries: list[tuple[object, ...]]) -> Counter[tuple[object, ...]]:
    counts: Counter[tuple[object, ...]] = Counter()
    for row, _time, values, diff in entries:
        counts[(row, *values)] += diff  # type: ignore[misc]
    return +counts


PROGRAM = """
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
.decl tri(a: number, b: number, c: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
tri(a, b, c) :- edge(a, b), edge(b, c), edge(a, c), a < b, b < c.
"""
QUERIES = ("reach(3, y)", "reach(x, 5)", "tri(a, b, c)")


class Accumulated:
    def __init__(self) -> None:
        self.counts: Counter[tuple[object, ...]] = Counter()

    def __call__(self, change: Change) -> None:
        for row, diff in zip(change.rows, change.diffs, strict=True):
            self.counts[row] += diff

    def rows(self) -> set[tuple[object, ...]]:
        assert all(n in (0, 1) for n in self.counts.values()), self.counts
        return {row for row, n in self.counts.items() if n}


def test_fueled_and_eager_databases_agree_with_the_reference_after_every_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Single edges toggled on a graph whose traces outgrow `small_trace`: merges run
    for many commits under `FUELED`; every live answer of both databases equals the
    reference evaluation after every commit."""
    rng = random.Random(11)
    edges = {(rng.randrange(20), rng.randrange(20)) for _ in range(40)}
    dbs, subscribers = {}, {}
    for name, tuning in (("eager", EAGER), ("fueled", FUELED)):
        with tuned(tuning):
            db = Database()
            db.define(PROGRAM)
            db.insert("edge", sorted(edges))
            subscribers[name] = {q: Accumulated() for q in QUERIES}
            for query, sub in subscribers[name].items():
                db.subscribe(query, sub)
            dbs[name] = db
    started = Counter[str]()

    now = [0]  # the commit under way

    class Counted(Merging):
        """Counts merges that finish in a later commit than the one that began them."""

        def work(self, fuel: int) -> int:
            begun = self.__dict__.setdefault("begun", now[0])
            spent = super().work(fuel)
            if self.result is not None:
                started["spread" if now[0] > begun else "whole"] += 1
            return spent

    monkeypatch.setattr(spine_module, "Merging", Counted)
    for commit in range(60):
        now[0] = commit
        edge = (rng.randrange(20), rng.randrange(20))
        present = edge in edges
        edges = edges - {edge} if present else edges | {edge}
        for name, tuning in (("eager", EAGER), ("fueled", FUELED)):
            with tuned(tuning):
                (dbs[name].retract if present else dbs[name].insert)("edge", [edge])
        relations = reference.evaluate(dbs["eager"].checked, {"edge": edges})
        for query in QUERIES:
            checked = check_query(parse_query(query), dbs["eager"].checked.schema)
            want = reference.answer(checked, relations)
            for name in dbs:
                assert subscribers[name][query].rows() == want, (commit, name, query)
    # merges spread over commits, and finished: the test means something
    assert started["spread"] >= 3, started


@given(
    KEYED,
    st.lists(updates(max_size=40, domain=6), min_size=1, max_size=4),
    st.lists(st.integers(0, 20), min_size=1, max_size=6),
    st.booleans(),
)
def test_a_fueled_merge_of_indexed_batches_builds_the_index_a_lookup_would(
    keyed: tuple[tuple[str, ...], int], parts: list[Updates], fuels: list[int], merge_index: bool
) -> None:
    """`Tuning.merge_index` (ADR 0069): the merged batch comes with an index built a
    few runs a step, which finds every key's entries as the index its lookups would
    build finds them; without it (the reference) the batch comes unindexed."""
    kinds, key_arity = keyed
    inputs = [arranged(updates_like(p, kinds), key_arity) for p in parts]
    inputs = [b for b in inputs if len(b)] or inputs[:1]
    for batch in inputs:
        batch.cache.keys.index = HashIndex(batch.hashes)
    since = Antichain([(0,)])
    whole = merge(inputs, since)
    with tuned(Tuning.default().but(merge_index=merge_index)):
        merging = Merging(inputs, since)
    steps = 0
    while merging.result is None:
        merging.work(fuels[steps % len(fuels)])
        steps += 1
        assert steps <= 10_000
    same_batch(merging.result, whole)
    index = merging.result.cache.index
    if not merge_index or not len(whole):
        assert index is None
        return
    assert index is not None
    needles = np.concatenate([whole.hashes, np.arange(-3, 9, dtype=np.int64)])
    got, want = index.ranges(needles), HashIndex(whole.hashes).ranges(needles)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("seed", range(4))
def test_spines_that_index_their_merges_or_not_find_the_same_entries(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eager, fueled, and fueled with `merge_index` spines looked up by many keys (so
    their batches are indexed) after every append: the same entries, and merges did
    build indexes a few runs at a time (counted)."""
    built = Counter[str]()

    class Counted(IndexBuild):
        def work(self, fuel: int) -> int:
            spent = super().work(fuel)
            built["steps"] += 1
            built["done"] += self.index is not None and spent > 0
            return spent

    monkeypatch.setattr(fuel_module, "IndexBuild", Counted)
    rng = np.random.default_rng(seed)
    indexed = {"min_indexed": 8, "few_keys": 4, "asked_per_entry": 1 / 64}
    tunings = {
        "eager": EAGER.but(**indexed),
        "fueled": FUELED.but(merge_index=False, **indexed),
        "indexed": FUELED.but(merge_index=True, **indexed),
    }
    spines = {name: Spine(1, [np.dtype(np.int64)] * 2, 1) for name in tunings}
    for epoch in range(80):
        n = int(rng.choice([1, 5, 20, 60]))
        cols = [rng.integers(0, 60, n), rng.integers(0, 6, n)]
        diffs = rng.choice([1, 1, -1], n).astype(np.int64)
        upd = Updates(tuple(cols), Updates.at(cols, (epoch,)).times, diffs)
        asked = rng.integers(0, 70, 100)
        found = {}
        for name, spine in spines.items():
            with tuned(tunings[name]):
                spine.insert(upd, ZERO, ZERO)
                owner, entries = spine.lookup([asked])
                rows = zip(owner.tolist(), *(c.tolist() for c in entries.columns), strict=True)
                counts: Counter[tuple[object, ...]] = Counter()
                for row, diff in zip(rows, entries.diffs.tolist(), strict=True):
                    counts[row] += diff
                found[name] = +counts
        assert found["eager"] == found["fueled"] == found["indexed"], epoch
    assert built["done"] >= 2 and built["steps"] > built["done"], built
