"""Invariants of the Database API that need no oracle (pydbsp's, DESIGN §10).

Batching does not matter (one big transaction = one change per transaction);
inserting then retracting is a no-op; a late subscriber sees what an early,
maintained one accumulated; equal queries share one dataflow, torn down with
its last subscriber; rejected transactions and definitions change nothing.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog import Change, Database
from datalog.lang.errors import DatalogError, TransactionError, UnknownNameError
from tests.budget import examples
from tests.datalog.programs import (
    BASE,
    Generated,
    Row,
    Transaction,
    format_stream,
    full_query,
    programs,
    rows,
    streams,
)

Answers = dict[str, set[tuple[Any, ...]]]
SLOW_DRAWS = [HealthCheck.too_slow, HealthCheck.data_too_large]


class Accumulated:
    """A subscription's changes and the answer they add up to."""

    def __init__(self) -> None:
        self.changes: list[Change] = []

    def __call__(self, change: Change) -> None:
        self.changes.append(change)

    def net(self, since: int = 0) -> Counter[tuple[Any, ...]]:
        """The consolidated diffs of the changes from index `since` on."""
        total: Counter[tuple[Any, ...]] = Counter()
        for change in self.changes[since:]:
            for row, diff in zip(change.rows, change.diffs, strict=True):
                total[row] += diff
        return Counter({row: n for row, n in total.items() if n})

    def rows(self) -> set[tuple[Any, ...]]:
        net = self.net()
        assert all(n == 1 for n in net.values()), net
        return set(net)


def define(generated: Generated) -> Database:
    db = Database()
    db.define(generated.text)
    return db


def queries(generated: Generated) -> list[str]:
    return [full_query(r, generated.relations[r]) for r in generated.derived]


def answers(db: Database, texts: list[str]) -> Answers:
    return {q: set(db.query(q)) for q in texts}


def commit(db: Database, tx: Transaction) -> None:
    with db.transaction() as t:
        for op, relation, row in tx:
            (t.insert if op == "insert" else t.retract)(relation, [row])


def show(generated: Generated, stream: list[Transaction]) -> None:
    note(f"program:\n{generated.text}")
    note(f"stream:\n{format_stream(stream)}")


# --- batching, insert-then-retract, late subscription ------------------------------


@settings(max_examples=examples(30), suppress_health_check=SLOW_DRAWS)
@given(programs(max_groups=2), streams())
def test_one_big_transaction_equals_one_change_per_transaction(
    generated: Generated, stream: list[Transaction]
) -> None:
    show(generated, stream)
    texts = queries(generated)
    big, small = define(generated), define(generated)
    subs = {q: Accumulated() for q in texts}
    for q, acc in subs.items():
        small.subscribe(q, acc)
    commit(big, [change for tx in stream for change in tx])
    for tx in stream:
        for change in tx:
            commit(small, [change])
    expected = answers(big, texts)
    assert answers(small, texts) == expected
    assert {q: acc.rows() for q, acc in subs.items()} == expected


@settings(max_examples=examples(30), suppress_health_check=SLOW_DRAWS)
@given(programs(max_groups=2), streams(), st.data())
def test_inserting_then_retracting_is_a_no_op(
    generated: Generated, stream: list[Transaction], data: st.DataObject
) -> None:
    show(generated, stream)
    texts = queries(generated)
    db = define(generated)
    subs = {q: Accumulated() for q in texts}
    for q, acc in subs.items():
        db.subscribe(q, acc)
    for tx in stream:
        commit(db, tx)
    before = answers(db, texts)
    mark = {q: len(acc.changes) for q, acc in subs.items()}
    relation = data.draw(st.sampled_from(sorted(BASE)), label="relation")
    fresh: list[Row] = data.draw(st.lists(rows(BASE[relation]), min_size=1, max_size=4))
    current = set(db.query(full_query(relation, BASE[relation])))
    fresh = [row for row in dict.fromkeys(fresh) if row not in current]
    note(f"insert then retract {relation}: {fresh}")
    db.insert(relation, fresh)
    db.retract(relation, fresh)
    assert answers(db, texts) == before
    for q, acc in subs.items():
        assert acc.net(mark[q]) == Counter(), f"`{q}` has a net change"
    # both in one transaction: nothing happens at all
    mark = {q: len(acc.changes) for q, acc in subs.items()}
    with db.transaction() as both:
        both.insert(relation, fresh)
        both.retract(relation, fresh)
    assert answers(db, texts) == before
    for q, acc in subs.items():
        assert all(not c.rows for c in acc.changes[mark[q] :]), f"`{q}` saw a change"


@settings(max_examples=examples(30), suppress_health_check=SLOW_DRAWS)
@given(programs(max_groups=2), streams(), st.integers(0, 6))
def test_a_late_subscription_equals_an_early_maintained_one(
    generated: Generated, stream: list[Transaction], late_at: int
) -> None:
    show(generated, stream)
    texts = queries(generated)
    db = define(generated)
    early = {q: Accumulated() for q in texts}
    late = {q: Accumulated() for q in texts}
    for q, acc in early.items():
        db.subscribe(q, acc)
    for n, tx in enumerate(stream):
        if n == late_at:
            for q, acc in late.items():
                db.subscribe(q, acc)
        commit(db, tx)
    for q in texts:
        if late[q].changes:
            assert late[q].changes[0].snapshot
            assert late[q].rows() == early[q].rows(), q
    fresh = define(generated)
    for tx in stream:
        commit(fresh, tx)
    for q in texts:
        acc = Accumulated()
        fresh.subscribe(q.replace("x", "y"), acc)  # not shared: built after the stream
        assert acc.changes[0].snapshot and len(acc.changes) == 1
        assert acc.rows() == early[q].rows(), q


# --- sharing and teardown ---------------------------------------------------------------

PROGRAM = """
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
.decl label(n: symbol, x: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""


def test_one_query_subscribed_twice_shares_one_dataflow_torn_down_with_the_last() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    first, second = Accumulated(), Accumulated()
    a = db.subscribe("reach(1, y)", first)
    b = db.subscribe("reach( 1 , y )", second)  # the same query, normalized
    assert len(db.live) == 1
    assert len(db.engine.dataflows) == 1
    db.insert("edge", [(3, 4)])
    assert first.rows() == second.rows() == {(2,), (3,), (4,)}
    assert first.changes[-1] == second.changes[-1]
    db.unsubscribe(a)
    assert len(db.live) == 1
    assert len(db.engine.dataflows) == 1
    db.insert("edge", [(4, 5)])
    assert second.rows() == {(2,), (3,), (4,), (5,)}
    assert (5,) not in first.rows()  # an unsubscribed callback hears nothing more
    db.unsubscribe(b)
    assert db.live == {}
    assert db.engine.dataflows == []
    assert all(not inp.arrangements for inp in db.engine.inputs.values())
    db.unsubscribe(b)  # twice is harmless
    assert db.query("reach(1, y)") == sorted(db.query("reach(1, y)"))  # still answers
    assert set(db.query("reach(1, y)")) == {(2,), (3,), (4,), (5,)}
    assert db.engine.dataflows == []  # a one-shot query leaves nothing behind


def test_different_queries_share_base_arrangements_and_release_them_separately() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    a = db.subscribe("reach(1, y)", Accumulated())
    b = db.subscribe("reach(x, 3)", Accumulated())
    assert len(db.live) == 2 and len(db.engine.dataflows) == 2
    readers = {k: a.readers for k, a in db.engine.inputs["edge"].arrangements.items()}
    assert any(n == 2 for n in readers.values()), readers
    db.unsubscribe(a)
    assert len(db.engine.dataflows) == 1
    assert db.engine.inputs["edge"].arrangements, "b still reads edge"
    db.unsubscribe(b)
    assert db.engine.dataflows == []
    assert not db.engine.inputs["edge"].arrangements


# --- rejected input changes nothing --------------------------------------------------


def snapshot(db: Database) -> tuple[object, ...]:
    return (
        db.epoch,
        sorted(db.query("edge(x, y)")),
        sorted(db.query("reach(x, y)")),
        sorted(db.query("label(n, x)")),
        db.checked.schema.names(),
        len(db.engine.dataflows),
    )


@pytest.fixture
def loaded() -> tuple[Database, Accumulated]:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    db.insert("label", [("a", 1)])
    acc = Accumulated()
    db.subscribe("reach(x, y)", acc)
    return db, acc


BAD_TRANSACTIONS = [
    pytest.param("nope", [(1, 2)], UnknownNameError, id="unknown-relation"),
    pytest.param("edg", [(1, 2)], UnknownNameError, id="misspelled-relation"),
    pytest.param("edge", [(1, 2, 3)], TransactionError, id="too-many-values"),
    pytest.param("edge", [(1,)], TransactionError, id="too-few-values"),
    pytest.param("edge", [("a", 2)], TransactionError, id="symbol-for-number"),
    pytest.param("edge", [(1.5, 2)], TransactionError, id="fraction-for-number"),
    pytest.param("edge", [(True, 2)], TransactionError, id="bool-for-number"),
    pytest.param("edge", [(2**64, 2)], TransactionError, id="number-out-of-range"),
    pytest.param("label", [(1, 1)], TransactionError, id="number-for-symbol"),
    pytest.param("edge", 7, TransactionError, id="not-rows"),
]


@pytest.mark.parametrize(("relation", "rows_", "error"), BAD_TRANSACTIONS)
def test_a_rejected_transaction_names_the_relation_and_changes_nothing(
    loaded: tuple[Database, Accumulated], relation: str, rows_: object, error: type[Exception]
) -> None:
    db, acc = loaded
    before, heard = snapshot(db), len(acc.changes)
    with pytest.raises(error) as caught, db.transaction() as tx:
        tx.insert("edge", [(3, 4)])  # valid, but must not be applied either
        tx.retract("edge", [(1, 2)])
        tx.insert(relation, rows_)
    assert isinstance(caught.value, DatalogError)
    assert f"`{relation}`" in str(caught.value)
    assert snapshot(db) == before
    assert len(acc.changes) == heard
    db.insert("edge", [(3, 4)])  # the database still works
    assert (1, 4) in acc.rows()


def test_unknown_relation_suggests_a_close_name(loaded: tuple[Database, Accumulated]) -> None:
    db, _ = loaded
    with pytest.raises(UnknownNameError, match="did you mean `edge`"):
        db.insert("edg", [(1, 2)])


def test_a_failing_callback_does_not_half_apply_a_transaction() -> None:
    """An exception in the body of `with db.transaction()` discards the transaction."""
    db = Database()
    db.define(PROGRAM)
    epoch = db.epoch
    with pytest.raises(RuntimeError), db.transaction() as tx:
        tx.insert("edge", [(1, 2)])
        raise RuntimeError("abort")
    assert db.query("edge(x, y)") == []
    assert db.epoch == epoch


BAD_DEFINITIONS = [
    pytest.param("reach(x, y) :- edgee(x, y).", id="unknown-relation"),
    pytest.param("reach(x) :- edge(x, _).", id="wrong-arity"),
    pytest.param("reach(x, y) :- edge(x, y), label(x, _).", id="type-mismatch"),
    pytest.param("reach(x, y) :- edge(x, z).", id="unbound-head-variable"),
    pytest.param(".decl p(x: number)\np(x) :- edge(x, _), !p(x).", id="unstratified"),
    pytest.param(".decl edge(a: number, b: number)", id="duplicate-declaration"),
    pytest.param(".decl q(x: number)\nq(x) :- edge(x, y", id="syntax-error"),
    pytest.param('.decl q(x: number)\nq(1).\nq("a").', id="bad-fact-after-a-good-one"),
]


@pytest.mark.parametrize("text", BAD_DEFINITIONS)
def test_a_rejected_definition_changes_nothing(
    loaded: tuple[Database, Accumulated], text: str
) -> None:
    db, acc = loaded
    before, heard = snapshot(db), len(acc.changes)
    program, inputs = db.program, set(db.engine.inputs)
    with pytest.raises(DatalogError):
        db.define(text)
    assert snapshot(db) == before
    assert db.program is program
    assert set(db.engine.inputs) == inputs
    assert len(acc.changes) == heard
    db.define(".decl q(x: number)\nq(x) :- reach(x, 3).")  # a good one still works
    assert set(db.query("q(x)")) == {(1,), (2,)}


# --- known gaps --------------------------------------------------------------------


def test_nullary_facts_can_be_inserted_and_retracted() -> None:
    db = Database()
    db.define(".decl flag()\n.decl seen()\nseen().")
    assert db.query("seen()") == [()]
    db.insert("flag", [()])
    assert db.query("flag()") == [()]
    db.retract("flag", [()])
    assert db.query("flag()") == []
