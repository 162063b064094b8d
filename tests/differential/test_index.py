"""The hash index of a batch finds exactly the runs binary search finds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from differential.trace.batch import key_hash
from differential.trace.index import EMPTY, HashIndex, HashTable, IndexBuild, LookupCache
from differential.trace.keyset import KeySet
from differential.tuning import TUNING, tuned

INT64 = st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1)
# Values that share their low bits or high bits: the worst case for slot choice.
CLUSTERED = st.builds(lambda k, s: k << s, st.integers(-1000, 1000), st.sampled_from([0, 20, 50]))


@given(
    st.lists(st.one_of(INT64, CLUSTERED, st.integers(-5, 5)), max_size=300),
    st.lists(st.one_of(INT64, CLUSTERED, st.integers(-5, 5)), max_size=300),
)
def test_ranges_equal_binary_search(entries: list[int], queries: list[int]) -> None:
    hashes = np.sort(np.array(entries, dtype=np.int64))
    needles = np.array(queries + entries[:50], dtype=np.int64)
    lo, hi = HashIndex(hashes).ranges(needles)
    want_lo = np.searchsorted(hashes, needles, side="left")
    want_hi = np.searchsorted(hashes, needles, side="right")
    found = want_hi > want_lo
    assert np.array_equal(hi > lo, found)
    assert np.array_equal(lo[found], want_lo[found])
    assert np.array_equal(hi[found], want_hi[found])


def test_many_probes_through_several_chunks() -> None:
    rng = np.random.default_rng(3)
    hashes = np.sort(rng.integers(0, 1 << 40, 50_000))
    needles = np.concatenate([rng.choice(hashes, 300_000), rng.integers(0, 1 << 40, 300_000)])
    lo, hi = HashIndex(hashes).ranges(needles)
    want = np.searchsorted(hashes, needles)
    present = np.isin(needles, hashes)
    assert np.array_equal(hi > lo, present)
    assert np.array_equal(lo[present], want[present])


def test_a_batch_is_indexed_once_enough_keys_were_asked() -> None:
    hashes = np.arange(1 << 15, dtype=np.int64)
    cache = LookupCache()
    assert cache.index_for(hashes, 100) is None  # a few binary searches are cheaper
    assert cache.index_for(hashes, len(hashes) // 8) is not None
    assert cache.index_for(hashes, 1) is cache.index


@pytest.mark.parametrize("spread", [False, True])
def test_a_large_index_is_built_by_the_lookups_that_follow(spread: bool) -> None:
    """ADR 0080: past `merge_fuel` runs, the lookup that makes an index worth building
    starts it and the following ones place `index_effort` runs per key asked,
    so that no one lookup pays for the whole (one asked about as many keys as
    built it whole still does); the index is the one built whole."""
    rng = np.random.default_rng(5)
    hashes = np.sort(rng.integers(-(2**62), 2**62, size=1 << 15))
    hashes[100:110] = hashes[100]  # a run of several entries
    cache = LookupCache()
    with tuned(TUNING.but(spread_index=spread, merge_fuel=1 << 12, index_effort=8.0)):
        lookups = 1
        while cache.index_for(hashes, 512) is None:  # each places 4,096 runs once due
            lookups += 1
    # Worth it at the 8th lookup (4,096 keys asked, an eighth of the entries); spread,
    # the 32,759 runs take that one and 7 more.
    assert lookups == (15 if spread else 8)
    needles = np.concatenate([hashes[::7], rng.integers(-(2**62), 2**62, size=1000)])
    whole = HashIndex(hashes)
    assert cache.index is not None and cache.index.unique == whole.unique
    lo, hi = cache.index.ranges(needles)
    want_lo, want_hi = whole.ranges(needles)
    assert np.array_equal(lo, want_lo) and np.array_equal(hi, want_hi)


def test_a_small_batch_asked_about_many_more_keys_is_indexed() -> None:
    """A round's few new edges, against which a delta query validates a million
    candidates: the index repays its build, however small the batch."""
    hashes = np.arange(1 << 10, dtype=np.int64)
    cache = LookupCache()
    assert cache.index_for(hashes, 1_000) is None  # the build's fixed cost is not repaid yet
    assert cache.index_for(hashes, 1 << 20) is not None


def test_every_hash_is_indexed_the_int64_minimum_too() -> None:
    """The table marks a free slot by its run number (ADR 0069), not by a hash: a
    column holding the int64 minimum (a free slot's mark before) is indexed and found."""
    hashes = np.r_[np.iinfo(np.int64).min, np.arange(1 << 15), 7].astype(np.int64)
    hashes.sort()
    index = LookupCache().index_for(hashes, len(hashes))
    assert index is not None
    needles = np.array([np.iinfo(np.int64).min, 7, -5, 1 << 20], dtype=np.int64)
    lo, hi = index.ranges(needles)
    assert lo.tolist()[:2] == [0, 8] and (hi - lo).tolist() == [1, 2, 0, 0]


@pytest.mark.parametrize("tail", [0, 1 << 10])
def test_a_hash_table_asked_for_the_free_slots_mark_finds_nothing(tail: int) -> None:
    """`HashTable` marks a free slot by `EMPTY` (the int64 minimum), which it never
    holds: asked for it, it answers absent (-1), probing in numpy or the tail in
    Python, not the value of whichever free slot the probe met first."""
    table = HashTable(64)
    held = np.arange(1, 21, dtype=np.int64) * 977
    table.insert(held, np.arange(20, dtype=np.intp) + 100)
    needles = np.r_[EMPTY, held[:3], EMPTY, 5].astype(np.int64)
    with tuned(TUNING.but(probe_tail=tail)):
        assert table.find(needles).tolist() == [-1, 100, 101, 102, -1, -1]


@given(
    st.lists(st.one_of(INT64, CLUSTERED, st.integers(-5, 5)), max_size=300),
    st.lists(st.integers(0, 7), min_size=1, max_size=5),
)
def test_an_index_built_a_part_at_a_time_is_the_index_built_whole(
    entries: list[int], fuels: list[int]
) -> None:
    """`IndexBuild` (a fueled merge's result's index, ADR 0069) at any fuel per step,
    0 included, answers every query as the index built at once does."""
    hashes = np.sort(np.array(entries, dtype=np.int64))
    build, steps = IndexBuild(hashes), 0
    while build.index is None:
        build.work(fuels[steps % len(fuels)])
        steps += 1
        assert steps <= 1_000
    needles = np.array([*entries[:50], 3, -3, 1 << 40], dtype=np.int64)
    got, want = build.index.ranges(needles), HashIndex(hashes).ranges(needles)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    assert build.index.unique == (len(set(entries)) == len(entries))


@given(
    st.lists(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), max_size=40), max_size=6),
    st.booleans(),
)
def test_a_key_set_equals_a_python_set_even_when_hashes_collide(
    batches: list[list[tuple[int, int]]], collide: bool
) -> None:
    """Keys are pairs; with `collide` every key gets one of two hashes (so most share)."""
    seen = KeySet([np.dtype(np.int64)] * 2, identity=False)
    reference: set[tuple[int, int]] = set()

    def hashed(rows: list[tuple[int, int]]) -> tuple[np.ndarray, list[np.ndarray]]:
        cols = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(2)]
        hashes = (cols[0] % 2 if collide else cols[0] * 7 + cols[1]).astype(np.int64)
        return hashes, cols

    for rows in batches:
        hashes, cols = hashed(rows)
        present = seen.contains(hashes, cols)
        assert present.tolist() == [r in reference for r in rows]
        fresh = sorted({r for r in rows if r not in reference})
        if fresh:
            seen.admit(*hashed(fresh))
            reference.update(fresh)
        assert len(seen) == len(reference)
    probe = [(a, b) for a in range(-3, 4) for b in range(-3, 4)]
    assert seen.contains(*hashed(probe)).tolist() == [r in reference for r in probe]


def test_a_key_set_grows_past_its_first_table() -> None:
    seen = KeySet([np.dtype(np.int64)], identity=True)
    for start in range(0, 100_000, 7_000):
        keys = np.arange(start, start + 7_000, dtype=np.int64)
        assert not seen.contains(keys, [keys]).any()
        seen.admit(keys, [keys])
    everything = np.arange(0, 105_000, dtype=np.int64)
    assert seen.contains(everything, [everything]).sum() == len(seen) == 105_000


@pytest.mark.parametrize("few", [0, 1_000], ids=["vectorized", "key-by-key"])
@given(
    st.lists(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), max_size=40), max_size=6),
    st.booleans(),
)
def test_admit_adds_each_new_key_once_even_when_keys_repeat(
    few: int, batches: list[list[tuple[int, int]]], collide: bool
) -> None:
    """Both ways in (numpy rounds for many keys, Python for a few) agree with a set."""
    with tuned(TUNING.but(few=few)):
        _admit_matches_a_python_set(batches, collide)


def _admit_matches_a_python_set(batches: list[list[tuple[int, int]]], collide: bool) -> None:
    seen = KeySet([np.dtype(np.int64)] * 2, identity=False)
    reference: set[tuple[int, int]] = set()
    for rows in batches:
        cols = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(2)]
        hashes = (cols[0] % 2 if collide else cols[0] * 7 + cols[1]).astype(np.int64)
        added = [rows[i] for i in seen.admit(hashes, cols).tolist()]
        new = {row for row in rows if row not in reference}
        reference |= new
        assert sorted(added) == sorted(new)  # each new key once (any of its rows)
        assert len(seen) == len(reference)


@pytest.mark.parametrize("few", [0, 1_000], ids=["vectorized", "key-by-key"])
def test_the_smallest_integer_is_a_key_like_any_other(few: int) -> None:
    """Its identity hash equals the table's free-slot marker: it must still be admitted
    once, and found present afterwards."""
    smallest = np.iinfo(np.int64).min
    with tuned(TUNING.but(few=few)):
        seen = KeySet([np.dtype(np.int64)], identity=True)
        keys = np.array([smallest, 5, smallest], dtype=np.int64)
        assert seen.admit(keys, [keys]).tolist() == [0, 1]
        assert seen.admit(keys, [keys]).tolist() == []
        assert seen.contains(keys, [keys]).tolist() == [True, True, True]
        assert len(seen) == 2


@given(
    st.lists(
        st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3), max_size=20), max_size=6
    ),
    st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), max_size=30),
    st.booleans(),
)
def test_holds_and_admit_absent_agree_with_a_python_set(
    batches: list[list[int]], pairs: list[tuple[int, int]], collide: bool
) -> None:
    """The fused rounds' way in (ADR 0029): `holds` probes one Python key, and the
    keys it found absent are added at once (`admit_absent` for identity sets, `admit`
    for mixed hashes, colliding or not)."""
    seen = KeySet([np.dtype(np.int64)], identity=True)
    reference: set[int] = set()
    for batch in [*batches, [int(np.iinfo(np.int64).min)]]:
        fresh = sorted({k for k in batch if not seen.holds(k, (k,))})
        assert fresh == sorted(set(batch) - reference)
        if fresh:
            keys = np.array(fresh, dtype=np.int64)
            seen.admit_absent(keys, [keys])
            reference.update(fresh)
        assert len(seen) == len(reference)
    assert all(seen.holds(k, (k,)) for k in reference)
    mixed = KeySet([np.dtype(np.int64)] * 2, identity=False)
    for i, (a, b) in enumerate(pairs):
        h = a % 2 if collide else a * 7 + b
        assert mixed.holds(h, (a, b)) == ((a, b) in pairs[:i])
        cols = [np.array([a]), np.array([b])]
        mixed.admit(np.array([h], dtype=np.int64), cols)


@pytest.mark.parametrize("identity", [True, False], ids=["one column", "pairs"])
def test_admit_takes_more_new_keys_than_the_table_has_room_for(identity: bool) -> None:
    """Thousands of new keys, repeating, into a set whose table holds about a thousand:
    they are placed a part at a time, and a key an earlier part placed is present for
    the later parts (each new key added once, every key found afterwards)."""
    rng = np.random.default_rng(3)
    arity = 1 if identity else 2
    seen = KeySet([np.dtype(np.int64)] * arity, identity=identity)
    reference: set[tuple[int, ...]] = set()
    for _ in range(4):
        cols = [rng.integers(0, 3_000 if identity else 60, 6_000) for _ in range(arity)]
        hashes = key_hash(cols)
        rows = list(zip(*(c.tolist() for c in cols), strict=True))
        added = [rows[i] for i in seen.admit(hashes, cols).tolist()]
        new = {row for row in rows if row not in reference}
        assert sorted(added) == sorted(new) and len(added) == len(new)
        reference |= new
        assert len(seen) == len(reference) and seen.contains(hashes, cols).all()


@pytest.mark.parametrize("stored_first", ["fits", "does not fit"])
def test_equal_hashes_mean_equal_keys_only_when_both_are_packed(stored_first: str) -> None:
    """Keys whose columns are packed side by side as their hash are compared by hash
    alone; a key that does not fit (its 44-bit mix may equal a packed hash) is never
    taken for the packed key sharing its hash, in either order of arrival."""
    fits = [np.array([3] * 40, dtype=np.int64), np.array(range(40), dtype=np.int64)]
    packed = key_hash(fits)
    other = [np.array([-1] * 40, dtype=np.int64), np.array(range(40), dtype=np.int64)]
    first, second = (fits, other) if stored_first == "fits" else (other, fits)
    seen = KeySet([np.dtype(np.int64)] * 2, identity=False)
    assert len(seen.admit(packed, first)) == 40  # the same hashes, as if they collided
    assert not seen.contains(packed, second).any()
    assert seen.contains(packed, first).all()
    assert len(seen.admit(packed, second)) == 40 and len(seen) == 80
    assert seen.contains(packed, second).all()


def test_a_key_added_alone_with_an_unpacked_hash_is_never_matched_by_hash_alone() -> None:
    """One key admitted by the row-by-row path under a hash that is not its packed
    columns; a packed key with that hash is not taken for it (a found example)."""
    seen = KeySet([np.dtype(np.int64)] * 2, identity=False)
    one = [np.array([0], dtype=np.int64), np.array([1], dtype=np.int64)]
    seen.admit(np.array([0], dtype=np.int64), one)  # 0 is not (0, 1) packed
    zero = [np.array([0], dtype=np.int64), np.array([0], dtype=np.int64)]
    assert not seen.contains(np.array([0], dtype=np.int64), zero).any()


@given(
    st.lists(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), max_size=40), max_size=6),
    st.booleans(),
)
def test_keys_from_a_position_are_each_key_added_since_once(
    batches: list[list[tuple[int, int]]], collide: bool
) -> None:
    """`keys_from` reads the keys added since the last read, each once, colliding ones
    (held in overflow) included: what a one-shot distinct settles (ADR 0062)."""
    seen = KeySet([np.dtype(np.int64)] * 2, identity=False)
    start, known, read = 0, set(), []
    for rows in batches:
        cols = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(2)]
        hashes = (cols[0] % 2 if collide else cols[0] * 7 + cols[1]).astype(np.int64)
        seen.admit(hashes, cols)
        columns, extra = seen.keys_from(start, known)
        start, known = seen.size, known | extra
        read.extend(zip(*(c.tolist() for c in columns), strict=True))
    assert sorted(read) == sorted(set(read)) == sorted({r for rows in batches for r in rows})


@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(-2, 2)), max_size=40),
    st.lists(st.tuples(st.integers(0, 9), st.integers(-2, 2), st.integers(1, 3)), max_size=60),
    st.booleans(),
)
def test_a_key_set_counts_its_keys_rows_and_names_the_absent(
    admitted: list[tuple[int, int]], rows: list[tuple[int, int, int]], collide: bool
) -> None:
    """`KeySet.count` (ADR 0067): each row's diff goes to its key's count, overflow keys
    (a hash another key holds, or the free-slot marker) included; a row whose key the
    set lacks is named and not counted. `counted` gives every key with a count."""

    def hashes_of(keys: list[tuple[int, int]]) -> np.ndarray:
        if not collide:  # real hashes; else few values, the free-slot marker among them
            return key_hash((np.array([a for a, _ in keys]), np.array([b for _, b in keys])))
        table = [EMPTY, 1, 2]
        return np.array([table[(a + b) % 3] for a, b in keys], dtype=np.int64)

    seen = KeySet([np.dtype(np.int64)] * 2, identity=False)
    if admitted:
        seen.admit(hashes_of(admitted), (np.array([a for a, _ in admitted]),
                                         np.array([b for _, b in admitted])))  # fmt: skip
    seen.count_inputs()
    keys = [(a, b) for a, b, _ in rows]
    diffs = np.array([d for _, _, d in rows], dtype=np.int64)
    columns = (np.array([a for a, _ in keys], dtype=np.int64), np.array([b for _, b in keys]))
    absent = seen.count(hashes_of(keys) if keys else np.zeros(0, np.int64), columns, diffs)
    held = set(admitted)
    assert absent.tolist() == [i for i, key in enumerate(keys) if key not in held]
    expected: dict[tuple[int, int], int] = {}
    for key, (_, _, d) in zip(keys, rows, strict=True):
        if key in held:
            expected[key] = expected.get(key, 0) + d
    found, counts = seen.counted()
    got = dict(zip(zip(*(c.tolist() for c in found), strict=True), counts.tolist(), strict=True))
    assert got == expected


@given(
    st.sets(st.one_of(INT64, CLUSTERED), max_size=400).map(lambda s: s - {EMPTY}),
    st.integers(0, 3),
)
def test_a_table_filled_at_once_holds_what_inserting_holds(hashes: set[int], room: int) -> None:
    """`HashTable.fill` (sorted by home slot, a running maximum; those past the end
    wrapped by `insert`) holds every hash at its position, as `insert` does, and no
    other: the tightest table fills to its last slot and wraps around."""
    held = np.array(sorted(hashes, key=hash), dtype=np.int64)
    tables = [HashTable(len(held) + room, 2) for _ in range(2)]
    with tuned(TUNING.but(index_chunk=7)):  # (several parts)
        tables[0].fill(held)
        tables[1].insert(held, np.arange(len(held)))
    for table in tables:
        assert table.size == len(held)
        assert np.array_equal(table.find(held), np.arange(len(held)))
        stored, values = table.values()
        assert sorted(stored.tolist()) == sorted(held.tolist())
        assert np.array_equal(np.sort(values), np.arange(len(held)))
    absent = [h ^ 1 for h in hashes if h ^ 1 not in hashes and h ^ 1 != EMPTY][:50]
    assert (tables[0].find(np.array(absent, dtype=np.int64)) == -1).all()


def test_filling_wraps_the_hashes_whose_run_passes_the_last_slot() -> None:
    """Hashes whose home is the last slot run past the end: `fill` wraps them to the
    table's first slots, where probing from their home finds them."""
    table = HashTable(40, 2)
    slots = len(table.arrays()[0])
    homes = [(h, table.find_slot(h)[0]) for h in range(1, 1 << 14)]  # (empty: its home)
    last = np.array([h for h, home in homes if home == slots - 1][:12], dtype=np.int64)
    assert len(last) == 12
    table.fill(last)
    assert np.array_equal(table.find(last), np.arange(len(last)))
    assert (table.arrays()[0][: len(last) - 1] != EMPTY).any()  # (some did wrap)
