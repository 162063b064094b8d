"""The durable store under failing system calls: whichever write, fsync, truncate,
open or rename fails (disk full, EIO), the operation either completes or raises and
changes nothing, the database stays usable, and reopening gives exactly the
acknowledged commits; and every file an acknowledged commit needs has its
directory entry fsynced."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from datalog.db.database import Database
from datalog.lang.errors import DatalogError
from datalog.storage import store as store_module
from datalog.storage.frames import DurabilityError

PROGRAM = """
.decl e(x: number, s: symbol)
.decl r(x: number)
r(x) :- e(x, _), !gone(x).
.decl gone(x: number)
"""
CALLS = ("write", "fsync", "ftruncate", "open", "rename", "unlink")


class Faults:
    """Makes the `nth` call (counted over CALLS together) raise `error`."""

    def __init__(self, nth: int, error: int) -> None:
        self.nth, self.error, self.calls, self.failed = nth, error, 0, False

    def wrap(self, real: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            self.calls += 1
            if self.calls == self.nth:
                self.failed = True
                raise OSError(self.error, os.strerror(self.error))
            return real(*args, **kwargs)

        return call


@contextmanager
def _faults(monkeypatch: pytest.MonkeyPatch, nth: int, error: int) -> Iterator[Faults]:
    faults = Faults(nth, error)
    with monkeypatch.context() as patch:
        for name in CALLS:
            patch.setattr(os, name, faults.wrap(getattr(os, name)))
        yield faults


OPERATIONS: dict[str, Callable[[Database], None]] = {
    "insert": lambda db: db.insert("e", [(7, "seven"), (8, "eight")]),
    "define": lambda db: db.define(".decl f(x: number)\nf(x) :- r(x).\nf(100)."),
    "redefine": lambda db: db.redefine("r", "r(x) :- e(x, _)."),
    "checkpoint": lambda db: db.checkpoint(),
    "due checkpoint": lambda db: (setattr(db, "checkpoint_every", 1), db.insert("gone", [(1,)])),
}


def _state(db: Database) -> tuple[object, ...]:
    relations = sorted(r for r in db.checked.schema.relations if not r.startswith("deltalog."))
    return (
        db.epoch,
        relations,
        sorted(db.query("e(x, s)")),
        sorted(db.query("r(x)")),
        sorted(db.query("f(x)")) if "f" in relations else None,
    )


def _prepare(path: Path) -> None:
    with Database(path) as db:
        db.define(PROGRAM)
        db.insert("e", [(1, "one"), (2, "two")])
        db.checkpoint()
        db.insert("e", [(3, "three")])


@pytest.mark.parametrize("error", [errno.EIO, errno.ENOSPC])
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_any_failing_system_call_fails_the_operation_cleanly(
    operation: str, error: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected: dict[bool, tuple[object, ...]] = {}
    for done in (False, True):  # the states a reopen may show: before and after
        path = tmp_path / f"expected-{done}"
        _prepare(path)
        with Database(path) as db:
            if done:
                OPERATIONS[operation](db)
            expected[done] = _state(db)
    nth = 0
    while True:
        nth += 1
        path = tmp_path / str(nth)
        _prepare(path)
        db = Database(path)
        with _faults(monkeypatch, nth, error) as faults:
            try:
                OPERATIONS[operation](db)
                acknowledged = True
            except DatalogError as failure:
                assert isinstance(failure, DurabilityError), failure
                acknowledged = False
        assert _state(db) == expected[acknowledged], (nth, faults.failed)
        assert db.store is not None and db.store.broken is None  # one fault: still usable
        db.insert("e", [(9, "after")])
        db.close()
        with Database(path) as again:
            assert _state(again)[2:] == _state(db)[2:] and again.epoch == db.epoch, nth
        if not faults.failed:
            return  # the operation made fewer calls than nth: every call was tried


def test_every_file_an_acknowledged_commit_needs_has_its_directory_entry_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new segment's (or a new database directory's) entry that was never fsynced
    can vanish in a machine crash, with every commit fsynced into it."""
    path = tmp_path / "new" / "db"
    synced: dict[Path, set[str]] = {}  # directory -> its entries at its last fsync
    real_fsync_dir = store_module._fsync_dir

    def fsync_dir(directory: Path) -> None:
        real_fsync_dir(directory)
        synced[Path(directory)] = {p.name for p in Path(directory).iterdir()}

    def durable_now() -> None:
        assert path.name in synced.get(path.parent, set())
        needed = {p.name for p in path.iterdir() if p.name != "LOCK"}
        assert needed <= synced.get(path, set()), needed - synced.get(path, set())

    monkeypatch.setattr(store_module, "_fsync_dir", fsync_dir)
    with Database(path, checkpoint_every=3) as db:
        db.define(PROGRAM)
        durable_now()
        for i in range(8):  # through two automatic checkpoints
            db.insert("e", [(i, "x")])
            durable_now()
        db.checkpoint()
        db.insert("e", [(100, "y")])
        durable_now()


def test_a_failed_commit_whose_record_cannot_be_cut_off_closes_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine fails, then so does the truncation that removes the commit's record:
    the OSError used to replace the engine's exception and the next commits were
    logged after a record whose commit never happened (the log then replayed to a
    different epoch and the database could not be opened)."""
    _prepare(tmp_path)
    db = Database(tmp_path)
    state = _state(db)

    def fail(requests: object, sealing: object = None) -> int:
        raise MemoryError

    with monkeypatch.context() as patch:
        patch.setattr(db.engine, "commit", fail)
        patch.setattr(os, "ftruncate", Faults(1, errno.EIO).wrap(os.ftruncate))
        with pytest.raises(MemoryError):
            db.insert("e", [(5, "five")])
    assert _state(db) == state
    with pytest.raises(DurabilityError, match="reopen"):
        db.insert("e", [(6, "six")])
    with pytest.raises(DurabilityError, match="reopen"):
        db.checkpoint()
    assert _state(db) == state and db.query("r(x)")  # still readable
    db.close()
    with Database(tmp_path) as again:  # the record stayed: its commit replays
        assert sorted(again.query("e(x, s)")) == sorted([*state[2], (5, "five")])  # type: ignore[misc]


@pytest.mark.parametrize("where", ["in fsync", "after append", "define in fsync"])
def test_an_interrupt_while_the_record_is_written_leaves_no_record(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt between writing a commit's record and applying it (inside
    the fsync, or just after the append returned) left the record in the log but
    not the commit in memory: the next commits were logged at epochs the replay never
    reached, and the database could not be opened."""
    _prepare(tmp_path)
    db = Database(tmp_path)
    state = _state(db)
    real_append = store_module.Store.append

    def append_then_interrupt(self: store_module.Store, record: object) -> None:
        real_append(self, record)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        if where == "after append":
            patch.setattr(store_module.Store, "append", append_then_interrupt)
        else:
            patch.setattr(os, "fsync", _interrupting(os.fsync))
        with pytest.raises(KeyboardInterrupt):
            if where.startswith("define"):
                db.define(".decl f(x: number)\nf(1).")
            else:
                db.insert("e", [(5, "five")])
    assert _state(db) == state
    db.insert("e", [(6, "six")])
    expected = _state(db)
    db.close()
    with Database(tmp_path) as again:
        assert _state(again) == expected


def _interrupting(real: Callable[..., object]) -> Callable[..., object]:
    calls = [0]

    def call(*args: object) -> object:
        calls[0] += 1
        if calls[0] == 1:
            raise KeyboardInterrupt
        return real(*args)

    return call


def test_bytes_past_the_last_acknowledged_record_are_cut_before_the_next(
    tmp_path: Path,
) -> None:
    """What an append or undo interrupted half-way leaves after the last whole record
    is no record: the next append starts where the last acknowledged one ended."""
    _prepare(tmp_path)
    db = Database(tmp_path)
    assert db.store is not None
    with db.store.segment.open("ab") as log:
        log.write(b"DLR1\xff\x00\x00\x00 half a record")
    db.insert("e", [(6, "six")])
    expected = _state(db)
    db.close()
    with Database(tmp_path) as again:
        assert _state(again) == expected


def test_a_checkpoint_is_on_disk_before_it_deletes_what_it_covers_even_without_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With sync=False a checkpoint renamed a snapshot whose files were never fsynced
    and deleted the log: a machine crash could leave neither readable."""
    events: list[str] = []
    real_fsync, real_unlink = os.fsync, os.unlink

    def fsync(fd: int) -> None:
        events.append("fsync " + os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def unlink(path: object, *args: object, **kwargs: object) -> None:
        events.append(f"unlink {path}")
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    with Database(tmp_path, sync=False) as db:
        db.define(PROGRAM)
        db.insert("e", [(1, "one")])
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "unlink", unlink)
        db.checkpoint()
        db.insert("e", [(2, "two")])
        db.checkpoint()  # the second deletes the log before the first
    snapshots = sorted(tmp_path.glob("snapshot-*"))
    assert len(snapshots) == 2 and not (tmp_path / "log-000000000000.bin").exists()
    deleted = next(i for i, e in enumerate(events) if e.startswith("unlink") and "log-" in e)
    synced = set()
    for event in events[:deleted]:
        if event.startswith("fsync"):
            path = Path(event.split(" ", 1)[1])
            tmp = path.parent.suffix == ".tmp"  # written there, then renamed
            synced.add(path.parent.with_suffix("") / path.name if tmp else path)
    needed = [tmp_path, tmp_path / "log-000000000001.bin"]  # the log since the older
    assert {p.resolve() for s in snapshots for p in [*s.iterdir(), *needed]} <= synced


def test_bytes_past_the_last_acknowledged_record_are_cut_before_a_checkpoint_moves_on(
    tmp_path: Path,
) -> None:
    """The segment a checkpoint leaves is replayed again if the newest snapshot is
    damaged: what an interrupted append left after its last record must not be."""
    _prepare(tmp_path)
    db = Database(tmp_path)
    assert db.store is not None
    with db.store.segment.open("ab") as log:
        log.write(b"DLR1\xff\x00\x00\x00 half a record")
    db.checkpoint()
    db.insert("e", [(6, "six")])
    expected = _state(db)
    db.close()
    newest = max(tmp_path.glob("snapshot-*"))
    (newest / "manifest.json").write_bytes(b"damaged")
    with Database(tmp_path) as again:
        assert _state(again) == expected
