"""`Database.subscribe_why`: a fact's explanation kept current (docs/adr/0045), by
example: snapshot, one change per epoch where it changes, nothing explained at epochs
that touch none of its relations, pacing, unsubscribing and failures."""

from __future__ import annotations

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from datalog import Database, Derivation, FactHoldsError, ManualClock, WhyChange, WhyNot
from datalog.lang.errors import TransactionError
from differential.tuning import TUNING
from tests.budget import examples

TC = """
.decl edge(src: number, dst: number)
.decl other(x: number)
.decl reach(src: number, dst: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""


def tc(edges: list[tuple[int, int]], clock: ManualClock | None = None) -> Database:
    db = Database(clock=clock)
    db.define(TC)
    db.insert("edge", edges)
    return db


def test_a_snapshot_then_the_explanation_again_at_each_epoch_where_it_changes() -> None:
    db = tc([(1, 2), (2, 3)])
    got: list[WhyChange] = []
    sub = db.subscribe_why("reach(1, 4)", got.append)
    start = db.epoch
    assert [(c.epoch, c.snapshot, c.holds) for c in got] == [(start, True, False)]
    assert isinstance(got[0].explanation, WhyNot)
    db.insert("edge", [(3, 4)])  # now it holds, through 1 -> 2 -> 3 -> 4
    db.insert("edge", [(1, 4)])  # a shorter proof
    db.insert("edge", [(5, 6)])  # the proof stays: nothing is delivered
    db.retract("edge", [(1, 4), (3, 4)])  # absent again
    assert [(c.epoch, c.holds) for c in got[1:]] == [
        (start + 1, True),
        (start + 2, True),
        (start + 4, False),
    ]
    proof = got[2].explanation
    assert isinstance(proof, Derivation) and proof.height == 1
    assert str(got[3].explanation) == str(got[0].explanation)
    assert sub.latest is got[-1] and sub.explained == 4


def test_an_epoch_that_touches_none_of_its_relations_explains_nothing() -> None:
    db = tc([(1, 2)])
    sub = db.subscribe_why("reach(1, 4)", lambda change: None)
    for i in range(20):
        db.insert("other", [(i,)])
    db.define(".decl unrelated(x: number)\nunrelated(x) :- other(x).")
    assert sub.explained == sub.spared == 0


def test_rows_its_lookups_would_not_find_explain_nothing_and_others_explain_again() -> None:
    """An epoch that writes a relation it reads, but no row any lookup of its why-not
    would find (docs/adr/0060), keeps the explanation without computing it; a row
    that a lookup finds, or new rules, explain it again."""
    db = tc([(1, 2)])
    got: list[WhyChange] = []
    sub = db.subscribe_why("reach(1, 4)", got.append)
    db.insert("edge", [(7, 8)])  # far from 1 and 4: no lookup finds it
    db.retract("edge", [(8, 9)])  # a retraction of an absent row: the same
    assert (sub.explained, sub.spared, len(got)) == (0, 2, 1)
    db.insert("edge", [(2, 7)])  # reach(1, 7) now: reach(1, _) finds more (same printed form)
    assert (sub.explained, sub.spared) == (1, 2)
    db.insert("edge", [(7, 4)])  # and now it holds
    assert sub.explained == 2 and [c.holds for c in got] == [False, True]
    db.insert("edge", [(5, 6)])  # a proof reads every edge: explained again
    assert (sub.explained, sub.spared) == (3, 2)
    db.define("reach(x, y) :- edge(y, x).")  # new rules: explained again
    assert (sub.explained, sub.spared) == (4, 2)


def test_an_epoch_whose_rows_change_nothing_it_read_reads_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A watched why-not reads the derived relation `reach(1, _)` through a dataflow
    it keeps (docs/adr/0071): an epoch that writes `edge`, which `reach` depends on,
    but changes no row a lookup of the why-not found, neither explains the fact nor
    reads any relation again (counted, not timed); an edge that extends `reach(1, _)`
    does both."""
    from datalog.db import states

    db = tc([(1, 2), (2, 3)])
    sub = db.subscribe_why("reach(1, 9)", lambda change: None)
    counts = {"answers": 0, "read": 0}
    answer, read = db.queries.answer, states.States._read

    def counted_answer(*args: object, **kwargs: object) -> object:
        counts["answers"] += 1
        return answer(*args, **kwargs)  # type: ignore[arg-type]

    def counted_read(self: states.States, relation: str) -> states.Stored:
        counts["read"] += 1
        return read(self, relation)

    monkeypatch.setattr(db.queries, "answer", counted_answer)
    monkeypatch.setattr(states.States, "_read", counted_read)
    for i in range(10):
        db.insert("edge", [(100 + i, 200 + i)])  # far from 1 and 9: reach(1, _) stays
    db.retract("edge", [(8, 9)])  # a retraction of an absent row
    assert (sub.explained, sub.spared, counts) == (0, 11, {"answers": 0, "read": 0})
    db.insert("edge", [(3, 4)])  # reach(1, 4) now: reach(1, _) changed
    assert (sub.explained, sub.spared) == (1, 11) and counts["read"] >= 2
    before = dict(counts)
    db.insert("edge", [(300, 301)])  # and the new explanation's relations are followed
    assert (sub.explained, sub.spared, counts) == (1, 12, before)
    dataflows = len(db.engine.dataflows)
    sub.close()  # the dataflow that kept `reach(1, _)` goes with it
    assert len(db.engine.dataflows) == dataflows - 1


def test_the_followed_relations_rest_through_an_epoch_that_cannot_reach_them() -> None:
    """The dataflow keeping `reach(1, _)` is neither run nor advanced by an epoch that
    writes no relation `reach(1, 9)` depends on (its seconds, on a clock that moves
    at every reading, stay the same), and is back in the engine after it."""
    db = tc([(1, 2), (2, 3)])
    readings = iter(range(1, 10**6))
    db.engine.clock = lambda: float(next(readings))  # (a dataflow keeps the one it got)
    sub = db.subscribe_why("reach(1, 9)", lambda change: None)
    (followed,) = db.engine.dataflows
    spent = followed.spent
    for i in range(3):
        db.insert("other", [(i,)])
    assert followed.spent == spent and db.engine.dataflows == [followed]
    db.insert("edge", [(3, 4)])  # reaches it: it runs, and the fact is explained again
    assert followed.spent > spent and sub.explained == 1


def test_a_big_commit_drops_the_followed_relations_and_reads_them_again() -> None:
    """A commit asking to change at least `Tuning.recompute_min_rows` rows of what the
    fact depends on, and `recompute_ratio` times what it holds, does not run through
    the followed relations' dataflows: they are dropped (the fact is explained again,
    reading them once) and the new explanation follows them anew. As many rows into
    a base 200 times larger run through them."""
    rows = TUNING.recompute_min_rows
    db = tc([(1, 2), (2, 3)])
    sub = db.subscribe_why("reach(1, 9)", lambda change: None)
    assert len(db.engine.dataflows) == 1
    db.insert("edge", [(1000 + i, 2000 + i) for i in range(rows)])
    assert (sub.explained, sub.spared) == (1, 0)
    assert len(db.engine.dataflows) == 1  # followed again
    db.insert("edge", [(5000, 5001)])
    assert (sub.explained, sub.spared) == (1, 1)
    big = tc([(1, 2), (2, 3), *((10**6 + i, 2 * 10**6 + i) for i in range(200 * rows))])
    watched = big.subscribe_why("reach(1, 9)", lambda change: None)
    (followed,) = big.engine.dataflows
    big.insert("edge", [(1000 + i, 2000 + i) for i in range(rows)])
    assert (watched.explained, watched.spared) == (0, 1) and big.engine.dataflows == [followed]


def test_new_rules_for_a_relation_it_reads_are_a_change() -> None:
    db = tc([(1, 2), (2, 3)])
    got: list[WhyChange] = []
    db.subscribe_why("reach(1, 3)", got.append)
    db.redefine("reach", "reach(x, y) :- edge(x, y).")
    assert [c.holds for c in got] == [True, False]
    assert got[1].epoch == db.epoch
    db.define("reach(x, z) :- edge(x, y), edge(y, z).")  # another rule, a new proof
    assert [c.holds for c in got] == [True, False, True]
    assert "edge(x, y), edge(y, z)" in str(got[2].explanation)


def test_subscribing_takes_no_epoch_and_closing_stops_the_deliveries() -> None:
    db = tc([(1, 2)])
    epoch = db.epoch
    got: list[WhyChange] = []
    with db.subscribe_why("reach(1, 3)", got.append) as sub:
        assert db.epoch == epoch and sub.active
        db.insert("edge", [(2, 3)])
    assert not sub.active and not db.queries.watches
    db.retract("edge", [(2, 3)])
    assert len(got) == 2


def test_paced_deliveries_hold_the_latest_explanation_and_drop_what_cancels_out() -> None:
    clock = ManualClock()
    db = tc([(1, 2)], clock)
    got: list[WhyChange] = []
    db.subscribe_why("reach(1, 3)", got.append, granularity={"epochs": 3})
    db.insert("edge", [(2, 3)])  # holds
    db.retract("edge", [(2, 3)])  # and no longer: back to what the subscriber holds
    db.insert("other", [(1,)])  # the third epoch: nothing new to deliver
    assert len(got) == 1  # released nothing: it cancelled out
    epoch = db.insert("edge", [(1, 3)])  # three epochs have passed: delivered at once
    db.retract("edge", [(1, 3)])  # held: the next release is three epochs after it
    db.insert("edge", [(1, 3)])
    assert [(c.epoch, c.holds) for c in got[1:]] == [(epoch, True)]
    timed: list[WhyChange] = []
    db.subscribe_why("reach(1, 5)", timed.append, granularity={"seconds": 2})
    db.insert("edge", [(3, 5)])
    assert len(timed) == 1
    clock.advance(2.5)  # the wake-up delivers without another commit
    assert [c.holds for c in timed] == [False, True]


def test_a_subscriber_that_raises_keeps_its_error_and_the_epoch_happens() -> None:
    db = tc([(1, 2)])
    calls: list[WhyChange] = []

    def fails(change: WhyChange) -> None:
        calls.append(change)
        if not change.snapshot:
            raise ValueError("a subscriber's bug")

    sub = db.subscribe_why("reach(1, 3)", fails)
    epoch = db.insert("edge", [(2, 3)])
    assert db.query("reach(1, 3)") == [()] and calls[-1].epoch == epoch
    assert sub.error_count == 1 and isinstance(sub.errors[0], ValueError)


def test_a_snapshot_that_raises_leaves_no_watch() -> None:
    db = tc([(1, 2)])

    def fails(change: WhyChange) -> None:
        raise ValueError("no")

    with pytest.raises(ValueError):
        db.subscribe_why("reach(1, 3)", fails)
    assert not db.queries.watches


def test_commits_from_inside_the_callback_are_refused() -> None:
    db = tc([(1, 2)])
    refused: list[Exception] = []

    def commits(change: WhyChange) -> None:
        if not change.snapshot:
            try:
                db.insert("edge", [(9, 9)])
            except TransactionError as error:
                refused.append(error)

    db.subscribe_why("reach(1, 3)", commits)
    db.insert("edge", [(2, 3)])
    assert len(refused) == 1 and db.query("edge(9, 9)") == []


def test_an_explanation_that_fails_is_kept_and_tried_again_at_the_next_epoch() -> None:
    db = tc([(1, 2)])
    got: list[WhyChange] = []
    sub = db.subscribe_why("reach(1, 3)", got.append, budget=0.0)  # every explanation fails
    db.insert("edge", [(2, 3)])
    assert len(got) == 1 and sub.error_count == 1  # the commit happened regardless
    assert db.query("reach(1, 3)") == [()]
    watch = db.queries.watches[0]
    watch.limit = lambda: db.budget(None)  # the budget allows it again
    db.insert("other", [(1,)])  # touches nothing it reads: still explained, being stale
    assert [c.holds for c in got] == [False, True] and sub.explained == 1


EDGES = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=12)


@settings(max_examples=examples(40), deadline=None)
@given(EDGES, st.lists(st.tuples(st.booleans(), st.integers(0, 7), st.integers(0, 7)),
                       min_size=1, max_size=8), st.integers(0, 7), st.integers(0, 7))  # fmt: skip
def test_a_spared_epoch_is_one_where_a_fresh_explanation_is_the_same(
    edges: list[tuple[int, int]], stream: list[tuple[bool, int, int]], x: int, y: int
) -> None:
    """Twin of the shortcut (docs/adr/0060): over a graph where most edges change
    `reach` without meeting a lookup of `edge`, each epoch delivers exactly when a
    fresh explanation prints differently, and that explanation."""
    db = tc(edges)
    text = f"reach({x}, {y})"
    got: list[WhyChange] = []
    sub = db.subscribe_why(text, got.append)
    shown = str(got[0].explanation)
    for inserting, a, b in stream:
        epoch = (db.insert if inserting else db.retract)("edge", [(a, b)])
        try:
            now = str(db.why_not(text))
        except FactHoldsError:
            now = str(db.why(text))
        told = [c for c in got if c.epoch == epoch and not c.snapshot]
        assert [str(c.explanation) for c in told] == ([now] if now != shown else [])
        shown = now
    event(f"spared: {min(sub.spared, 3)}")


def test_a_functor_bound_again_explains_again_at_the_next_epoch_that_touches_it() -> None:
    """`register_functor` rebinds a functor without an epoch: a why-not's lookups may
    find what they found, yet a fresh explanation differ, so it is not spared."""
    db = Database()
    db.define(""".functor f(x: number): number
.decl a(x: number)
.decl b(x: number)
.decl p(x: number)
p(y) :- a(x), y = @f(x), b(y).""")
    db.register_functor("f", lambda x: x + 1)
    db.insert("a", [(1,)])
    db.insert("b", [(2,)])
    got: list[WhyChange] = []
    sub = db.subscribe_why("p(3)", got.append)
    db.insert("b", [(9,)])  # no lookup finds it (@f(1) = 2 is not 3: `b` is not read)
    assert (sub.explained, sub.spared, len(got)) == (0, 1, 1)
    db.register_functor("f", lambda x: x + 2)  # now @f(1) = 3: a(1) gets as far as b(3)
    db.insert("b", [(9,)])  # the same lookups would find the same, yet the functor moved
    assert (sub.explained, sub.spared, len(got)) == (1, 1, 2)
    assert str(got[-1].explanation) == str(db.why_not("p(3)")) != str(got[0].explanation)


def test_a_last_write_wins_row_touches_every_lookup_of_its_entity() -> None:
    """Writing `owner(1, "bob")` retracts `owner(1, "ann")` unasked: the lookup of
    `owner(_, "ann")` finds less, although no row asked agrees with it (and the fact
    stays absent: only the explanation's first failing premise moves)."""
    db = Database()
    db.define(""".decl owner(doc: number, who: symbol) last_write_wins
.decl admin(who: symbol)
.decl active(who: symbol)
.decl can(who: symbol)
can(w) :- admin(w), !owner(_, w), active(w).""")
    db.insert("owner", [(1, "ann")])
    db.insert("admin", [("ann",)])
    got: list[WhyChange] = []
    sub = db.subscribe_why('can("ann")', got.append)
    db.insert("owner", [(1, "bob")])  # ann owns nothing now: `active` is what fails
    assert sub.spared == 0 and [c.holds for c in got] == [False, False]
    missing = 'active("ann")  missing'
    assert missing in str(got[1].explanation) and missing not in str(got[0].explanation)


def test_a_transaction_with_new_rules_and_rows_explains_again() -> None:
    """Rows written into a relation whose rules change in the same transaction: the
    new rules are a change, though the rows meet no lookup and derive nothing new."""
    db = tc([(1, 2)])
    got: list[WhyChange] = []
    sub = db.subscribe_why("reach(1, 4)", got.append)
    with db.transaction() as tx:
        tx.insert("reach", [(7, 9)])
        tx.redefine("reach", "reach(x, y) :- edge(x, y), x != 99.\n"
                             "reach(x, z) :- reach(x, y), edge(y, z).")  # fmt: skip
    assert sub.spared == 0 and [c.holds for c in got] == [False, False]
    assert "x != 99" in str(got[1].explanation)


def test_an_interrupt_while_it_checks_an_epoch_leaves_it_to_explain_again() -> None:
    """A Ctrl-C after the epoch committed, while the watch checks whether the epoch
    spared it: the write raises with its epoch done, and the watch explains again at
    the next epoch, whatever that epoch writes (ADR 0071 amendment)."""
    db = tc([(1, 2)])
    got: list[WhyChange] = []
    db.subscribe_why("reach(1, 3)", got.append)
    watch = db.queries.watches[0]
    check = watch.unchanged

    def interrupted(*args: object) -> bool | None:
        watch.unchanged = check
        raise KeyboardInterrupt

    watch.unchanged = interrupted
    with pytest.raises(KeyboardInterrupt):
        db.insert("edge", [(2, 3)])
    assert db.query("reach(1, 3)") == [()]  # the epoch happened
    db.insert("other", [(1,)])  # touches nothing it reads
    assert [c.holds for c in got] == [False, True]
