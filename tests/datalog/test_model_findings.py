"""Defects the model test (`test_model.py`, ADR 0037) found, minimized, each now
fixed: the test states the documented behaviour it once broke.

A new finding comes here as a strict xfail (`xfail(strict=True)`: the suite stays
green while it is open and turns red the moment it is fixed), and the model steps
around it until then; once fixed, the mark and the step-around go.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from datalog import Change, Database
from datalog.lang.errors import FunctorError
from differential.tuning import TUNING, tuned
from tests.datalog.model.faults import Faults, engine_hooks
from tests.datalog.model.measures import eager_compaction, log_bytes, stored

TC = """
.decl e(x: number, y: number)
.decl tc(x: number, y: number)
tc(x, y) :- e(x, y).
tc(x, z) :- tc(x, y), e(y, z).
"""


def test_subscribing_to_a_query_with_a_constant_neither_advances_the_epoch_nor_logs(
    tmp_path: Path,
) -> None:
    """Found by the model test, fixed: reads never write (DESIGN §7)."""
    db = Database(tmp_path / "db")
    db.define(TC)
    db.insert("e", [(1, 2), (2, 3)])
    epoch, log = db.epoch, log_bytes(tmp_path / "db")
    got: list[Change] = []
    db.subscribe("tc(1, y)", got.append)
    assert (db.epoch, log_bytes(tmp_path / "db")) == (epoch, log)
    assert got[0].epoch == epoch and sorted(got[0].rows) == [(2,), (3,)]


def _toggled(db: Database, times: int) -> int:
    for i in range(times):
        (db.retract if i % 2 == 0 else db.insert)("e", [(4, 5)])
    return stored(db.stats())


def test_a_live_query_with_a_constant_keeps_bounded_state_under_a_toggled_fact() -> None:
    """Found by the model test, fixed: toggling one edge 400 times (ending as it
    began) must leave about as many stored updates as toggling it 100 times; today
    they grow by about 20 per toggle."""
    db = Database(history=4)
    db.define(TC)
    db.insert("e", [(i, i + 1) for i in range(10)])
    db.subscribe("tc(3, y)", lambda change: None)
    first = _toggled(db, 100)
    last = _toggled(db, 300)
    assert last <= 1.5 * first + 50, (first, last)


def test_a_join_side_nobody_reads_keeps_bounded_state_under_a_toggled_fact() -> None:
    """Found by the model test, fixed: in `q(x) :- s(x), !v(x)` with `s` fixed,
    the arrangement of `s`'s side is read only when `s` changes, so it never merges
    and keeps one update per toggle of `v` (9,203 after 8,192 toggles; the plain join
    `s(x), v(x)` levels off near 800). Fixed on the `compaction` branch."""
    db = Database(history=4)
    db.define(".decl v(x: number)\n.decl s(x: number)\n.decl q(x: number)\nq(x) :- s(x), !v(x).")
    db.insert("s", [(1,), (2,)])
    db.subscribe("q(x)", lambda change: None)
    sizes = []
    for i in range(1, 1025):
        (db.insert if i % 2 else db.retract)("v", [(1,)])
        if i in (256, 1024):
            sizes.append(stored(db.stats()))
    first, last = sizes
    assert last <= 1.5 * first + 50, (first, last)


def test_query_arrow_and_query_columns_of_a_fact_that_holds_say_so() -> None:
    """Found by the model test, fixed: `query("tc(1, 2)")` is `[()]`
    (the fact holds) or `[]`; `query_arrow` gives a table without columns and without
    rows either way, and `query_columns` an empty dict."""
    db = Database()
    db.define(TC)
    db.insert("e", [(1, 2)])
    assert db.query("tc(1, 2)") == [()] and db.query("tc(2, 1)") == []
    assert db.query_arrow("tc(1, 2)").num_rows == 1
    assert db.query_arrow("tc(2, 1)").num_rows == 0


def test_a_definition_failing_after_its_epoch_still_delivers_what_paced_subscribers_are_due() -> (
    None
):
    """Found by the model test, fixed: a subscriber's KeyboardInterrupt
    means the commit happened (ADR 0032), and a transaction that raises after its epoch
    still hands paced subscribers what is due; a definition does not."""
    db = Database()
    db.define(".decl v(x: number)\n.decl w(x: number)\nw(x) :- v(x).")
    paced: list[Change] = []
    db.subscribe("w(x)", paced.append, granularity={"epochs": 1})

    def interrupted(change: Change) -> None:
        if not change.snapshot:
            raise KeyboardInterrupt

    db.subscribe("v(x)", interrupted)
    with pytest.raises(KeyboardInterrupt):
        db.define("v(1).")
    assert [(c.epoch, c.rows) for c in paced[1:]] == [(db.epoch, [(1,)])]


def test_a_redefinition_failing_while_two_tenant_dataflows_rebuild_raises_its_own_error() -> None:
    """Found by the model test, fixed (issue 23, "failures
    inside failures"): with members of two multi-tenant dataflows over `tc`, a
    redefinition of `tc` whose rebuild is interrupted (here by a functor's
    KeyboardInterrupt) must raise that KeyboardInterrupt and change nothing; the
    rollback raises `KeyError` from `Tenants.rebuild` instead, hiding it."""
    armed = [False]

    def boom(x: int) -> int:
        if armed[0]:
            raise KeyboardInterrupt
        return 0

    db = Database(functors={"boom": boom})
    db.define(".functor boom(x: number): number\n" + TC)
    db.insert("e", [(1, 2), (2, 3)])
    db.subscribe("tc(1, y)", lambda change: None)
    db.subscribe("tc(x, 3)", lambda change: None)
    epoch, armed[0] = db.epoch, True
    with pytest.raises(KeyboardInterrupt):
        db.redefine("tc", "tc(x, y) :- e(x, y), @boom(x) = 0.")
    armed[0] = False
    assert db.epoch == epoch
    assert sorted(db.query("tc(1, y)")) == [(2,), (3,)]


def test_a_one_shot_query_interrupted_while_its_dataflow_is_dropped_leaves_none() -> None:
    """Found by the model test, fixed: a Ctrl-C that lands while
    `query` drops its one-shot dataflow (after the answer) leaves that dataflow in the
    engine, computing at every commit, with nobody to drop it."""
    db = Database()
    db.define(TC)
    db.insert("e", [(1, 2), (2, 3)])
    faults = Faults()
    with engine_hooks(faults), pytest.raises(KeyboardInterrupt):
        faults.arm("engine:drop", KeyboardInterrupt, 1)
        db.query("tc(x, y)")
    assert db.stats()["dataflows"] == []


@pytest.mark.parametrize("query", ["tc(x, y)", "tc(1, y)"])
def test_an_unsubscription_interrupted_while_its_dataflow_is_dropped_leaves_none(
    query: str,
) -> None:
    """Found by the model test, fixed (issue 23): the handle is
    closed, yet its live query (0 subscribers) or its multi-tenant dataflow stays, is
    updated at every commit, and no call removes it."""
    db = Database()
    db.define(TC)
    db.insert("e", [(1, 2), (2, 3)])
    sub = db.subscribe(query, lambda change: None)
    faults = Faults()
    with engine_hooks(faults), pytest.raises(KeyboardInterrupt):
        faults.arm("engine:drop", KeyboardInterrupt, 1)
        sub.close()
    sub.close()
    stats = db.stats()
    assert (stats["dataflows"], stats["queries"]) == ([], {})


@pytest.mark.parametrize(
    ("query", "point"),
    [("tc(x, y)", "insert"), ("tc(x, y)", "build"), ("tc(1, y)", "build"), ("tc(1, y)", "insert")],
)
def test_a_subscription_interrupted_inside_the_engine_leaves_no_dataflow_nor_subscriber(
    query: str, point: str
) -> None:
    """Found by the model test, fixed (issue 23): a Ctrl-C
    while `subscribe` stores the new live query's first answer (a trace `insert`:
    after the dataflow started, before it is registered) or reads the snapshot it
    hands the callback (a batch `build`: after the subscriber was added) raises, and
    the caller has no handle; the dataflow stays in the engine, computing at every
    commit, with a subscriber nobody can remove. Tried at every such point in turn."""
    orphans = []
    for nth in range(1, 100):
        db = Database()
        db.define(TC)
        db.insert("e", [(1, 2), (2, 3)])
        faults = Faults()
        with engine_hooks(faults):
            faults.arm(f"engine:{point}", KeyboardInterrupt, nth)
            try:
                db.subscribe(query, lambda change: None)
            except KeyboardInterrupt:
                stats = db.stats()
                if stats["dataflows"] or stats["queries"]:
                    orphans.append(nth)
        if not faults.fired:
            break
    assert nth > 1 and not orphans, f"orphans after an interrupt at {point}s {orphans}"


def test_a_tenant_subscriber_interrupted_by_a_redefinition_leaves_the_others_on_the_new_rules() -> (
    None
):
    """Found by the model test, fixed (issue 23): two
    members of one multi-tenant dataflow (`tc(1, y)`, `tc(2, y)`); `tc` is redefined
    and the first member's callback raises KeyboardInterrupt at the new epoch, which
    means the redefinition happened (ADR 0032). The other member must answer with the
    new rules and have received the change; it keeps the old answer, and even after
    the next commit answers neither by the old rules nor by the new ones."""
    db = Database()
    db.define(TC)
    db.insert("e", [(1, 2), (2, 3), (2, 2)])

    def interrupted(change: Change) -> None:
        if not change.snapshot:
            raise KeyboardInterrupt

    other: list[Change] = []
    db.subscribe("tc(1, y)", interrupted)
    db.subscribe("tc(2, y)", other.append)
    with pytest.raises(KeyboardInterrupt):
        db.redefine("tc", "tc(x, y) :- e(x, y), x != y.")
    assert sorted(db.query("tc(2, y)")) == [(3,)]
    assert [(c.epoch, c.rows, c.diffs) for c in other[1:]] == [(db.epoch, [(2,)], [-1])]
    db.insert("e", [(3, 4)])
    assert sorted(db.query("tc(2, y)")) == [(3,)]


def test_an_explicit_commit_inside_a_transaction_block_commits_once() -> None:
    """Found by the model test, fixed: `Transaction.commit` is documented as
    "also done on leaving the `with` block"; called inside the block, the exit commits
    the same changes again: a second epoch (and log record), and a multiset relation
    holds its rows twice (one retraction leaves a copy)."""
    db = Database()
    db.define(".decl m(x: number) multiset")
    epoch = db.epoch
    with db.transaction() as tx:
        tx.insert("m", [(1,)])
        assert tx.commit() == epoch + 1
    assert db.epoch == epoch + 1
    db.retract("m", [(1,)])
    assert db.query("m(x)") == []


@pytest.mark.parametrize("nth", [1, 2])
@pytest.mark.parametrize("error", [KeyboardInterrupt, MemoryError])
def test_a_recomputed_commit_interrupted_while_the_old_dataflow_is_dropped_leaves_no_orphan(
    nth: int, error: type[BaseException]
) -> None:
    """Found by the model test (randomized soak), fixed: an adaptive commit retires a
    live query's dataflow before its epoch and rebuilds it after (ADR 0053); a
    MemoryError landing while the rebuild dropped the old dataflow left the new one
    computing for nobody (the live query kept pointing at the old one, and the repair
    built a third). Whichever drop fails, one dataflow stays, and the subscriber
    holds the answer."""
    db = Database()
    db.define(TC)
    db.insert("e", [(1, 2), (2, 3)])
    got: dict[tuple[int, ...], int] = {}

    def told(change: Change) -> None:
        for row, diff in zip(change.rows, change.diffs, strict=True):
            got[row] = got.get(row, 0) + diff

    db.subscribe("tc(x, y)", told)
    faults = Faults()
    with engine_hooks(faults), tuned(TUNING.but(recompute="always", recompute_min_rows=1)):
        faults.arm("engine:drop", error, nth)
        with pytest.raises(error):
            db.insert("e", [(3, 4)])
    assert faults.fired
    db.insert("e", [(4, 5)])
    dataflows = db.stats()["dataflows"]
    assert isinstance(dataflows, list) and len(dataflows) == 1
    assert sorted(row for row, n in got.items() if n) == sorted(db.query("tc(x, y)"))
    assert all(n in (0, 1) for n in got.values())


@pytest.mark.parametrize("recompute", [False, True])
def test_a_functor_failing_on_a_big_commit_refuses_it_whether_or_not_it_is_recomputed(
    recompute: bool,
) -> None:
    """Found by the model test (randomized soak), fixed: a functor runs while the epoch
    is computed, so its failure refuses the transaction (nothing changes). An
    adaptive commit (ADR 0053) rebuilt the dataflow after the commit point, so the
    same failure came after the epoch had happened: committed, and the live query
    broken at every later commit. A dataflow that calls a functor runs the change."""

    def halve(x: int) -> int:
        if x == 13:
            raise ValueError("unlucky")
        return x // 2

    db = Database(functors={"halve": halve})
    db.define(
        ".functor halve(x: number): number\n.decl e(x: number, y: number)\n"
        ".decl h(x: number, y: number)\nh(x, @halve(y)) :- e(x, y)."
    )
    db.insert("e", [(1, 2)])
    got: list[Change] = []
    db.subscribe("h(x, y)", got.append)
    epoch = db.epoch
    tuning = TUNING.but(recompute="always" if recompute else "never", recompute_min_rows=1)
    with tuned(tuning), pytest.raises(FunctorError):
        db.insert("e", [(i, i) for i in range(10, 20)])
    assert db.epoch == epoch
    assert sorted(db.query("h(x, y)")) == [(1, 1)]
    with tuned(tuning):
        db.insert("e", [(3, 4), (5, 6)])
    assert sorted(db.query("h(x, y)")) == [(1, 1), (3, 2), (5, 3)]
    assert [sorted(c.rows) for c in got[1:]] == [[(3, 2), (5, 3)]]


def test_an_interrupt_while_a_read_snapshots_a_shared_arrangement_leaves_no_claim_on_it() -> None:
    """Found by a randomized soak of the model test (a base relation's arrangements
    grew 103 -> 217 updates over toggles of one fact), fixed: an import took its
    claim on the shared arrangement before merging its snapshot, so an interrupt in
    that merge left a claim no dataflow held, and the arrangement never compacted
    past it again."""
    db = Database(history=1)
    db.define(".decl e(x: number, y: number)")
    db.subscribe("e(x, y)", lambda change: None)  # keeps e's arrangement alive
    for i in range(5):  # several batches: a new reader's snapshot merges them
        db.insert("e", [(i, i + 1)])
    faults = Faults()
    faults.arm("engine:build", KeyboardInterrupt, 1)
    with engine_hooks(faults), pytest.raises(KeyboardInterrupt):
        db.query("e(x, y), x < 3")
    assert faults.fired
    (arrangement,) = db.engine.inputs["e"].arrangements.values()
    assert arrangement.readers == 1  # the live query's own claim, and no other
    with eager_compaction():
        toggled(db, 20)
        first = stored(db.stats())
        toggled(db, 60)
        last = stored(db.stats())
    assert last <= first + 10, f"stored updates grew from {first} to {last}"


def toggled(db: Database, times: int) -> None:
    for _ in range(times):
        present = (9, 9) in db.query("e(x, y)")
        (db.retract if present else db.insert)("e", [(9, 9)])


def test_an_interrupt_while_a_query_is_lowered_leaves_no_claim_on_what_it_imported() -> None:
    """Found by a randomized soak of the model test, fixed: lowering imports shared
    arrangements as it builds; an interrupt after an import and before the plan was
    returned left a dataflow nobody held, whose claims kept `v`'s arrangement from
    compacting for good. The half-built dataflow is now retired."""
    db = Database(history=1)
    db.define(
        ".decl e(x: number, y: number)\n.decl v(x: number)\n.decl deg(x: number, n: number)\n"
        "deg(x, n) :- v(x), n = count : { e(x, _) }."
    )
    db.insert("e", [(1, 2), (1, 3)])
    db.insert("v", [(1,)])
    fired = []
    for nth in range(1, 12):  # each build point of the query, in turn
        faults = Faults()
        faults.arm("engine:build", KeyboardInterrupt, nth)
        try:
            with engine_hooks(faults):
                db.query("deg(x, n)")
        except KeyboardInterrupt:
            fired.append(nth)
        claimed = [a for s in db.engine.inputs.values() for a in s.arrangements.values()]
        assert [a.name for a in claimed if a.readers] == [], f"after a fault at build {nth}"
    assert fired  # the faults landed inside the query
    assert db.query("deg(x, n)") == [(1, 2)]


def test_a_why_not_watch_closed_under_an_interrupt_leaves_none_of_its_dataflows() -> None:
    """Found by the model test's soak, fixed: a watched why-not keeps one dataflow
    per derived relation it read (ADR 0071); a Ctrl-C that lands while the first of
    them is dropped left the others running, with nobody to drop them."""
    db = Database()
    db.define(
        TC
        + """
        .decl other(x: number, y: number)
        .decl both(x: number, y: number)
        other(x, y) :- e(y, x).
        both(x, y) :- tc(x, y), other(x, y).
        """
    )
    db.insert("e", [(1, 2), (2, 3)])
    sub = db.subscribe_why("both(1, 3)", lambda change: None)
    followed = [df["name"] for df in db.stats()["dataflows"]]
    assert len(followed) == 3, followed  # both, tc and other
    faults = Faults()
    with engine_hooks(faults), pytest.raises(KeyboardInterrupt):
        faults.arm("engine:drop", KeyboardInterrupt, 1)
        sub.close()
    assert db.stats()["dataflows"] == []
