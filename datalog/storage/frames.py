"""Framed records: the on-disk unit of the durable log.

Layer: datalog (storage). Imports the standard library only.

A frame is `MAGIC (4 bytes) | length (u32) | crc32 of the payload (u32) |
payload`. A crash in the middle of an append leaves a frame cut short at the end
of the file (a torn frame): reading stops there, and recovery truncates the file
to the last whole frame. A whole frame whose checksum does not match, or bytes
that are not a frame, followed by more data, is corruption: reading raises
`CorruptLogError` naming the file and the offset, and nothing guesses past it.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from datalog.lang.errors import DatalogError

MAGIC = b"DLR1"
_HEADER = struct.Struct("<4sII")
HEADER_SIZE = _HEADER.size


class DurabilityError(DatalogError):
    """The durable store cannot be read or written as asked."""

    category = "fault"


class DatabaseLockedError(DurabilityError):
    """The database directory is open in another `Database` (this or another process)."""

    category = "conflict"


class CorruptLogError(DurabilityError):
    """A record in the middle of a log fails its checksum or is not a record."""

    def __init__(self, path: Path, offset: int, reason: str) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        super().__init__(
            f"corrupt record in {path} at byte offset {offset} ({reason}); "
            f"`deltalog recover {path.parent}` keeps every record before it"
        )


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


@dataclass(frozen=True)
class Scan:
    """The whole frames of a file, where they end, and what follows them."""

    payloads: list[bytes]
    good_end: int  # offset just past the last whole, valid frame
    torn: bool  # bytes after `good_end` are an unfinished last frame


def scan(path: Path, data: bytes | None = None) -> Scan:
    """Read every frame of `path`; raise `CorruptLogError` on corruption before the end."""
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as error:
            raise DurabilityError(f"cannot read the log segment {path}: {error.strerror}") from None
    payloads: list[bytes] = []
    at = 0
    while at < len(data):
        problem = _check(data, at)
        if problem is None:
            length = _HEADER.unpack_from(data, at)[1]
            payloads.append(data[at + HEADER_SIZE : at + HEADER_SIZE + length])
            at += HEADER_SIZE + length
            continue
        if _unfinished(data, at):
            return Scan(payloads, at, torn=True)
        raise CorruptLogError(path, at, problem)
    return Scan(payloads, at, torn=False)


def _check(data: bytes, at: int) -> str | None:
    """Why the frame at `at` is not whole and valid (None: it is)."""
    if len(data) - at < HEADER_SIZE:
        return "a header cut short"
    magic, length, crc = _HEADER.unpack_from(data, at)
    if magic != MAGIC:
        return "no record starts here"
    end = at + HEADER_SIZE + length
    if end > len(data):
        return "a record cut short"
    if zlib.crc32(data[at + HEADER_SIZE : end]) != crc:
        return "checksum mismatch"
    return None


def _unfinished(data: bytes, at: int) -> bool:
    """Whether the bytes from `at` are what an interrupted append leaves: a prefix of
    one frame running to the end of the file (or zeros a file system left there).

    A frame whose length field was corrupted also seems to run past the end: it is
    told apart by its payload, which is whole (its checksum matches the bytes up to
    the end of the file or up to a later frame), or by a whole frame after it."""
    rest = data[at:]
    if not rest.strip(b"\0"):
        return True
    if len(rest) < HEADER_SIZE:
        return MAGIC.startswith(rest[:4])
    magic, length, crc = _HEADER.unpack_from(data, at)
    if magic != MAGIC or at + HEADER_SIZE + length <= len(data):
        return False
    body = at + HEADER_SIZE
    later = [*_magic_offsets(data, body), len(data)]
    if any(zlib.crc32(data[body:end]) == crc for end in later):
        return False  # the payload is all there: its length is what is wrong
    return not any(_check(data, i) is None for i in later[:-1])


def _magic_offsets(data: bytes, start: int) -> list[int]:
    """Where the magic occurs in `data` from `start` on."""
    found, at = [], data.find(MAGIC, start)
    while at >= 0:
        found.append(at)
        at = data.find(MAGIC, at + 1)
    return found


def salvage(data: bytes) -> list[bytes]:
    """The payloads of every whole, valid frame found anywhere in `data`: what can
    still be read of bytes `deltalog recover` drops (to report their epochs)."""
    found = []
    for at in _magic_offsets(data, 0):
        if _check(data, at) is None:
            length = _HEADER.unpack_from(data, at)[1]
            found.append(data[at + HEADER_SIZE : at + HEADER_SIZE + length])
    return found
