"""`deltalog recover DIR` through the command line: it repairs what can be repaired
(an unfinished or corrupt log tail, a damaged snapshot, leftover temporaries, a
record that does not replay), prints what it did and which epochs were lost,
moves what it drops aside instead of deleting it, and exits 0 only once the
database opens."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from datalog.cli.commands import main
from datalog.db.database import Database
from datalog.storage import frames
from datalog.storage.records import Define, encode
from datalog.storage.snapshots import MANIFEST

PROGRAM = """
.decl e(x: number)
.decl r(x: number)
r(x) :- e(x), x > 1.
"""


def _recover(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["recover", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def _rows(path: Path) -> tuple[int, list[tuple[object, ...]]]:
    with Database(path) as db:
        return db.epoch, sorted(db.query("e(x)"))


def _commits(path: Path, rows: range, checkpoint_at: tuple[int, ...] = ()) -> None:
    """Define (epoch 1... after the unit's), then one commit per row."""
    with Database(path) as db:
        if "e" not in db.checked.schema.relations:
            db.define(PROGRAM)
        for i in rows:
            db.insert("e", [(i,)])
            if i in checkpoint_at:
                db.checkpoint()


def _frame_offsets(segment: Path) -> list[int]:
    found, at = [], 0
    for payload in frames.scan(segment).payloads:
        found.append(at)
        at += frames.HEADER_SIZE + len(payload)
    return found


def test_a_sound_database_needs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _commits(tmp_path, range(3))
    before = _rows(tmp_path)
    code, out, _ = _recover(tmp_path, capsys)
    assert code == 0
    assert "nothing to repair" in out and "lost: no acknowledged commit" in out
    assert f"opens at epoch {before[0]}" in out and _rows(tmp_path) == before


def test_an_unfinished_last_record_is_cut_and_nothing_acknowledged_is_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _commits(tmp_path, range(3))
    before = _rows(tmp_path)
    (segment,) = tmp_path.glob("log-*.bin")
    with segment.open("ab") as log:
        log.write(frames.frame(b"C" + bytes(40))[:20])
    code, out, _ = _recover(tmp_path, capsys)
    assert code == 0 and "cut an unfinished last record" in out
    assert "lost: no acknowledged commit" in out and _rows(tmp_path) == before


def test_a_corrupt_record_cuts_the_log_there_and_reports_the_epochs_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _commits(tmp_path, range(6))
    (segment,) = tmp_path.glob("log-*.bin")
    offsets = _frame_offsets(segment)  # the definition, then commits of rows 0..5
    with Database(tmp_path) as db:
        last = db.epoch
    data = bytearray(segment.read_bytes())
    data[offsets[3] + 20] ^= 0xFF  # the commit of row 2
    segment.write_bytes(bytes(data))
    code, out, _ = _recover(tmp_path, capsys)
    assert code == 0, out
    epoch, rows = _rows(tmp_path)
    assert rows == [(0,), (1,)]
    assert "corrupt record" in out and "kept the 3 records before it" in out
    assert f"lost: epochs {epoch + 1} to {last}" in out
    saved = tmp_path / f"{segment.name}.dropped"
    assert saved.read_bytes() == bytes(data[offsets[3] :])  # aside, not deleted
    _commits(tmp_path, range(10, 11))  # and the database goes on
    assert _rows(tmp_path)[1] == [(0,), (1,), (10,)]


def test_a_damaged_snapshot_is_moved_aside_and_the_log_replayed_instead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    _commits(tmp_path, range(6), checkpoint_at=(1, 3))
    before = _rows(tmp_path)
    newest = max(tmp_path.glob("snapshot-*"))
    (newest / MANIFEST).write_bytes(b"damaged")
    code, out, _ = _recover(tmp_path, capsys)
    assert code == 0
    assert f"moved it to {newest.name}.damaged" in out and "lost: no acknowledged commit" in out
    caplog.clear()
    assert _rows(tmp_path) == before
    assert not caplog.records  # no damaged snapshot left to skip


def test_a_corrupt_older_segment_behind_a_damaged_snapshot_drops_the_later_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Snapshot 2 is damaged, so opening needs log 1 whole: it is cut at its corrupt
    record and log 2, which continues after what is lost, is moved aside."""
    _commits(tmp_path, range(8), checkpoint_at=(1, 4))
    with Database(tmp_path) as db:
        last = db.epoch
    (tmp_path / "snapshot-000000000002" / "r0.arrow").write_bytes(b"damaged")
    segment = tmp_path / "log-000000000001.bin"
    data = bytearray(segment.read_bytes())
    data[_frame_offsets(segment)[1] + 3] ^= 0x01  # the commit of row 3: its magic
    segment.write_bytes(bytes(data))
    code, out, _ = _recover(tmp_path, capsys)
    assert code == 0, out
    epoch, rows = _rows(tmp_path)
    assert rows == [(0,), (1,), (2,)]
    assert "moved log-000000000002.bin to log-000000000002.bin.dropped" in out
    assert f"lost: epochs {epoch + 1} to {last}" in out


def test_leftover_temporaries_are_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _commits(tmp_path, range(2), checkpoint_at=(0,))
    shutil.copytree(max(tmp_path.glob("snapshot-*")), tmp_path / "snapshot-000000000007.tmp")
    code, out, _ = _recover(tmp_path, capsys)
    assert code == 0 and "deleted snapshot-000000000007.tmp" in out
    assert not (tmp_path / "snapshot-000000000007.tmp").exists()


def test_a_segment_that_is_a_directory_is_moved_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _commits(tmp_path, range(3), checkpoint_at=(1,))
    before = _rows(tmp_path)
    bad = tmp_path / "log-000000000002.bin"
    bad.mkdir()
    code, out, _ = _recover(tmp_path, capsys)
    assert code == 0 and "cannot read the log segment log-000000000002.bin" in out
    assert (tmp_path / "log-000000000002.bin.dropped").is_dir() and _rows(tmp_path) == before


def test_a_record_that_does_not_replay_is_cut_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ADR 0032: a record that could not be cut off replays the commit that failed;
    if it fails again, `deltalog recover` is the way out."""
    _commits(tmp_path, range(3))
    before = _rows(tmp_path)
    (segment,) = tmp_path.glob("log-*.bin")
    with segment.open("ab") as log:
        log.write(frames.frame(encode(Define("this is not datalog"))))
    with pytest.raises(frames.CorruptLogError, match="does not replay"):
        Database(tmp_path)
    code, out, _ = _recover(tmp_path, capsys)
    assert code == 0, out
    assert "does not replay" in out and _rows(tmp_path) == before


def test_it_exits_non_zero_when_the_database_still_does_not_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _commits(tmp_path, range(2))
    db = Database(tmp_path)  # open: recover must not touch it
    code, _, err = _recover(tmp_path, capsys)
    assert code == 1 and "already open" in err
    db.close()
    code, _, err = _recover(tmp_path / "nowhere", capsys)
    assert code == 1 and "is not a directory" in err


def test_with_nothing_to_fall_back_to_it_keeps_the_empty_start_and_says_what_was_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory written before ADR 0035 keeps one snapshot and no log before it."""
    path = tmp_path / "db"
    shutil.copytree(Path(__file__).parent / "golden" / "durable-main", path)
    (path / "snapshot-000000000001" / "r0.arrow").write_bytes(b"damaged")
    code, out, _ = _recover(path, capsys)
    assert code == 0, out
    assert "opens at epoch 1" in out  # empty: the snapshot (epoch 3) held all before 4
    assert "lost: epochs 2 to 5" in out  # 3 from its manifest, 4 and 5 from the log
    assert (path / "snapshot-000000000001.damaged" / MANIFEST).exists()
    assert (path / "log-000000000001.bin.dropped").exists()
