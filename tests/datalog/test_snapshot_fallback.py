"""Two snapshots and the log since the older are kept (ADR 0035): a damaged newest
snapshot is skipped with a warning and the log replayed instead, losing nothing;
when nothing is left to fall back to, the error names the directory the user
opened for `deltalog recover`; a directory written before this (one snapshot)
still opens; and every odd thing found in the directory is a `DurabilityError`
naming its path, never a raw `OSError`."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from datalog.db.database import Database
from datalog.lang.errors import DatalogError
from datalog.storage import frames
from datalog.storage.frames import DurabilityError
from datalog.storage.snapshots import MANIFEST
from tests.datalog.test_durability import _legacy

PROGRAM = """
.decl e(x: number, s: symbol)
.decl r(x: number)
r(x) :- e(x, _), x > 1.
"""
GOLDEN = Path(__file__).parent / "golden" / "durable-main"


def _state(db: Database) -> tuple[object, ...]:
    return (db.epoch, sorted(db.query("e(x, s)")), sorted(db.query("r(x)")))


def _build(path: Path, checkpoints: int) -> tuple[object, ...]:
    """A database with `checkpoints` checkpoints and commits before and after each."""
    with Database(path) as db:
        db.define(PROGRAM)
        for i in range(checkpoints):
            db.insert("e", [(10 * i + 1, f"a{i}"), (10 * i + 2, f"b{i}")])
            db.checkpoint()
            db.retract("e", [(10 * i + 1, f"a{i}")])
        db.insert("e", [(99, "last")])
        return _state(db)


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at % len(data)] ^= 0x20
    path.write_bytes(bytes(data))


def _replace_with_directory(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    path.mkdir()


DAMAGES: dict[str, Callable[[Path], None]] = {
    "manifest byte": lambda s: _flip(s / MANIFEST, 40),
    "manifest header": lambda s: _flip(s / MANIFEST, 5),
    "symbols byte": lambda s: _flip(s / "symbols.arrow", 100),
    "relation byte": lambda s: _flip(s / "r0.arrow", 200),
    "relation cut short": lambda s: os.truncate(s / "r0.arrow", 50),
    "relation missing": lambda s: (s / "r1.arrow").unlink(),
    "manifest missing": lambda s: (s / MANIFEST).unlink(),
    "manifest a directory": lambda s: _replace_with_directory(s / MANIFEST),
    "snapshot a file": lambda s: (shutil.rmtree(s), s.write_bytes(b"not a snapshot")),
    "snapshot empty": _replace_with_directory,
}


@pytest.mark.parametrize("checkpoints", [1, 3])
@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_newest_snapshot_is_skipped_with_a_warning_and_loses_nothing(
    damage: str, checkpoints: int, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With one checkpoint the empty database and the first segment are the fallback."""
    expected = _build(tmp_path, checkpoints)
    newest = max(tmp_path.glob("snapshot-*"))
    DAMAGES[damage](newest)
    with caplog.at_level(logging.WARNING, "deltalog"), Database(tmp_path) as db:
        assert _state(db) == expected
        db.insert("e", [(100, "after")])
        db.checkpoint()  # replaces the damaged one
        db.insert("e", [(101, "later")])
        expected = _state(db)
    assert [r for r in caplog.records if str(newest) in r.getMessage() and "skipped" in r.message]
    with Database(tmp_path) as again:
        assert _state(again) == expected


def test_after_many_checkpoints_either_kept_snapshot_may_be_damaged(tmp_path: Path) -> None:
    source = tmp_path / "source"
    with Database(source, checkpoint_every=3) as db:
        db.define(PROGRAM)
        for i in range(20):
            db.insert("e", [(i, f"s{i}")])
            if i % 4 == 0:
                db.retract("e", [(i, f"s{i}")])
        expected = _state(db)
    snapshots = sorted(p.name for p in source.glob("snapshot-*"))
    assert len(snapshots) == 2
    for name in snapshots:
        copy = tmp_path / name
        shutil.copytree(source, copy)
        _flip(copy / name / "r0.arrow", 60)
        with Database(copy) as db:
            assert _state(db) == expected, name


def test_a_checkpoint_deletes_what_is_older_than_the_previous_snapshot_only_once_verified(
    tmp_path: Path,
) -> None:
    """A damaged previous snapshot does not count: the one before it stays too."""
    _build(tmp_path, 2)
    _flip(tmp_path / "snapshot-000000000002" / "r0.arrow", 10)
    with Database(tmp_path) as db:  # from snapshot 1: 2 is damaged
        db.checkpoint()  # snapshot 3; snapshot 2 is damaged: snapshot 1 stays
        assert (tmp_path / "snapshot-000000000001").is_dir()
        assert (tmp_path / "log-000000000001.bin").exists()
        expected = _state(db)
    shutil.rmtree(tmp_path / "snapshot-000000000003")
    with Database(tmp_path) as db:  # from snapshot 1 and the whole log after it
        assert _state(db) == expected


@pytest.mark.parametrize("layout", ["one snapshot", "two snapshots"])
def test_when_nothing_is_left_to_fall_back_to_the_error_names_the_opened_directory(
    layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It used to name the snapshot's own directory for `deltalog recover`."""
    monkeypatch.chdir(tmp_path)
    if layout == "one snapshot":  # as written before ADR 0035: no log before it
        shutil.copytree(GOLDEN, "db")
    else:
        _build(Path("db"), 2)
        _flip(Path("db/snapshot-000000000001") / MANIFEST, 30)
    _flip(max(Path("db").glob("snapshot-*")) / MANIFEST, 30)
    with pytest.raises(DurabilityError) as caught:
        Database("db")
    message = caught.value.message
    assert "`deltalog recover db`" in message and "recover db/" not in message, message


def test_a_directory_written_before_two_snapshots_were_kept_opens_and_moves_on(
    tmp_path: Path,
) -> None:
    """`golden/durable-main` was written by the code before ADR 0035 (one snapshot,
    the log after it): define, insert three rows, checkpoint, retract one, insert one."""
    path = tmp_path / "db"
    shutil.copytree(GOLDEN, path)
    expected = (5, [(2, "two"), (3, "three"), (4, "four")], [(2,), (3,), (4,)])
    with Database(path) as db:
        assert _state(db) == expected
        db.insert("e", [(5, "five")])
        db.checkpoint()
        db.insert("e", [(6, "six")])
        expected = _state(db)
    names = sorted(p.name for p in path.iterdir())
    assert names == [
        "LOCK",
        "log-000000000001.bin",
        "log-000000000002.bin",
        "snapshot-000000000001",
        "snapshot-000000000002",
    ]
    _flip(path / "snapshot-000000000002" / MANIFEST, 30)
    with Database(path) as db:
        assert _state(db) == expected


def _record_of_unknown_kind(path: Path) -> None:
    with Database(path) as db:
        db.define(PROGRAM)
    with (path / "log-000000000000.bin").open("ab") as log:
        log.write(frames.frame(b"Zsomething new"))


ODDITIES: dict[str, tuple[Callable[[Path], object], str]] = {
    "segment is a directory": (lambda p: (p / "log-000000000000.bin").mkdir(), "log-0"),
    "segment is a dangling link": (
        lambda p: (p / "log-000000000000.bin").symlink_to(p / "nowhere"),
        "log-0",
    ),
    "LOCK is a directory": (lambda p: (p / "LOCK").mkdir(), "LOCK"),
    "database is a file": (lambda p: p.write_text("x"), ""),
    "a record of an unknown kind": (_record_of_unknown_kind, "log-0"),
}


@pytest.mark.parametrize("oddity", list(ODDITIES))
def test_every_odd_entry_is_a_durability_error_naming_its_path(oddity: str, tmp_path: Path) -> None:
    """A segment that is a directory raised a raw IsADirectoryError."""
    path = tmp_path / "db"
    make, entry = ODDITIES[oddity]
    if oddity != "database is a file":
        path.mkdir()
    make(path)
    with pytest.raises(DurabilityError) as caught:
        Database(path)
    assert isinstance(caught.value, DatalogError)
    named = str(path / entry.replace("log-0", "log-000000000000.bin")) if entry else str(path)
    assert named in caught.value.message, caught.value.message


def test_names_that_are_not_the_stores_are_left_alone(tmp_path: Path) -> None:
    expected = _build(tmp_path, 1)
    (tmp_path / "log-abc.bin").write_text("not ours")
    (tmp_path / "snapshot-000000000009.tmp").write_text("a file where a temporary was")
    (tmp_path / "notes").mkdir()
    with Database(tmp_path) as db:
        assert _state(db) == expected
    assert (tmp_path / "log-abc.bin").exists() and (tmp_path / "notes").is_dir()
    assert not (tmp_path / "snapshot-000000000009.tmp").exists()


def test_a_damaged_snapshot_with_no_commit_after_it_is_replaced_by_the_next_checkpoint(
    tmp_path: Path,
) -> None:
    """Its segment was never created: opening stops the log before it, and the next
    checkpoint takes its sequence number (the damaged one used to block the rename)."""
    with Database(tmp_path) as db:
        db.define(PROGRAM)
        db.insert("e", [(1, "one"), (2, "two")])
        db.checkpoint()
        expected = _state(db)
    _flip(tmp_path / "snapshot-000000000001" / MANIFEST, 30)
    with Database(tmp_path) as db:
        assert _state(db) == expected
        db.checkpoint()
        db.insert("e", [(3, "three")])
        expected = _state(db)
    with Database(tmp_path) as db:
        assert _state(db) == expected


def test_a_migrated_legacy_log_survives_one_damaged_snapshot(tmp_path: Path) -> None:
    """The log before the migration's snapshots holds none of the legacy records: it
    checkpoints twice, and opening never falls back to the empty database past them
    (as a crash between the two checkpoints would leave it)."""
    _legacy(tmp_path)
    with Database(tmp_path) as db:
        expected = sorted(db.query("m(x, s)"))
        assert expected == [(1, "a")]
    first, second = sorted(tmp_path.glob("snapshot-*"))
    _flip(second / MANIFEST, 30)
    with Database(tmp_path) as db:
        assert sorted(db.query("m(x, s)")) == expected
    shutil.rmtree(second)  # a crash before the second checkpoint: log 0 is still there
    (tmp_path / "log-000000000000.bin").touch()
    _flip(first / MANIFEST, 30)
    with pytest.raises(DurabilityError, match=r"migrated from log\.jsonl"):
        Database(tmp_path)


def test_a_previous_snapshot_without_checksums_counts_only_if_it_reads_whole(
    tmp_path: Path,
) -> None:
    """A manifest written before checksums cannot vouch for its files: a checkpoint
    reads such a previous snapshot whole before deleting the log before it."""
    with Database(tmp_path) as db:
        db.define(PROGRAM)
        db.insert("e", [(1, "one"), (2, "two")])
        db.checkpoint()
    manifest = tmp_path / "snapshot-000000000001" / MANIFEST
    plain = json.loads(frames.scan(manifest).payloads[0])
    del plain["checksums"]
    manifest.write_text(json.dumps(plain))
    os.truncate(tmp_path / "snapshot-000000000001" / "r0.arrow", 40)
    with Database(tmp_path) as db:  # snapshot 1 does not read: the log from the start
        db.insert("e", [(3, "three")])
        db.checkpoint()
        db.insert("e", [(4, "four")])
        expected = _state(db)
    assert (tmp_path / "log-000000000000.bin").exists()
    _flip(tmp_path / "snapshot-000000000002" / MANIFEST, 30)
    with Database(tmp_path) as db:
        assert _state(db) == expected


def test_after_a_fallback_the_log_goes_on_past_the_skipped_snapshot(tmp_path: Path) -> None:
    """A snapshot that could not be read once (an I/O error) may read again later:
    commits made meanwhile must be in a segment opening replays after it."""
    with Database(tmp_path) as db:
        db.define(PROGRAM)
        db.insert("e", [(1, "one"), (2, "two")])
        db.checkpoint()  # snapshot 1, and no commit after it
    manifest = tmp_path / "snapshot-000000000001" / MANIFEST
    good = manifest.read_bytes()
    manifest.write_bytes(b"unreadable for now")
    with Database(tmp_path) as db:
        db.insert("e", [(3, "three")])
        expected = _state(db)
    manifest.write_bytes(good)
    with Database(tmp_path) as db:
        assert _state(db) == expected
