"""`Database.what_if` and `Database.hypothetical` (docs/adr/0047): what a commit would
deliver, without committing. Property: on random streams, what_if then the same
commit delivers exactly the Changes what_if answered, and what_if itself changes
nothing observable (epoch, log, subscribers, symbols, `as_of`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datalog import Change, Database
from datalog.lang.errors import TransactionError, UnknownNameError
from tests.budget import examples

PROGRAM = """
.decl e(a: number, b: number)
.decl tag(a: number, s: symbol)
.decl reach(a: number)
.decl unreached(a: number)
.decl degree(a: number, n: number)
.decl named(s: symbol)
.decl tc(a: number, b: number)
reach(0).
reach(b) :- reach(a), e(a, b).
unreached(a) :- e(a, _), !reach(a).
degree(a, n) :- e(a, _), n = count : { e(a, _) }.
named(s) :- tag(a, s), reach(a).
tc(a, b) :- e(a, b).
tc(a, c) :- tc(a, b), e(b, c).
"""
QUERIES = [
    "reach(a)",
    "unreached(a)",
    "degree(a, n)",
    "named(s)",
    "e(1, b)",
    "tc(1, b)",
    "tc(3, b)",
]
# (`tc(1, b)` and `tc(3, b)` are seats of one shared multi-tenant dataflow)


def changes(got: list[Change]) -> Counter[tuple[Any, int]]:
    pairs = (zip(c.rows, c.diffs, strict=True) for c in got if not c.snapshot)
    return Counter(pair for found in pairs for pair in found)


def as_counter(change: Change) -> Counter[tuple[Any, int]]:
    return Counter(zip(change.rows, change.diffs, strict=True))


node = st.integers(0, 5)
edges = st.lists(st.tuples(node, node), max_size=4)
tags = st.lists(st.tuples(node, st.sampled_from(["x", "y", "new-symbol"])), max_size=2)
step = st.tuples(edges, edges, tags, tags)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=edges, steps=st.lists(step, min_size=1, max_size=5))
def test_what_if_then_commit_delivers_exactly_what_it_answered(
    first: list[tuple[int, int]], steps: list[tuple[Any, Any, Any, Any]]
) -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("e", first)
    got: dict[str, list[Change]] = {q: [] for q in QUERIES}
    for q in QUERIES:
        db.subscribe(q, got[q].append)
    for added, removed, tagged, untagged in steps:
        inserts = {"e": added, "tag": tagged}
        retracts = {"e": removed, "tag": untagged}
        epoch, symbols, before = db.epoch, len(db.symbols), {q: len(got[q]) for q in QUERIES}
        answers = {q: db.query(q) for q in QUERIES}
        predicted = db.what_if(inserts, retracts)
        assert (db.epoch, len(db.symbols)) == (epoch, symbols)
        assert {q: len(got[q]) for q in QUERIES} == before  # nobody was told
        assert {q: db.query(q) for q in QUERIES} == answers
        assert set(predicted) == set(QUERIES)
        with db.transaction() as tx:
            for relation, rows in inserts.items():
                tx.insert(relation, rows)
            for relation, rows in retracts.items():
                tx.retract(relation, rows)
        for q in QUERIES:
            assert as_counter(predicted[q]) == changes(got[q][before[q] :]), q
            assert predicted[q].epoch == db.epoch or not predicted[q].rows


def test_queries_asked_that_are_not_live_and_the_columns() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("e", [(0, 1)])
    found = db.what_if({"e": [(1, 2)]}, queries=["reach(a)", "e(1, b)"])
    assert list(found) == ["reach(a)", "e(1, b)"]
    assert (found["reach(a)"].rows, found["reach(a)"].diffs) == ([(2,)], [1])
    assert found["e(1, b)"].columns == ("b",) and found["e(1, b)"].rows == [(2,)]
    assert not db.live  # nothing stays subscribed


def test_a_hypothetical_block_and_as_of_and_the_log(tmp_path: Path) -> None:
    db = Database(tmp_path / "db")
    db.define(PROGRAM)
    db.insert("e", [(0, 1), (1, 2)])
    got: list[Change] = []
    db.subscribe("reach(a)", got.append)
    epoch, symbols = db.epoch, len(db.symbols)
    log = sorted((p.name, p.stat().st_size) for p in (tmp_path / "db").rglob("*") if p.is_file())
    with db.hypothetical() as tx:
        tx.retract("e", [(0, 1)])
        tx.insert("tag", [(2, "never-seen")])
    assert sorted(tx.changes["reach(a)"].rows) == [(1,), (2,)]
    assert set(tx.changes["reach(a)"].diffs) == {-1}
    assert (db.epoch, len(db.symbols), len(got)) == (epoch, symbols, 1)
    assert db.query("reach(a)", as_of=epoch) == db.query("reach(a)")
    assert sorted((p.name, p.stat().st_size) for p in (tmp_path / "db").rglob("*")
                  if p.is_file()) == log  # fmt: skip
    db.close()
    again = Database(tmp_path / "db")
    assert again.epoch == epoch and sorted(again.query("reach(a)")) == [(0,), (1,), (2,)]
    again.close()


def test_bad_rows_raise_and_change_nothing() -> None:
    db = Database()
    db.define(PROGRAM)
    symbols, epoch = len(db.symbols), db.epoch
    with pytest.raises(UnknownNameError):
        db.what_if({"nope": [(1,)]})
    with pytest.raises(TransactionError), db.hypothetical() as tx:
        tx.redefine("reach", "reach(1).")
    db.what_if({"tag": [(1, "fresh")]})
    assert (len(db.symbols), db.epoch) == (symbols, epoch)


def test_what_if_is_refused_inside_a_callback() -> None:
    db = Database()
    db.define(PROGRAM)
    seen: list[BaseException] = []

    def callback(change: Change) -> None:
        if not change.snapshot:
            try:
                db.what_if({"e": [(5, 5)]})
            except TransactionError as error:
                seen.append(error)

    db.subscribe("reach(a)", callback)
    db.insert("e", [(0, 1)])
    assert len(seen) == 1 and "callback" in str(seen[0])


def test_the_repl_prints_what_each_watched_query_would_receive(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from datalog.cli.repl import Session

    session = Session()
    asked = [":what-if insert e (0, 1)", ":watch reach(a)", ":what-if insert e (0, 1) (1, 2)",
             ":what-if retract e (0, 1)", ":what-if e (1, 2)"]  # fmt: skip
    for line in [*PROGRAM.strip().splitlines(), *asked]:
        assert session.handle(line)
    out, err = capsys.readouterr()
    next_epoch = session.db.epoch + 1
    assert "no live query: :watch one first" in out
    assert (
        "reach(a) at epoch" in out
        and f"epoch {next_epoch}: 2 rows would change\n  + (1)\n  + (2)\n" in out
    )
    assert f"reach(a) at epoch {next_epoch}: 0 rows would change\n" in out
    assert "usage: :what-if insert REL" in err
    assert session.db.query("e(x, y)") == []


def test_the_child_holds_no_lock_once_it_answered(tmp_path: Path) -> None:
    """A durable database closed right after a what_if opens again at once: the forked
    child closed its copy of the directory's `flock` before answering (it used to hold
    it until torn down, and the reopen failed now and then)."""
    for i in range(8):
        db = Database(tmp_path / "db")
        if i == 0:
            db.define(PROGRAM)
        db.subscribe("reach(a)", lambda change: None)
        big = [(j, j + 1) for j in range(2000)]  # a child with pages of its own to tear down
        assert db.what_if({"e": big})["reach(a)"].rows
        db.close()
