"""`redefine`: a relation's rules replaced while subscribers watch, at one new epoch.

Every subscriber receives exactly the difference between the old and the new
answer, labelled with the new epoch; a rejected redefinition changes nothing (not
the epoch, the program, an answer or the log); a durable database replays the
replacement and a checkpoint's program holds it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from datalog import Change, Database
from datalog.lang.errors import (
    DatalogError,
    DatalogSyntaxError,
    RangeRestrictionError,
    RedefinitionError,
    StratificationError,
    TransactionError,
    UnknownNameError,
)
from datalog.lang.pretty import format_rule
from differential.operators.reduce import ReduceOp
from tests.datalog.answers import Recorder

PROGRAM = """
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
.decl unreached(x: number, y: number)
.decl node(x: number)
.decl spare(x: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
node(x) :- edge(x, _).
node(y) :- edge(_, y).
unreached(x, y) :- node(x), node(y), !reach(x, y).
"""
EDGES = [(1, 2), (2, 3), (3, 1), (4, 5)]


def _database() -> Database:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", EDGES)
    return db


def _rules(db: Database, relation: str) -> list[str]:
    return sorted(format_rule(r) for r in db.program.rules if r.head.name == relation)


def test_a_redefinition_delivers_exactly_old_to_new_at_its_own_new_epoch() -> None:
    db = _database()
    reach, unreached = Recorder(), Recorder()
    db.subscribe("reach(1, y)", reach)
    first = db.epoch
    # reads reach through a negation (a new constant of a shared query: its own epoch)
    db.subscribe("unreached(x, 1)", unreached)
    before = db.epoch
    assert db.redefine("reach", "reach(x, y) :- edge(x, y).") == before + 1
    assert db.epoch == before + 1
    assert [c.epoch for c in reach.changes] == [first, before + 1]
    assert reach.last() == [((1,), -1), ((3,), -1)]  # only 1 -> 2 is left
    assert unreached.last() == [((1,), 1), ((2,), 1)]  # only 3 -> 1 reaches 1 now
    assert reach.rows() == {(2,)} and set(db.query("reach(1, y)")) == {(2,)}
    assert _rules(db, "reach") == ["reach(x, y) :- edge(x, y)."]
    db.insert("edge", [(2, 4)])  # the new rules hold from now on
    assert reach.rows() == {(2,)} and db.query("reach(2, y)") == [(3,), (4,)]


def test_a_redefinition_that_changes_no_answer_takes_an_epoch_and_delivers_nothing() -> None:
    db = _database()
    seen = Recorder()
    db.subscribe("reach(x, y)", seen)
    before = db.epoch
    db.redefine("reach", "reach(x, z) :- edge(x, z).\nreach(x, z) :- edge(x, y), reach(y, z).")
    assert db.epoch == before + 1 and len(seen.changes) == 1
    db.redefine("spare", "")  # no rules before, none after: still an epoch of its own
    db.define("spare(x) :- edge(x, 99).")  # new rules that derive nothing, too
    assert db.epoch == before + 3 and len(seen.changes) == 1


def test_rules_and_rows_in_one_transaction_are_one_epoch_and_one_change() -> None:
    db = _database()
    seen = Recorder()
    db.subscribe("reach(x, y)", seen)
    with db.transaction() as tx:
        tx.insert("edge", [(5, 6)])
        tx.redefine("reach", "reach(x, y) :- edge(y, x).")
        tx.retract("edge", [(4, 5)])
    assert [c.epoch for c in seen.changes][1:] == [db.epoch]
    expected = {(y, x) for x, y in [*EDGES[:3], (5, 6)]}
    assert seen.rows() == expected == set(db.query("reach(x, y)"))


def test_several_relations_swapped_in_one_transaction_are_checked_together() -> None:
    db = Database()
    db.define(
        ".decl base(x: number)\n.decl a(x: number)\n.decl b(x: number)\n"
        "a(x) :- base(x), !b(x).\nb(x) :- base(x), x > 1.\nbase(1). base(2). base(3)."
    )
    seen = Recorder()
    db.subscribe("a(x)", seen)
    with db.transaction() as tx:  # the dependency turns around: b now reads !a
        tx.redefine("a", "a(x) :- base(x), x > 1.")
        tx.redefine("b", "b(x) :- base(x), !a(x).")
    assert seen.rows() == {(2,), (3,)} and db.query("b(x)") == [(1,)]
    assert len(seen.changes) == 2 and seen.changes[1].epoch == db.epoch


def test_a_base_relation_keeps_its_facts_when_rules_come_and_go() -> None:
    db = _database()
    seen = Recorder()
    db.subscribe("edge(x, y)", seen)
    db.redefine("edge", "edge(y, x) :- edge(x, y).")  # Soufflé-style: facts and rules
    assert seen.rows() == {*EDGES, *((y, x) for x, y in EDGES)}
    db.redefine("edge", "")
    assert seen.rows() == set(EDGES) == set(db.query("edge(x, y)"))
    db.retract("edge", [(4, 5)])  # the facts are still data to retract
    assert seen.rows() == set(EDGES[:3])


def test_facts_inserted_into_a_derived_relation_stay_when_its_rules_change() -> None:
    db = _database()
    db.insert("reach", [(7, 7)])
    seen = Recorder()
    db.subscribe("reach(x, 7)", seen)
    db.redefine("reach", "")
    assert seen.rows() == {(7,)} and db.query("reach(x, y)") == [(7, 7)]


def test_a_declared_relation_without_rules_gets_its_first_ones() -> None:
    db = _database()
    seen = Recorder()
    db.subscribe("spare(x)", seen)
    db.redefine("spare", "spare(x) :- edge(x, 5).")
    assert seen.rows() == {(4,)} and seen.changes[-1].epoch == db.epoch


@pytest.mark.parametrize(
    ("relation", "text", "error", "fragment"),
    [
        ("reech", "reach(x, y) :- edge(x, y).", UnknownNameError, "did you mean `reach`"),
        ("reach", "node(x) :- edge(x, x).", RedefinitionError, "defines `node`"),
        ("reach", "reach(1, 2).", RedefinitionError, "is a fact"),
        ("reach", ".decl other(x: number)", RedefinitionError, "go to `define`"),
        ("reach", "reach(x, y) :- edge(x, y).\n.output reach", RedefinitionError, "define"),
        ("reach", "reach(x, y) :- unreached(x, y).", StratificationError, "cycle"),
        ("reach", "reach(x, y) :- edge(x, z).", RangeRestrictionError, "`y`"),
        ("reach", "reach(x, y) :- edge(x, y", DatalogSyntaxError, ")"),
        ("reach", "reach(x, y) :- edg(x, y).", UnknownNameError, "did you mean `edge`"),
        ("reach", 'reach(x, y) :- edge(x, y), y = "a".', DatalogError, ""),
    ],
)
def test_a_rejected_redefinition_changes_nothing(
    relation: str, text: str, error: type[DatalogError], fragment: str, tmp_path: Path
) -> None:
    db = Database(tmp_path)
    db.define(PROGRAM)
    db.insert("edge", EDGES)
    seen = Recorder()
    db.subscribe("unreached(x, y)", seen)
    epoch, program, answer = db.epoch, db.program, seen.rows()
    with pytest.raises(error) as caught:
        db.redefine(relation, text)
    assert fragment in str(caught.value)
    with pytest.raises(error), db.transaction() as tx:
        tx.insert("edge", [(8, 9)])
        tx.redefine(relation, text)
    assert db.epoch == epoch and db.program is program and len(seen.changes) == 1
    db.insert("edge", [(5, 4)])  # the old rules still hold: 4 and 5 now reach each other
    assert {(5, 4), (4, 4), (5, 5)} <= answer
    assert seen.rows() == answer - {(5, 4), (4, 4), (5, 5)} == set(db.query("unreached(x, y)"))
    db.close()
    with Database(tmp_path) as again:  # nothing of the rejected ones was logged
        assert again.epoch == db.epoch and set(again.query("reach(x, y)")) == set(
            db.query("reach(x, y)")
        )


def test_an_error_names_its_position_in_the_redefinition_text() -> None:
    db = _database()
    with pytest.raises(RedefinitionError) as caught:
        db.redefine("reach", "reach(x, y) :- edge(x, y).\n  node(x) :- edge(x, 1).")
    assert (caught.value.line, caught.value.column) == (2, 3)
    assert "node(x) :- edge(x, 1)." in str(caught.value)


def test_an_error_at_an_old_rule_names_the_cycle_but_no_position_in_the_new_text() -> None:
    """The negation that closes the cycle is in `unreached`'s old rule (line 10 of the
    program): no caret under whatever line 10 of the redefinition text would be."""
    db = _database()
    text = "\n".join(["reach(x, y) :- edge(x, y)."] * 11 + ["reach(x, y) :- unreached(x, y)."])
    with pytest.raises(StratificationError) as caught:
        db.redefine("reach", text)
    assert caught.value.line == 0 and "^" not in str(caught.value)
    assert "cycle unreached -> reach -> unreached" in str(caught.value)


def test_a_redefinition_from_inside_a_callback_is_refused() -> None:
    db = _database()

    def meddle(change: Change) -> None:
        if not change.snapshot:
            db.redefine("reach", "")

    sub = db.subscribe("edge(x, y)", meddle)
    db.insert("edge", [(6, 7)])
    assert isinstance(sub.errors[0], TransactionError)
    assert len(db.query("reach(x, y)")) > 1


def test_a_failure_while_switching_keeps_the_old_rules_and_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = _database()
    seen = Recorder()
    db.subscribe("reach(1, y)", seen)
    other = Recorder()
    db.subscribe("edge(x, 1)", other)
    epoch = db.epoch

    def fail(requests: object, sealing: object = None) -> int:
        raise MemoryError

    with monkeypatch.context() as patch:
        patch.setattr(db.engine, "commit", fail)
        with pytest.raises(MemoryError):
            db.redefine("reach", "reach(x, y) :- edge(x, y).")
    assert db.epoch == epoch and len(seen.changes) == 1
    assert _rules(db, "reach") == [
        "reach(x, y) :- edge(x, y).",
        "reach(x, z) :- reach(x, y), edge(y, z).",
    ]
    db.insert("edge", [(3, 6)])  # every live query still runs, on the old rules
    assert seen.rows() == {(1,), (2,), (3,), (6,)} and other.rows() == {(3,)}


class Boom(BaseException):
    """Stands for KeyboardInterrupt or MemoryError: not an Exception."""


@pytest.mark.parametrize("nth", [1, 2, 3])  # 1: rebuilding the live query; 2, 3: committing
def test_a_failure_halfway_through_a_redefinition_leaves_nothing(
    nth: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = Database(tmp_path)
    db.define(PROGRAM)
    db.insert("edge", EDGES)
    reach, node = Recorder(), Recorder()
    db.subscribe("reach(x, y)", reach)
    db.subscribe("node(x)", node)
    epoch, answer = db.epoch, reach.rows()
    original, calls = ReduceOp.step, []

    def step(self: ReduceOp, time: tuple[int, ...]) -> None:
        calls.append(time)
        if len(calls) == nth:
            raise Boom
        original(self, time)

    with monkeypatch.context() as patch:
        patch.setattr(ReduceOp, "step", step)
        with pytest.raises(Boom), db.transaction() as tx:
            tx.redefine("reach", "reach(x, y) :- edge(y, x).")
            tx.insert("edge", [(5, 6)])
    assert db.epoch == epoch and (len(reach.changes), len(node.changes)) == (1, 1)
    db.insert("edge", [(5, 6)])  # every live query runs again, on the old rules
    closure = {(a, b) for a in (1, 2, 3) for b in (1, 2, 3)} | {(4, 5), (4, 6), (5, 6)}
    assert reach.rows() == closure == answer | {(4, 6), (5, 6)}
    assert node.rows() == {(1,), (2,), (3,), (4,), (5,), (6,)}
    db.close()
    with Database(tmp_path) as again:  # the failed record was cut off the log
        assert again.epoch == db.epoch and set(again.query("reach(x, y)")) == closure


def _state(db: Database) -> tuple[int, dict[str, set[tuple[object, ...]]], list[str]]:
    queries = ("reach(x, y)", "unreached(x, y)", "node(x)")
    rules = [format_rule(r) for r in db.program.rules]
    return db.epoch, {q: set(db.query(q)) for q in queries}, sorted(rules)


def test_redefinitions_survive_reopening_from_the_log_and_from_a_checkpoint(
    tmp_path: Path,
) -> None:
    db = Database(tmp_path)
    db.define(PROGRAM)
    db.insert("edge", EDGES)
    db.redefine("reach", "reach(x, y) :- edge(y, x).")
    db.define("reach(x, x) :- node(x).\nedge(7, 8).")  # more rules after the replacement
    with db.transaction() as tx:
        tx.redefine("node", "node(x) :- edge(x, _), x < 5.")
        tx.insert("edge", [(0, 4)])
    state = _state(db)
    assert [r for r in state[2] if r.startswith("reach")] == [
        "reach(x, x) :- node(x).",
        "reach(x, y) :- edge(y, x).",
    ]
    db.close()
    with Database(tmp_path) as again:  # from the log
        assert _state(again) == state
        again.checkpoint()
    with Database(tmp_path) as again:  # from the checkpoint
        assert _state(again) == state
        again.redefine("unreached", "unreached(x, y) :- node(x), node(y), x < y.")
        state = _state(again)
    with Database(tmp_path) as again:  # from the checkpoint and the log after it
        assert _state(again) == state


def test_subsumptive_clauses_are_replaced_with_the_rules() -> None:
    db = Database()
    db.define(
        ".decl offer(k: number, v: number)\n.decl best(k: number, v: number)\n"
        "best(k, v) :- offer(k, v).\nbest(k, a) <= best(k, b) :- b < a."
    )
    db.insert("offer", [(1, 5), (1, 3), (2, 7)])
    seen = Recorder()
    db.subscribe("best(k, v)", seen)
    assert seen.rows() == {(1, 3), (2, 7)}
    db.redefine("best", "best(k, v) :- offer(k, v).\nbest(k, a) <= best(k, b) :- b > a.")
    assert seen.rows() == {(1, 5), (2, 7)} and seen.changes[-1].epoch == db.epoch
    db.redefine("best", "best(k, v) :- offer(k, v).")  # no clause left: every offer
    assert seen.rows() == {(1, 5), (1, 3), (2, 7)}
    with pytest.raises(RedefinitionError, match="subsumes `offer`"):
        db.redefine("best", "offer(k, a) <= offer(k, b) :- b < a.")


def test_an_eqrel_keeps_its_closure_when_its_rules_change() -> None:
    db = Database()
    db.define(
        ".decl link(a: number, b: number)\n.decl same(a: number, b: number) eqrel\n"
        "same(a, b) :- link(a, b)."
    )
    db.insert("link", [(1, 2), (2, 3)])
    seen = Recorder()
    db.subscribe("same(1, x)", seen)
    assert seen.rows() == {(1,), (2,), (3,)}
    db.redefine("same", "same(a, b) :- link(a, b), a > 1.")  # 1 is no longer linked
    assert seen.rows() == set() and db.query("same(3, x)") == [(2,), (3,)]


def test_paced_subscribers_count_rule_changes_as_epochs() -> None:
    db = _database()
    seen = Recorder()
    db.subscribe("reach(1, y)", seen, granularity={"epochs": 2})
    db.redefine("reach", "reach(x, y) :- edge(x, y).")
    assert len(seen.changes) == 1  # held: one epoch of two
    db.define("reach(x, z) :- edge(x, y), edge(y, z).")
    assert [c.epoch for c in seen.changes][1:] == [db.epoch]
    assert seen.rows() == {(2,), (3,)} == set(db.query("reach(1, y)"))


def test_a_definition_inside_the_transaction_is_replaced_too_at_commit() -> None:
    db = _database()
    with db.transaction() as tx:
        tx.redefine("reach", "reach(x, y) :- edge(x, y).")
        db.define("reach(x, x) :- node(x).")  # an epoch of its own, before the commit
    assert _rules(db, "reach") == ["reach(x, y) :- edge(x, y)."]
    with pytest.raises(DatalogError, match="cycle reach -> spare -> reach"), db.transaction() as tx:
        tx.redefine("reach", "reach(x, y) :- edge(x, y), !spare(x).")
        db.define("spare(x) :- node(x), !reach(x, x).")  # closes a cycle through it
    assert _rules(db, "reach") == ["reach(x, y) :- edge(x, y)."]


def test_a_checkpoint_keeps_the_facts_of_definitions_whose_rules_were_replaced(
    tmp_path: Path,
) -> None:
    """A fact defined once is not inserted again by a later definition (the memo of
    defined facts): reopening from a checkpoint taken after a redefinition agrees."""
    runs = []
    for reopen in (False, True):
        path = tmp_path / str(reopen)
        db = Database(path)
        db.define(".decl p(x: number)\n.decl q(x: number)\nq(x) :- p(x).\np(1).")
        db.retract("p", [(1,)])
        db.redefine("q", "q(x) :- p(x), x > 0.")
        if reopen:
            db.checkpoint()
            db.close()
            db = Database(path)
        db.define("p(1). p(2).")
        runs.append((db.epoch, db.query("p(x)"), _rules(db, "q")))
        db.close()
    assert runs[0] == runs[1] and runs[0][1:] == ([(2,)], ["q(x) :- p(x), x > 0."])


def test_a_redefinition_record_round_trips_and_a_plain_commit_keeps_its_old_form() -> None:
    import numpy as np

    from datalog.storage.records import Change as Part
    from datalog.storage.records import Commit, decode, encode

    columns = (np.array([1, 2]), np.array(["é", "b"], dtype=object))
    replaced = (("r", 'r(x) :- e(x, "é").'), ("s", ""))
    record = Commit(7, [Part("e", True, columns), Part("e", False, columns)], replaced)
    back = decode(encode(record))
    assert isinstance(back, Commit) and (back.epoch, tuple(back.redefinitions)) == (7, replaced)
    assert [(p.relation, p.inserting) for p in back.changes] == [("e", True), ("e", False)]
    assert all(np.array_equal(a, b) for a, b in zip(back.changes[1].columns, columns, strict=True))
    plain = Commit(7, record.changes)
    assert encode(plain)[:1] == b"C" and decode(encode(plain)).redefinitions == ()


def test_a_component_instance_relation_is_refused_and_nothing_changes() -> None:
    db = Database()
    db.define(
        ".comp Graph { .decl edge(x: number, y: number)\n"
        ".decl reach(x: number, y: number)\nreach(x, y) :- edge(x, y). }\n"
        ".init g = Graph\n"
    )
    db.insert("g.edge", [(1, 2)])
    epoch = db.epoch
    with pytest.raises(RedefinitionError, match="component instance"):
        db.redefine("g.reach", "g.reach(x, x) :- g.edge(x, _).")
    with pytest.raises(RedefinitionError, match="components"):
        db.redefine("g.reach", ".init h = Graph")
    assert db.query("g.reach(x, y)") == [(1, 2)]
    assert db.epoch == epoch
