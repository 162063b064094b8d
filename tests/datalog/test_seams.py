"""Failures inside failures, where two capabilities meet (issue 23): an interrupt or
a `MemoryError` in the middle of a delivery, a rebuild, a rule change with shared
multi-tenant dataflows, a subscription or an unsubscription. Afterwards every
subscriber's accumulated answer and every query equals the reference evaluator's
answer over the base facts, nothing is left orphaned (no dataflow without a live
query, no live query without a subscriber), and the next commits stay exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from datalog import Change, Database
from datalog.eval import reference
from datalog.lang.checks import check_query
from datalog.lang.parser import parse_query
from tests.datalog.answers import Accumulated

PROGRAM = """
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
.decl node(x: number)
.decl lonely(x: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
node(x) :- edge(x, _).
node(y) :- edge(_, y).
lonely(x) :- node(x), !reach(x, _).
"""
# with and without constants: shared multi-tenant dataflows and dataflows of their own
QUERIES = ("reach(1, y)", "reach(2, y)", "reach(x, y)", "lonely(x)")


def expected(db: Database, text: str) -> set[tuple[Any, ...]]:
    """The reference evaluator's answer over the database's base facts."""
    facts = {"edge": set(db.query("edge(x, y)"))}
    relations = reference.evaluate(db.checked, facts)
    return reference.answer(check_query(parse_query(text), db.checked.schema), relations)


def check(db: Database, subs: dict[str, Accumulated]) -> None:
    """Every answer exact, and nothing orphaned."""
    for text, sub in subs.items():
        assert sub.rows() == expected(db, text), text
        assert set(db.query(text)) == expected(db, text), text
    lives = db.live.values()
    assert all(live.subscribers for live in lives)
    running = {id(df) for df in db.engine.dataflows}
    assert running == {id(live.plan.dataflow) for live in lives if live.plan is not None}


def setup() -> tuple[Database, dict[str, Accumulated]]:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3), (4, 4)])
    subs = {text: Accumulated() for text in QUERIES}
    for text, sub in subs.items():
        db.subscribe(text, sub)
    db.insert("edge", [(3, 5)])  # the parameters join their shared dataflow
    return db, subs


class Fault(BaseException):
    """Stands for KeyboardInterrupt or MemoryError: not an Exception."""


@contextmanager
def failing_once(
    monkeypatch: pytest.MonkeyPatch,
    owner: object,
    name: str,
    when: Callable[[], bool] = lambda: True,
) -> Iterator[list[int]]:
    """`owner.name` raises `Fault` on its first call (while `when()`), then works."""
    real, fired = getattr(owner, name), []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not fired and when():
            fired.append(1)
            raise Fault
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(owner, name, call)
        yield fired


def test_an_interrupt_inside_a_live_querys_trace_insert_is_repaired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its subscribers were told; the state it holds is rebuilt (it used to raise
    `AttributeError` on every later query)."""
    import datalog.db.live

    db, subs = setup()
    epoch = db.epoch
    with failing_once(monkeypatch, datalog.db.live, "_insert") as fired, pytest.raises(Fault):
        db.insert("edge", [(5, 6)])
    assert fired and db.epoch == epoch + 1  # the commit happened; the fault came after
    check(db, subs)
    db.retract("edge", [(2, 3)])
    check(db, subs)


def test_a_memory_error_before_a_delivery_reaches_the_subscribers_at_that_epoch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows could not be made for a change: the repair hands it over (at the same
    epoch, once), so no subscription silently misses it."""
    import datalog.db.live

    db, subs = setup()
    seen: list[Change] = []
    db.subscribe("reach(x, y)", seen.append)
    with failing_once(monkeypatch, datalog.db.live, "to_rows"), pytest.raises(Fault):
        db.insert("edge", [(5, 6)])
    check(db, subs)
    assert [c.epoch for c in seen[1:]] == [db.epoch]  # one change, at the commit's epoch
    db.insert("edge", [(6, 7)])
    check(db, subs)


def test_a_failing_rebuild_during_redefine_with_tenants_raises_its_own_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shared dataflow's rebuild fails: that error is raised (not a `KeyError`
    from the rollback), the old rules stay, and every query stays exact."""
    from datalog.db.tenants import Tenants

    db, subs = setup()
    epoch, rules = db.epoch, db.program.rules
    with failing_once(monkeypatch, Tenants, "_start") as fired, pytest.raises(Fault):
        db.redefine("reach", "reach(x, y) :- edge(x, y).")
    assert fired and db.epoch == epoch and db.program.rules == rules
    check(db, subs)
    db.insert("edge", [(5, 1)])
    check(db, subs)


def test_a_tenant_subscriber_interrupting_a_redefine_leaves_every_member_on_the_new_rules() -> None:
    db, subs = setup()
    interrupted: list[int] = []

    def interrupt(change: Change) -> None:
        if not change.snapshot and not interrupted:
            interrupted.append(change.epoch)
            raise KeyboardInterrupt

    db.subscribe("reach(1, y)", interrupt)
    with pytest.raises(KeyboardInterrupt):
        db.redefine("reach", "reach(x, y) :- edge(x, y).")
    assert interrupted == [db.epoch]  # the redefinition happened (ADR 0032)
    check(db, subs)
    assert subs["reach(1, y)"].rows() == {(2,)} and subs["reach(2, y)"].rows() == {(3,)}
    db.insert("edge", [(2, 7)])
    check(db, subs)


@pytest.mark.parametrize(
    ("owner", "name"),
    [
        ("engine", "start"),
        ("queries", "share_views"),
        ("tenants", "seat"),
        ("live", "reset"),
    ],
)
@pytest.mark.parametrize("query", ["reach(3, y)", "node(x), x > 2", "lonely(x)"])
def test_an_interrupt_during_subscribe_leaves_no_orphan(
    monkeypatch: pytest.MonkeyPatch, owner: str, name: str, query: str
) -> None:
    from datalog.db.live import LiveQuery

    db, subs = setup()
    owners = {"engine": db.engine, "queries": db.queries, "tenants": db.queries.tenants,
              "live": LiveQuery}  # fmt: skip
    with failing_once(monkeypatch, owners[owner], name):
        try:
            subs[query] = Accumulated()
            db.subscribe(query, subs[query])
        except Fault:
            del subs[query]
    check(db, subs)
    db.insert("edge", [(5, 3)])
    check(db, subs)


def test_an_interrupt_in_the_snapshot_callback_leaves_no_orphan() -> None:
    db, subs = setup()

    def interrupt(change: Change) -> None:
        raise KeyboardInterrupt

    for query in ("reach(7, y)", "node(x)"):
        with pytest.raises(KeyboardInterrupt):
            db.subscribe(query, interrupt)
        assert query not in db.live
    check(db, subs)


def test_an_interrupt_during_unsubscribe_leaves_a_removable_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db, subs = setup()
    extra = {text: db.subscribe(text, lambda change: None) for text in ("reach(4, y)", "node(x)")}
    for sub in extra.values():
        with failing_once(monkeypatch, db.queries.tenants, "leave"):
            try:
                sub.close()
            except Fault:
                sub.close()  # again: it can still be removed
    check(db, subs)
    db.insert("edge", [(5, 3)])
    check(db, subs)


def test_a_memory_error_delivering_a_rule_change_is_repaired_at_its_epoch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shared dataflow's member gets a redefinition's difference outside any output
    (no base fact changed): rows could not be made for it, and the repair hands it
    over at the redefinition's epoch, not one commit later."""
    import datalog.db.live

    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    subs = {"reach(1, y)": Accumulated()}
    seen: list[Change] = []
    db.subscribe("reach(1, y)", subs["reach(1, y)"])
    db.subscribe("reach(1, y)", seen.append)
    db.insert("edge", [(7, 7)])  # the parameter joins
    with failing_once(monkeypatch, datalog.db.live, "to_rows"), pytest.raises(Fault):
        db.redefine("reach", "reach(x, y) :- edge(x, y).")
    check(db, subs)
    assert [c.epoch for c in seen[1:]] == [db.epoch]


@pytest.mark.parametrize("explicit", [True, False])
def test_a_failure_after_the_commit_point_keeps_the_symbols_of_the_epoch(
    monkeypatch: pytest.MonkeyPatch, explicit: bool
) -> None:
    """`tx.commit()` inside the block, then a fault after the commit point (sealing the
    inputs): the block's exit discarded the transaction, forgetting the symbols of an
    epoch that happened, and every later read raised `KeyError: unknown symbol id`."""
    from differential.inputs import Input

    db = Database()
    db.define(".decl s(x: symbol)")
    epoch = db.epoch
    seal = failing_once(monkeypatch, Input, "seal")
    with seal as fired, pytest.raises(Fault), db.transaction() as tx:
        tx.insert("s", [("new",)])
        if explicit:
            tx.commit()
    assert fired and db.epoch == epoch + 1  # the fault came after the commit point
    assert db.query("s(x)") == [("new",)]
    db.insert("s", [("newer",)])
    assert db.query("s(x)") == [("new",), ("newer",)]


def test_a_callback_reading_its_own_query_sees_the_epoch_it_is_told_about() -> None:
    """The answer was taken into the live query's state only after its subscribers
    were told, so a callback's `db.query` of the same query read the epoch before
    (found by the model test: `deg(x0, x1)` read `[]` at the epoch that made it
    `[(1, 0)]`)."""
    db = Database()
    db.define(
        ".decl v(x: number)\n.decl e(x: number, y: number)\n"
        ".decl deg(x: number, n: number)\ndeg(x, n) :- v(x), n = count : { e(x, _) }."
    )
    seen: list[tuple[int, list[tuple[Any, ...]]]] = []
    db.subscribe("deg(x, n)", lambda c: seen.append((c.epoch, db.query("deg(x, n)"))))
    db.insert("v", [(1,)])
    db.insert("e", [(1, 2)])
    db.retract("v", [(1,)])
    e = db.epoch
    assert seen == [(e - 3, []), (e - 2, [(1, 0)]), (e - 1, [(1, 1)]), (e, [])]


def test_a_callback_reading_another_live_query_sees_the_epoch_it_is_told_about() -> None:
    """Outputs were told dataflow by dataflow as the engine finished the epoch, so a
    callback of the first reading the second live query saw its previous epoch."""
    db = Database()
    db.define(
        ".decl v(x: number)\n.decl w(x: number)\nw(x) :- v(x).\n.decl u(x: number)\nu(x) :- v(x)."
    )
    seen: list[tuple[str, int, list[tuple[Any, ...]]]] = []
    for mine, other in (("w", "u"), ("u", "w")):
        db.subscribe(
            f"{mine}(x)",
            lambda c, m=mine, o=other: c.snapshot or seen.append((m, c.epoch, db.query(f"{o}(x)"))),
        )
    db.insert("v", [(1,)])
    db.insert("v", [(2,)])
    e = db.epoch
    assert sorted(seen) == [
        ("u", e - 1, [(1,)]),
        ("u", e, [(1,), (2,)]),
        ("w", e - 1, [(1,)]),
        ("w", e, [(1,), (2,)]),
    ]
