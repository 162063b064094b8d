"""A trace's sieve never rejects a key some batch holds, and lookups through it
find what lookups batch by batch find."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from differential.batch import Updates
from differential.time import Antichain
from differential.trace.batch import Batch, Description, key_hash
from differential.trace.cursor import lookup_batch
from differential.trace.sift import Sieve
from differential.trace.spine import Spine
from differential.tuning import TUNING, tuned

ZERO = Antichain([(0,)])
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(st.lists(INT64, max_size=200), st.lists(INT64, max_size=200))
def test_every_hash_added_passes(added: list[int], more: list[int]) -> None:
    sieve = Sieve.of([np.array(added, dtype=np.int64)])
    sieve.add(np.array(more, dtype=np.int64))
    assert sieve.passes(np.array(added + more, dtype=np.int64)).all()
    assert sieve.added == len(added) + len(more)


def test_most_hashes_never_added_are_rejected() -> None:
    rng = np.random.default_rng(3)
    sieve = Sieve(100_000)
    sieve.add(rng.integers(-(2**62), 2**62, size=sieve.capacity))
    passed = sieve.passes(rng.integers(-(2**62), 2**62, size=100_000)).mean()
    assert passed < 0.1  # one bit in 16 set per hash: about 1/16 pass
    assert sieve.full(1) and not Sieve(100_000).full(100_000)


def pairs(rng: np.random.Generator, n: int, epoch: int, diff: int = 1) -> Updates:
    a, b = rng.integers(0, 300, size=n), rng.integers(0, 300, size=n)
    u = Updates.at([a.astype(np.int64), b.astype(np.int64)], (epoch,))
    return Updates(u.columns, u.times, np.full(n, diff, dtype=np.int64))


def found(parts: list[tuple[np.ndarray, Updates]]) -> list[tuple[object, ...]]:
    """(query row, gathered columns, time, diff) of every entry found, sorted."""
    rows: list[tuple[object, ...]] = []
    for owner, u in parts:
        gathered = [tuple(c[i].item() for c in u.columns) for i in range(len(owner))]
        times, diffs = u.times[0].tolist(), u.diffs.tolist()
        rows += zip(owner.tolist(), gathered, times, diffs, strict=True)
    return sorted(rows)


@given(
    st.lists(st.integers(1, 400), min_size=1, max_size=12),
    st.integers(0, 2**32),
    st.sampled_from([[], [1], None]),
    st.booleans(),
)
def test_sifted_lookups_find_what_each_batch_finds(
    sizes: list[int], seed: int, columns: list[int] | None, spread: bool
) -> None:
    """Batches pushed after the sieve was built (or filled it: rebuilt whole, or
    replaced by its successor: `spread`), retractions, and a pending batch outside the
    trace are all found as without the sieve."""
    rng = np.random.default_rng(seed)
    spine = Spine(2, [np.dtype(np.int64)] * 2, 1)
    description = Description(ZERO, ZERO, Antichain())
    pending = Batch.build(pairs(rng, 50, len(sizes)), 2, description)
    with (
        tuned(TUNING.but(sifted_keys=1, sifted_batches=1, sieve_min_bits=64, spread_sieve=spread)),
    ):
        for epoch, n in enumerate(sizes):
            diff = -1 if epoch % 3 == 2 else 1
            spine.append(Batch.build(pairs(rng, n, epoch, diff), 2, description))
            keys = [rng.integers(0, 300, size=500).astype(np.int64) for _ in range(2)]
            hashes = key_hash(keys)
            batches = [*spine.batches, pending]
            held = spine.sifted(batches, keys, hashes, columns)
            each = [lookup_batch(b, keys, hashes, columns) for b in batches]
            assert found(held) == found([p for p in each if p is not None])
            assert spine._sieve is not None  # the lookup went through the sieve


@given(st.lists(st.integers(1, 50), min_size=1, max_size=120), st.integers(0, 2**32))
def test_a_sieve_fills_its_successor_as_batches_come(sizes: list[int], seed: int) -> None:
    """ADR 0080 (`Tuning.spread_sieve`): a sieve half full starts its successor and
    fills it as batches come, so the successor is complete when the sieve is full and
    replaces it; every hash the trace holds passes throughout, as with the reference,
    which drops a full sieve (the trace rebuilds it whole when next asked)."""
    rng = np.random.default_rng(seed)
    for spread in (False, True):
        held = [rng.integers(-(2**62), 2**62, size=500)]
        replaced = 0
        with tuned(TUNING.but(spread_sieve=spread, sieve_min_bits=64)):
            sieve: Sieve | None = Sieve.of(held)
            for n in sizes:
                if rng.random() < 0.2:  # a merge consolidated entries away
                    i = int(rng.integers(len(held)))
                    held[i] = held[i][: len(held[i]) // 2]
                hashes = rng.integers(-(2**62), 2**62, size=n)
                held.append(hashes)
                if sieve is None:
                    sieve = Sieve.of(held)  # (the reference's whole rebuild)
                    continue
                before = sieve
                if spread and sieve.full(n):
                    assert sieve.successor is not None and not sieve.successor.parts
                sieve = sieve.then(hashes, held.copy)
                if sieve is None:
                    assert not spread
                    continue
                replaced += sieve is not before
                assert sieve.passes(np.concatenate(held)).all()
                if spread and sieve.successor is not None:
                    assert 2 * sieve.added > sieve.capacity  # started at half full
        if spread and sum(sizes) > 600:  # (the first sieve holds 1,024)
            assert replaced
