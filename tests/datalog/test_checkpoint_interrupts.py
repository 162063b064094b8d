"""A KeyboardInterrupt or MemoryError anywhere in a checkpoint: before every line of
the storage code it runs, and right after each of its system calls returns (a
signal arriving as the call ends). After any of them, the next commits are
acknowledged only if opening sees them: the database keeps working, reopening (or
a crash right after those commits) shows every acknowledged commit, and a damaged
newest snapshot afterwards still loses nothing.

Before ADR 0035, an interrupt just after the snapshot's rename left the store
appending to the segment before it, which opening skips: acknowledged commits
vanished silently."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import datalog.db.durable
import datalog.storage
from datalog.db.database import Database
from datalog.storage.snapshots import MANIFEST

PROGRAM = """
.decl e(x: number, s: symbol)
.decl r(x: number)
r(x) :- e(x, _), x > 1.
"""
TRACED = {str(p) for p in Path(datalog.storage.__file__).parent.glob("*.py")}
TRACED.add(str(Path(datalog.db.durable.__file__)))
CALLS = ("write", "fsync", "ftruncate", "truncate", "open", "close", "lseek", "rename",
         "unlink", "mkdir", "rmdir", "listdir", "scandir")  # fmt: skip
ERRORS: tuple[type[BaseException], ...] = (KeyboardInterrupt, MemoryError)
# An interrupt just before a `with` block's __enter__ or __exit__ leaves its file (or
# directory iterator) to the garbage collector, which closes it: what is tested here
# is what reaches the disk.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Exception ignored in.*(FileIO|ScandirIterator):pytest.PytestUnraisableExceptionWarning"
)


class Interrupt:
    """Raises `error` at the `nth` point of kind `where`: "line" (before a line of the
    storage code runs for the first time: a loop's later rounds add nothing but what
    "call" tries) or "call" (just after a system call of CALLS returned)."""

    def __init__(self, where: str, nth: int, error: type[BaseException]) -> None:
        self.where, self.nth, self.error = where, nth, error
        self.count, self.fired = 0, False
        self.lines: set[tuple[str, int]] = set()

    def point(self) -> None:
        self.count += 1
        if self.count == self.nth:
            self.fired = True
            raise self.error

    def trace(self, frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code.co_filename not in TRACED:
            return None
        return self.line

    def line(self, frame: FrameType, event: str, arg: object) -> Any:
        where = (frame.f_code.co_filename, frame.f_lineno)
        if event == "line" and not self.fired and where not in self.lines:
            self.lines.add(where)
            self.point()
        return self.line

    def wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            result = real(*args, **kwargs)
            if not self.fired:
                self.point()
            return result

        return call


@contextmanager
def _injected(interrupt: Interrupt, patch: pytest.MonkeyPatch) -> Iterator[None]:
    if interrupt.where == "call":
        for name in CALLS:
            patch.setattr(os, name, interrupt.wrap(getattr(os, name)))
        yield
        return
    sys.settrace(interrupt.trace)
    try:
        yield
    finally:
        sys.settrace(None)


def _state(db: Database) -> tuple[object, ...]:
    return (db.epoch, sorted(db.query("e(x, s)")), sorted(db.query("r(x)")))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database with a snapshot and commits after it."""
    path = tmp_path_factory.mktemp("template") / "db"
    with Database(path) as db:
        db.define(PROGRAM)
        db.insert("e", [(1, "one"), (2, "two")])
        db.checkpoint()
        db.insert("e", [(3, "three")])
        db.retract("e", [(1, "one")])
    return path


def _damage_newest_snapshot(path: Path) -> None:
    newest = max(path.glob("snapshot-*[0-9]"))
    manifest = newest / MANIFEST
    data = bytearray(manifest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    manifest.write_bytes(bytes(data))


def _one(template: Path, tmp_path: Path, interrupt: Interrupt, patch: pytest.MonkeyPatch) -> None:
    """Interrupt one checkpoint at `interrupt`'s point, then check every promise."""
    path, crashed = tmp_path / "db", tmp_path / "crashed"
    shutil.copytree(template, path)
    db = Database(path)
    before = _state(db)
    try:
        with patch.context() as inner, _injected(interrupt, inner):
            db.checkpoint()
    except interrupt.error:
        assert interrupt.fired
    assert _state(db) == before
    db.insert("e", [(100, "after")])
    db.retract("e", [(2, "two")])
    acknowledged = _state(db)
    shutil.copytree(path, crashed)  # what a crash right now would leave
    db.checkpoint()
    db.insert("e", [(101, "later")])
    final = _state(db)
    db.close()
    for where, expected in ((crashed, acknowledged), (path, final)):
        with Database(where) as again:
            assert _state(again) == expected, (interrupt.where, interrupt.nth, where.name)
    _damage_newest_snapshot(path)
    with Database(path) as again:
        assert _state(again) == final, (interrupt.where, interrupt.nth, "damaged")


def _sweep(
    template: Path, tmp_path: Path, patch: pytest.MonkeyPatch, where: str, every: int
) -> int:
    """Interrupt at points 1, 1 + every, ... (KeyboardInterrupt and MemoryError in
    turn) until a checkpoint runs past the last point; returns how many were tried."""
    tried, nth = 0, 1
    while True:
        interrupt = Interrupt(where, nth, ERRORS[tried % len(ERRORS)])
        _one(template, tmp_path / f"{where}-{nth}", interrupt, patch)
        if not interrupt.fired:
            return tried
        tried, nth = tried + 1, nth + every


@pytest.mark.parametrize("where", ["line", "call"])
def test_an_interrupt_at_sampled_points_of_a_checkpoint_loses_no_acknowledged_commit(
    where: str, template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    every = 11 if where == "line" else 3
    assert _sweep(template, tmp_path, monkeypatch, where, every) > 4


@pytest.mark.slow
@pytest.mark.exhaustive
@pytest.mark.parametrize("where", ["line", "call"])
def test_an_interrupt_at_every_point_of_a_checkpoint_loses_no_acknowledged_commit(
    where: str, template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _sweep(template, tmp_path, monkeypatch, where, 1) > (100 if where == "line" else 15)


def test_an_interrupt_just_after_the_snapshot_is_renamed_loses_no_commit(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The point the fault audit found: the rename happened, then Ctrl-C."""
    real = os.rename

    def rename(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        raise KeyboardInterrupt

    path = tmp_path / "db"
    shutil.copytree(template, path)
    db = Database(path)
    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(os, "rename", rename)
        db.checkpoint()
    db.insert("e", [(100, "after")])
    acknowledged = _state(db)
    db.close()
    with Database(path) as again:
        assert _state(again) == acknowledged
