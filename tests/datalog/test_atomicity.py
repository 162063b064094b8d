"""A commit is all or nothing, whatever fails while it is applied."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from datalog import Change, Database
from differential.operators.reduce import ReduceOp

PROGRAM = """
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""


class Boom(BaseException):
    """Stands for KeyboardInterrupt or MemoryError: not an Exception."""


def _fail_on_step(monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    original = ReduceOp.step
    calls = Counter[str]()

    def step(self: ReduceOp, time: tuple[int, ...]) -> None:
        calls["step"] += 1
        if calls["step"] == nth:
            raise Boom
        original(self, time)

    monkeypatch.setattr(ReduceOp, "step", step)


def _accumulate(changes: list[Change]) -> set[tuple[object, ...]]:
    rows: Counter[tuple[object, ...]] = Counter()
    for change in changes:
        for row, diff in zip(change.rows, change.diffs, strict=True):
            rows[row] += diff
    assert all(n in (0, 1) for n in rows.values())
    return {row for row, n in rows.items() if n}


def _closure(edges: set[tuple[int, int]]) -> set[tuple[object, ...]]:
    reach = set(edges)
    while True:
        more = {(a, d) for a, b in reach for c, d in edges if b == c} - reach
        if not more:
            return set(reach)
        reach |= more


@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_commit_failing_halfway_leaves_nothing_and_subscriptions_stay_exact(
    nth: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = Database(tmp_path)
    db.define(PROGRAM)
    edges = {(1, 2), (2, 3)}
    db.insert("edge", sorted(edges))
    seen: list[Change] = []
    db.subscribe("reach(x, y)", seen.append)
    epoch = db.epoch
    with monkeypatch.context() as patch:
        _fail_on_step(patch, nth)
        with pytest.raises(Boom), db.transaction() as tx:
            tx.insert("edge", [(3, 4), (4, 1)])
            tx.retract("edge", [(1, 2)])
    assert db.epoch == epoch
    assert set(db.query("reach(x, y)")) == _accumulate(seen) == _closure(edges)
    for change in ([(3, 4)], [(0, 1)]):  # later commits: exact changes, nothing of the failed one
        db.insert("edge", change)
        edges |= set(change)
        assert _accumulate(seen) == _closure(edges) == set(db.query("reach(x, y)"))
    db.close()
    with Database(tmp_path) as again:  # the failed commit's record was cut off the log
        assert set(again.query("reach(x, y)")) == _closure(edges)


def test_a_subscriber_raising_keyboardinterrupt_interrupts_after_the_epoch_is_whole(
    tmp_path: Path,
) -> None:
    """The commit had happened when a callback raised: the log record of that epoch
    was cut off all the same, so reopening replayed to another epoch and failed; and
    the subscribers after the raising one never heard of the epoch."""
    db = Database(tmp_path)
    db.define(PROGRAM)
    db.insert("edge", [(1, 2)])

    def interrupting(change: Change) -> None:
        if not change.snapshot:
            raise KeyboardInterrupt

    db.subscribe("reach(x, y)", interrupting)
    later: list[Change] = []
    paced: list[Change] = []
    db.subscribe("reach(x, y)", later.append)
    db.subscribe("reach(x, y)", paced.append, granularity={"epochs": 1})
    with pytest.raises(KeyboardInterrupt):
        db.insert("edge", [(2, 3)])
    epoch = db.epoch
    assert _accumulate(later) == _accumulate(paced) == _closure({(1, 2), (2, 3)})
    db.close()
    with Database(tmp_path) as again:
        assert again.epoch == epoch
        assert set(again.query("reach(x, y)")) == _closure({(1, 2), (2, 3)})
        again.insert("edge", [(3, 4)])
    with Database(tmp_path) as again:
        assert set(again.query("reach(x, y)")) == _closure({(1, 2), (2, 3), (3, 4)})


def test_a_failed_transaction_leaves_the_symbol_table_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows are interned as they are added: the strings of a transaction that never
    committed stayed in the table, and the next checkpoint wrote them to disk."""
    from datalog.lang.errors import DatalogError, TransactionError
    from datalog.storage.snapshots import read_snapshot

    db = Database(tmp_path)
    db.define(".decl s(x: symbol, n: number)\n.decl t(x: symbol)\nt(x) :- s(x, _).")
    db.insert("s", [("kept", 1)])
    db.subscribe("t(x)", lambda change: None)
    size = len(db.symbols)
    with pytest.raises(TransactionError), db.transaction() as tx:  # a bad row
        tx.insert("s", [("secret-1", 1)])
        tx.insert("s", [("secret-2", 2), ("secret-3", "not a number")])
    with pytest.raises(RuntimeError), db.transaction() as tx:  # the block raises
        tx.insert("s", [("secret-4", 1)])
        raise RuntimeError
    with monkeypatch.context() as patch:  # the engine fails
        _fail_on_step(patch, 1)
        with pytest.raises(Boom):
            db.insert("s", [("secret-5", 1)])
    with pytest.raises(DatalogError), db.transaction() as tx:  # a redefinition that fails
        tx.insert("s", [("secret-6", 1)])
        tx.redefine("t", "t(x) :- nowhere(x).")
    assert len(db.symbols) == size
    db.insert("s", [("later", 2)])
    assert sorted(db.query("t(x)")) == [("kept",), ("later",)]
    db.checkpoint()
    db.close()
    (snapshot,) = tmp_path.glob("snapshot-*")
    assert not [s for s in read_snapshot(snapshot).symbols if s.startswith("secret")]
