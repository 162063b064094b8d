"""Every torn tail is cut and every corrupted byte is an error: the log never silently
drops an acknowledged record (a frame-level sweep over every offset, then the same
through `Database(path)` for the log and its snapshots)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datalog.db.database import Database
from datalog.storage.frames import CorruptLogError, DurabilityError, frame, scan
from datalog.storage.snapshots import MANIFEST, read_snapshot

PAYLOADS = [b"D.decl e(x: number)", b"C" + bytes(range(40)), b"", b"DLR1 inside", b"x" * 70]


def _log() -> tuple[bytes, list[int]]:
    """A log of PAYLOADS and the offsets where each frame ends."""
    data, ends = b"", []
    for payload in PAYLOADS:
        data += frame(payload)
        ends.append(len(data))
    return data, ends


def test_a_log_cut_at_any_offset_keeps_exactly_the_whole_frames_before_it() -> None:
    data, ends = _log()
    for cut in range(len(data) + 1):
        found = scan(Path("log"), data[:cut])
        whole = sum(1 for end in ends if end <= cut)
        assert found.payloads == PAYLOADS[:whole], cut
        assert found.good_end == (ends[whole - 1] if whole else 0)
        assert found.torn == (cut != found.good_end)


@pytest.mark.parametrize("mask", [0x01, 0x10, 0x80, 0xFF])
def test_any_corrupted_byte_is_an_error_never_a_shorter_log(mask: int) -> None:
    """A flipped bit in a length field made the frame look cut short by a crash: the
    records after it (or the last record itself) were silently dropped."""
    data, _ = _log()
    for at in range(len(data)):
        corrupted = bytearray(data)
        corrupted[at] ^= mask
        with pytest.raises(CorruptLogError):
            scan(Path("log"), bytes(corrupted))


def test_zeros_a_file_system_left_after_the_last_frame_are_a_torn_tail() -> None:
    data, ends = _log()
    found = scan(Path("log"), data + bytes(9))
    assert found.payloads == PAYLOADS and found.good_end == ends[-1] and found.torn


def _checkpointed(path: Path) -> Path:
    with Database(path) as db:
        db.define(".decl e(x: number, s: symbol)\n.decl u(x: unsigned)")
        db.insert("e", [(i, f"s{i}") for i in range(20)])
        db.insert("u", [(7,)])
        db.checkpoint()
    (snapshot,) = path.glob("snapshot-*")
    return snapshot


def test_any_corrupted_byte_of_a_snapshot_is_an_error(tmp_path: Path) -> None:
    """Arrow files carry no checksum: a flipped bit in a column loaded as another value."""
    snapshot = _checkpointed(tmp_path)
    for file in sorted(snapshot.iterdir()):
        data = file.read_bytes()
        for at in range(len(data)):
            file.write_bytes(data[:at] + bytes([data[at] ^ 0x04]) + data[at + 1 :])
            with pytest.raises(DurabilityError):
                read_snapshot(snapshot)
        file.write_bytes(data)
    with Database(tmp_path) as db:
        assert len(db.query("e(x, s)")) == 20


def test_a_corrupted_value_in_a_snapshot_is_never_loaded(tmp_path: Path) -> None:
    """With the log before it kept, opening replays that instead (ADR 0035); without
    it (as a directory written before ADR 0035 has), the open stops."""
    snapshot = _checkpointed(tmp_path)
    relation = snapshot / "r1.arrow"  # u: the relations are numbered in name order
    data = bytearray(relation.read_bytes())
    data[data.index(bytes([7]) + bytes(7))] = 8  # u(7) loaded as u(8)
    relation.write_bytes(bytes(data))
    with Database(tmp_path) as db:
        assert db.query("u(x)") == [(7,)]
    (tmp_path / "log-000000000000.bin").unlink()
    with pytest.raises(DurabilityError, match="checksum"):
        Database(tmp_path)


def test_a_snapshot_written_before_checksums_still_loads(tmp_path: Path) -> None:
    snapshot = _checkpointed(tmp_path)
    manifest = snapshot / MANIFEST
    plain = json.loads(scan(manifest).payloads[0])
    del plain["checksums"]
    manifest.write_text(json.dumps(plain))
    with Database(tmp_path) as db:
        assert db.query("u(x)") == [(7,)] and len(db.query("e(x, s)")) == 20


def test_a_corrupted_length_in_the_middle_of_the_log_stops_the_open(tmp_path: Path) -> None:
    with Database(tmp_path) as db:
        db.define(".decl e(x: number)")
        for i in range(3):
            db.insert("e", [(i,)])
    (segment,) = tmp_path.glob("log-*.bin")
    data = bytearray(segment.read_bytes())
    second = 12 + int.from_bytes(data[4:8], "little")
    data[second + 6] ^= 0x01  # its length now runs past the end of the file
    segment.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError, match=f"offset {second}"):
        Database(tmp_path)  # it opened at the definition's epoch, the commits gone


def test_a_database_whose_log_is_cut_anywhere_opens_at_the_last_whole_record(
    tmp_path: Path,
) -> None:
    """Through `Database(path)`: the state of the records wholly before the cut, the
    file cut back there, and a commit after it survives the next reopen."""
    source = tmp_path / "source"
    states = []
    with Database(source) as db:
        db.define(".decl e(x: number, s: symbol)\n.decl r(s: symbol)\nr(s) :- e(_, s).")
        states.append(sorted(db.query("r(s)")))
        for i in range(3):
            db.insert("e", [(i, f"s{i}"), (i + 10, "shared")])
            states.append(sorted(db.query("r(s)")))
    (segment,) = source.glob("log-*.bin")
    data = segment.read_bytes()
    found = scan(segment, data)
    ends, at = [], 0
    for payload in found.payloads:
        at += 12 + len(payload)
        ends.append(at)
    cuts = {c for end in [0, *ends[:-1]] for c in range(end, end + 14)}
    cuts |= set(range(0, len(data), max(1, len(data) // 30)))
    assert len(cuts) > 60
    for cut in sorted(c for c in cuts if c <= len(data)):
        path = tmp_path / str(cut)
        path.mkdir()
        (path / segment.name).write_bytes(data[:cut])
        whole = sum(1 for end in ends if end <= cut)
        with Database(path) as db:
            assert (path / segment.name).stat().st_size == (ends[whole - 1] if whole else 0)
            if whole == 0:
                assert "r" not in db.checked.schema.relations
                continue
            assert sorted(db.query("r(s)")) == states[whole - 1], cut
            db.insert("e", [(99, "after")])
        with Database(path) as db:
            assert sorted(db.query("r(s)")) == sorted([*states[whole - 1], ("after",)])
