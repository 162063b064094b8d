"""Database(path): every committed epoch survives a restart, nothing else does."""

from __future__ import annotations

from pathlib import Path

import pytest

from datalog.database import Database
from datalog.errors import DatalogError

PROGRAM = """
.decl edge(x: number, y: symbol)
.decl r(x: number, y: symbol)
r(x, y) :- edge(x, y).
edge(1, "a").
"""


def _fill(path: Path) -> tuple[int, list[tuple[object, ...]]]:
    db = Database(path)
    db.define(PROGRAM)
    with db.transaction() as tx:
        tx.insert("edge", [(2, "b"), (3, "c")])
    with db.transaction() as tx:
        tx.retract("edge", [(1, "a")])
    answer = sorted(db.query("r(x, y)"))
    db.close()
    return db.epoch, answer


def test_reopening_replays_definitions_and_transactions_to_the_same_epoch(
    tmp_path: Path,
) -> None:
    epoch, answer = _fill(tmp_path)
    again = Database(tmp_path)
    assert again.epoch == epoch
    assert sorted(again.query("r(x, y)")) == answer == [(2, "b"), (3, "c")]


def test_a_reopened_database_keeps_logging(tmp_path: Path) -> None:
    _fill(tmp_path)
    db = Database(tmp_path)
    db.insert("edge", [(4, "d")])
    db.close()
    assert (4, "d") in Database(tmp_path).query("r(x, y)")


def test_rejected_definitions_and_transactions_are_not_logged(tmp_path: Path) -> None:
    epoch, answer = _fill(tmp_path)
    db = Database(tmp_path)
    with pytest.raises(DatalogError):
        db.define("r(x) :- nowhere(x).")
    with pytest.raises(DatalogError), db.transaction() as tx:
        tx.insert("edge", [(5, "e")])
        tx.insert("edge", [("not a number", "f")])
    db.close()
    again = Database(tmp_path)
    assert again.epoch == epoch
    assert sorted(again.query("r(x, y)")) == answer


def test_a_torn_last_record_is_dropped_and_the_log_stays_appendable(tmp_path: Path) -> None:
    epoch, answer = _fill(tmp_path)
    with (tmp_path / "log.jsonl").open("a") as log:
        log.write('{"epoch": 99, "chan')
    db = Database(tmp_path)
    assert db.epoch == epoch
    db.insert("edge", [(7, "g")])
    db.close()
    again = Database(tmp_path)
    assert sorted(again.query("r(x, y)")) == sorted([*answer, (7, "g")])
