"""A set input's big commit (ADR 0075): the merge of batches of keys only by one stable
sort of their hashes (`Tuning.key_runs`) builds exactly the batch `Batch.build` of the
concatenation builds (the reference), and finding the rows a set input holds already
by one sort of its hashes and theirs (`Tuning.merged_dedupe`) commits exactly the
diffs that looking every row up commits: same contents, same deliveries, retractions
included.

Batches are shaped like a presence arrangement's: keyed by all their columns, one
time coordinate, oldest first (each batch's times a window after the last's, one
repeated time or several), with retractions that cancel across batches once their
times are advanced to the same time; keys of one column (left to the reference), of
two or three columns that pack (ordered hashes) or that do not (negative or wide values:
mixed hashes), int64 and int32.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from differential import inputs
from differential.batch import Updates
from differential.engine import Engine
from differential.time import Antichain, uniform_times
from differential.trace.batch import Batch, Description, ordered_hash
from differential.trace.runs import Known, merge, merge_key_runs
from differential.tuning import TUNING, tuned
from tests.differential.harness import I64, Accumulated, Op, collection, counter, requests
from tests.differential.test_inputs import diff, set_model
from tests.differential.test_load_paths import assert_same_batch

WIDE = 1 << 40  # past the packed width of two columns or more: a mixed hash


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[Batch], int]:
    """Two to four batches of keys only, oldest first, and their last time."""
    arity = draw(st.sampled_from([1, 2, 3]))
    dtype = draw(st.sampled_from([np.int64, np.int32]))
    values = st.sampled_from([0, 1, 2, 3]) | st.sampled_from([-1, WIDE])
    row = st.tuples(*[values] * arity)
    if dtype == np.int32:
        row = st.tuples(*[st.integers(0, 3)] * arity)
    out, now = [], 0
    for _ in range(draw(st.integers(2, 4))):
        rows = draw(st.lists(row, min_size=1, max_size=12))
        n = len(rows)
        cols = tuple(np.array([r[i] for r in rows], dtype=dtype) for i in range(arity))
        if draw(st.booleans()):  # one time: a loaded batch, a commit
            now += draw(st.integers(0, 1))
            times = uniform_times((now,), n) if n > 1 else np.full((1, n), now)
        else:
            steps = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
            times = (now + np.array(steps, dtype=np.int64)).reshape(1, n)
            now += max(steps)
        diffs = np.array(draw(st.lists(st.sampled_from([1, -1, 2]), min_size=n, max_size=n)))
        if draw(st.booleans()):
            diffs = np.ones(n, dtype=np.int64)
        description = Description(Antichain([(0,)]), Antichain([(now + 1,)]), Antichain())
        built = Batch.build(Updates(cols, times, diffs), arity, description)
        if len(built):
            out.append(built)
    return out, now


def twin(batches: list[Batch], since: Antichain) -> tuple[Batch, Batch]:
    with tuned(TUNING.but(few=0, key_runs=True)):
        found = merge(batches, since)
    with tuned(TUNING.but(few=0, key_runs=False)):
        reference = merge(batches, since)
    return found, reference


@given(runs(), st.data())
def test_merging_key_runs_builds_the_batch_building_the_concatenation_builds(
    drawn: tuple[list[Batch], int], data: st.DataObject
) -> None:
    batches, now = drawn
    if len(batches) < 2:
        return
    since = data.draw(st.sampled_from([Antichain(), *(Antichain([(t,)]) for t in range(now + 2))]))
    found, reference = twin(batches, since)
    assert_same_batch(found, reference)
    assert found.description == reference.description
    assert found.key_arity == reference.key_arity
    assert [c.dtype for c in found.columns] == [c.dtype for c in reference.columns]


@given(runs())
def test_batches_out_of_time_order_are_merged_by_the_reference(
    drawn: tuple[list[Batch], int],
) -> None:
    batches, _ = drawn
    late_first = batches[::-1]
    spans = [(int(b.times.min()), int(b.times.max())) for b in late_first]
    if all(hi <= lo for (_, hi), (lo, _) in itertools.pairwise(spans)):
        return  # still in order
    assert merge_key_runs(late_first, Antichain()) is None
    found, reference = twin(late_first, Antichain())
    assert_same_batch(found, reference)


def keys(rows: list[tuple[int, int]], time: int) -> Batch:
    cols = tuple(np.array([r[i] for r in rows], dtype=np.int64) for i in range(2))
    n = len(rows)
    updates = Updates(cols, np.full((1, n), time), np.ones(n, dtype=np.int64))
    return Batch.build(updates, 2, Description(Antichain([(time,)]), Antichain(), Antichain()))


def test_the_tactic_answers_for_packed_keys_and_leaves_others_to_the_reference() -> None:
    """Not vacuous: packed keys in time order are merged by the tactic (a row retracted
    in the later batch cancels once advanced to its time); a key that does not pack
    given the hash of one that does (as a collision of the mixed hash would) is not,
    nor are a few entries (`Tuning.few`: Python lists are faster) or keys of one
    integer column (packed parts, ADR 0063)."""
    old, new = keys([(0, 1), (2, 3), (5, 5)], 1), keys([(1, 1), (2, 3)], 2)
    assert merge_key_runs([old, new], Antichain()) is None  # a few entries
    retract = Batch(
        new.hashes[1:],
        tuple(c[1:] for c in new.columns),
        2,
        np.full((1, 1), 2),
        np.array([-1]),
        new.description,
    )
    clash = Batch(
        old.hashes[:1].copy(),
        (np.array([WIDE]), np.array([7])),  # a key that does not pack
        2,
        np.full((1, 1), 2),
        np.array([1]),
        new.description,
    )
    description = Description(Antichain([(0,)]), Antichain(), Antichain())
    unary = [Batch.build(Updates.at((np.arange(40),), (t,)), 1, description) for t in (1, 2)]
    with tuned(TUNING.but(few=0)):
        found = merge_key_runs([old, retract], Antichain([(2,)]))
        assert found is not None
        rows = zip(*(c.tolist() for c in found.columns), strict=True)
        assert [tuple(r) for r in rows] == [(0, 1), (5, 5)]
        assert merge_key_runs([old, clash], Antichain()) is None
        assert merge_key_runs(unary, Antichain()) is None


# -- a set input's bulk inserts, deduplicated by one sort --------------------------------


class Observed:
    """An engine with one binary set input `r` and a dataflow delivering its changes."""

    def __init__(self) -> None:
        self.engine = Engine()
        self.input = self.engine.create_input("r", [I64, I64], "set")
        df = self.engine.dataflow("observe")
        self.acc = Accumulated(df.capture(collection(df, "r", 2).output, "r"))
        self.changes: list[dict[tuple[int, ...], int]] = []
        df.outputs["r"].listeners.append(lambda u, _: self.changes.append(dict(counter(u))))
        self.engine.start(df)

    def commit(self, txn: list[Op]) -> dict[tuple[int, ...], int]:
        self.engine.commit({"r": requests(txn, 2)})
        return self.changes[-1] if self.changes else {}

    def state(self) -> Updates:
        return self.input.presence.spine.accumulate(None)


def bulk(domain: int) -> st.SearchStrategy[list[Op]]:
    """A transaction: inserts only (a bulk load) or inserts and retracts."""
    row: st.SearchStrategy[tuple[int, ...]] = st.tuples(
        st.integers(0, domain - 1), st.integers(0, domain - 1)
    )
    inserts: st.SearchStrategy[list[Op]] = st.lists(st.tuples(st.just(True), row), max_size=20)
    mixed: st.SearchStrategy[list[Op]] = st.lists(st.tuples(st.booleans(), row), max_size=12)
    return st.one_of(inserts, mixed)


@given(st.lists(bulk(5), min_size=1, max_size=8), st.sampled_from([0, 3]))
def test_a_bulk_insert_deduplicated_by_one_sort_commits_what_looking_up_commits(
    stream: list[list[Op]], few: int
) -> None:
    """Both tactics (and the merge of key runs, on and off with them, reusing the sort
    at the seal) deliver the set's exact change at every commit and hold the same
    state, array for array."""
    note(f"stream: {stream}")
    observed = {}
    for fast in (True, False):
        # (`sorted_from` 2: small batches built in order share the hashes sorted, so the
        # seal's merge may reuse the sort that found the new rows)
        sort = 0.0 if fast else float("inf")
        tuning = TUNING.but(few=few, sorted_from=2, merged_dedupe=sort, key_runs=fast)
        with tuned(tuning):
            obs, model, seen = Observed(), set[tuple[int, ...]](), []
            for txn in stream:
                after = set_model(model, txn)
                change = obs.commit(txn)
                assert change == diff(dict.fromkeys(model, 1), dict.fromkeys(after, 1))
                seen.append((change, obs.state()))
                model = after
            assert dict(obs.acc.state) == dict.fromkeys(model, 1)
            observed[fast] = seen
    for (change, state), (change_ref, state_ref) in zip(
        observed[True], observed[False], strict=True
    ):
        assert change == change_ref
        for a, b in zip(
            [*state.columns, state.times, state.diffs],
            [*state_ref.columns, state_ref.times, state_ref.diffs],
            strict=True,
        ):
            assert np.array_equal(a, b)


def test_the_sort_looks_up_only_rows_whose_hash_the_input_holds() -> None:
    """Not vacuous: a row inserted, retracted, and asked again is found absent (its
    hash is still held, at two times), a held row is found present, a new row is new."""
    with tuned(TUNING.but(few=0)):
        obs = Observed()
        obs.commit([(True, (1, 1)), (True, (2, 2))])
        obs.commit([(False, (1, 1))])
        rows = (np.array([1, 2, 3], dtype=np.int64), np.array([1, 2, 3], dtype=np.int64))
        hashes = ordered_hash(rows)
        assert hashes is not None
        assert obs.input.absent(rows, hashes).tolist() == [True, False, True]
        assert obs.commit([(True, (1, 1)), (True, (2, 2)), (True, (3, 3))]) == {
            (1, 1): 1,
            (3, 3): 1,
        }


def test_the_seal_merges_the_new_rows_into_the_state_by_the_sort_that_found_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not vacuous: a bulk insert into a set input that doubles it (so the seal
    compacts its state) merges by the order its deduplication found, and a row it
    held already (dropped from that order) is not staged twice; a hundred rows into
    the state are looked up (`Tuning.merged_dedupe`: a sort costs the whole state)."""
    fits: list[bool] = []
    sorts: list[int] = []  # the sorts deduplications made (each a `Known`): rows asked
    real = Known.fits

    def fitting(self: Known, runs: list[Batch]) -> bool:
        fits.append(real(self, runs))
        return fits[-1]

    def sorted_with(*args: Any) -> Known:
        sorts.append(args[3])
        return Known(*args)

    monkeypatch.setattr(Known, "fits", fitting)
    monkeypatch.setattr(inputs, "Known", sorted_with)
    obs = Observed()
    first: list[Op] = [(True, (i, i + 1)) for i in range(5_000)]
    obs.commit(first)
    again: list[Op] = [(True, (i, 2 * i)) for i in range(1, 6_000)]  # (1, 2) is held already
    change = obs.commit(again)
    assert fits == [True]
    assert len(change) == 5_998 and (1, 2) not in change
    state = obs.state()
    assert len(state) == 10_998 and state.diffs.tolist() == [1] * 10_998
    rows = list(zip(*(c.tolist() for c in state.columns), strict=True))
    assert rows == sorted(set(rows))
    assert sorts == [5_999]
    few: list[Op] = [(True, (i, 3 * i)) for i in range(2, 102)]  # a few next to the state
    obs.commit(few)
    assert sorts == [5_999]  # looked up: the state is not sorted for them
