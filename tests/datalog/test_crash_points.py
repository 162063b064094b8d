"""A crash at every system call of a writer's life: the process dies (as SIGKILL
would) at the n-th write, fsync, truncate, open, rename, unlink, mkdir or rmdir, a
write cut in half first. Reopening must show exactly the acknowledged steps, plus at
most the one in flight; and a second crash while that reopening recovers changes
nothing either. Deterministic, unlike the random SIGKILLs of test_durability."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from datalog.db.database import Database

PROGRAM = """
.decl e(x: number, s: symbol)
.decl r(x: number)
r(x) :- e(x, _).
e(0, "zero").
"""
STEPS: list[Callable[[Database], object]] = [
    lambda db: db.define(PROGRAM),
    lambda db: db.insert("e", [(1, "a"), (2, "b")]),
    lambda db: db.insert("e", [(3, "c")]),
    lambda db: db.retract("e", [(1, "a")]),  # the log now holds 4 records: a checkpoint
    lambda db: db.insert("e", [(4, "d")]),
    lambda db: db.redefine("r", "r(x) :- e(x, _), x > 1."),
    lambda db: db.checkpoint(),
    lambda db: db.insert("e", [(5, "e")]),
]
CALLS = ("write", "fsync", "ftruncate", "truncate", "open", "rename", "unlink", "mkdir", "rmdir")


def _state(db: Database) -> tuple[Any, ...]:
    if "e" not in db.checked.schema.relations:
        return (db.epoch,)
    return (db.epoch, sorted(db.query("e(x, s)")), sorted(db.query("r(x)")))


def _crash_at(nth: int) -> None:
    """From now on, die at the n-th call of CALLS (a write half done first)."""
    count = [0]

    def wrap(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            if count[0] == nth:
                if name == "write":
                    fd, data = args
                    real(fd, bytes(data[: len(data) // 2]))
                os._exit(9)
            return real(*args, **kwargs)

        return call

    for name in CALLS:
        setattr(os, name, wrap(name, getattr(os, name)))


def _child(path: Path, nth: int, steps: int, acks: int) -> None:
    write = os.write
    _crash_at(nth)
    db = Database(path, checkpoint_every=4)
    for i, step in enumerate(STEPS[:steps]):
        step(db)
        write(acks, bytes([i + 1]))


def _run(path: Path, nth: int, steps: int) -> tuple[int, bool]:
    """Run the first `steps` steps in a child crashing at call `nth`: (steps
    acknowledged, whether it crashed)."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        os.close(reader)
        try:
            _child(path, nth, steps, writer)
        finally:
            os._exit(0)
    os.close(writer)
    _, status = os.waitpid(pid, 0)
    acked = b""
    while chunk := os.read(reader, 64):
        acked += chunk
    os.close(reader)
    return (acked[-1] if acked else 0), os.WEXITSTATUS(status) == 9


def _references(tmp_path: Path) -> list[tuple[Any, ...]]:
    states = []
    with Database(tmp_path / "reference", checkpoint_every=4) as db:
        states.append(_state(db))
        for step in STEPS:
            step(db)
            states.append(_state(db))
    return states


def _check(path: Path, acked: int, references: list[tuple[Any, ...]], nth: int) -> int:
    with Database(path) as db:
        state = _state(db)
    assert state in references[acked : acked + 2], (nth, acked, state)
    return references.index(state)


def _check_without_newest_snapshot(path: Path, reached: tuple[Any, ...], nth: int) -> None:
    """Two snapshots and the log since the older are kept until a new one is durable
    (ADR 0035): whenever the crash came, the newest snapshot may be lost too."""
    snapshots = sorted(path.glob("snapshot-*[0-9]"))
    if not snapshots:
        return
    copy = path.with_name(f"{path.name}-without-newest")
    shutil.copytree(path, copy)
    (copy / snapshots[-1].name / "manifest.json").write_bytes(b"damaged")
    with Database(copy) as db:
        assert _state(db) == reached, nth


@pytest.mark.slow
def test_a_crash_at_any_system_call_keeps_exactly_the_acknowledged_steps(tmp_path: Path) -> None:
    references = _references(tmp_path)
    nth = 0
    while True:
        nth += 1
        path = tmp_path / str(nth)
        acked, crashed = _run(path, nth, len(STEPS))
        reached = _check(path, acked, references, nth)
        _check_without_newest_snapshot(path, references[reached], nth)
        if not crashed:
            assert acked == len(STEPS)
            break
        for again in (1, 2, 3, 5, 8):  # crash while reopening it recovers, then reopen
            copy = tmp_path / f"{nth}-{again}"
            shutil.copytree(path, copy)
            _run(copy, again, 0)
            assert _check(copy, reached, references, nth) == reached
    assert nth > 50
