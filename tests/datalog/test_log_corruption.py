"""Every torn tail is cut and every corrupted byte is an error: the log never silently
drops an acknowledged record (a frame-level sweep over every offset, then the same
through `Database(path)` for the log and its snapshots)."""

from __future__ import annotations

from pathlib import Path

import pytest

from datalog.database import Database
from datalog.storage.frames import CorruptLogError, DurabilityError, frame, scan

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
