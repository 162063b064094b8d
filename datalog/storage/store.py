"""The durable directory of a database: a lock, snapshots and log segments.

Layer: datalog (storage). Imports the standard library and the other storage
modules.

Layout of `Database(path)` (`datalog.storage.layout`):

    LOCK                   locked (flock) while open, as is the directory itself
    snapshot-<seq>/        a checkpoint: manifest.json, symbols.arrow, r<i>.arrow
    log-<seq>.bin          framed records committed after snapshot <seq> (0: the start)

The lock is an `flock` on the directory's own file descriptor (and on `LOCK`,
which is all that versions before ADR 0035 lock): deleting `LOCK` lets no second
writer in.

Write order: a record is appended and (unless `sync=False`) fsynced, with the
directory once after a new entry, before its commit touches memory; if the
write fails, the file is cut back and nothing changes; if the commit does not
happen after all, `undo(end)` cuts the log back to `end` as it was before. A log
that cannot be cut back takes no more writes (`broken`). Where the log goes on
is one immutable `Tail`, replaced whole, so an interrupt leaves the old or the
new, never half of each.

A checkpoint (fsynced whatever `sync` says) cuts the segment back to its last
acknowledged record, moves the log on to the next segment (opening replays it
after the old one even if the snapshot never lands), writes `snapshot-<seq>.tmp/`,
renames it into place, fsyncs the directory and reads the snapshot back against
its checksums; only then does it delete what is older than the previous
snapshot that verifies. Two snapshots and the log since the older stay, so
opening can fall back from a damaged newest one (`layout.choose_start`). A torn
last frame (a crash during an append) is cut off with `os.truncate`, never by
rewriting the file. See ADRs 0013, 0032 and 0035.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from datalog.storage.frames import (
    HEADER_SIZE,
    CorruptLogError,
    DatabaseLockedError,
    DurabilityError,
    frame,
    scan,
)
from datalog.storage.layout import (
    LOCK,
    choose_start,
    list_directory,
    name,
    remove,
    sequence,
    snapshot_bytes,
)
from datalog.storage.records import Record, decode, encode
from datalog.storage.snapshots import Snapshot, verify_snapshot, write_snapshot
from datalog.storage.snapshots import fsync_dir as _fsync_dir

_log = logging.getLogger("deltalog")


@dataclass(frozen=True)
class Logged:
    """A record read back, and where it starts (to name it if it does not replay)."""

    record: Record
    segment: Path
    offset: int


@dataclass(frozen=True)
class Tail:
    """The segment commits go to, where its last acknowledged record ends (what is
    after is no record), and how many records it holds."""

    seq: int
    end: int
    records: int


class Store:
    """One writer's handle on a durable directory (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], sync: bool = True) -> None:
        self.dir = Path(path)
        _create(self.dir, sync)
        locks = _lock(self.dir)
        # a database dropped without close() still releases its lock when collected
        self._finalizer = weakref.finalize(self, _release, locks)
        self.sync = sync
        self.tail = Tail(0, 0, 0)
        self.snapshot_bytes = 0
        self.dir_synced = False  # the directory was fsynced since its last new entry
        self.broken: str | None = None  # why the log cannot be written any more

    @property
    def seq(self) -> int:
        return self.tail.seq

    @property
    def end(self) -> int:
        return self.tail.end

    @property
    def records(self) -> int:
        return self.tail.records

    @property
    def segment(self) -> Path:
        return self.dir / name("log", self.tail.seq, ".bin")

    # -- opening -----------------------------------------------------------------

    def recover(self) -> tuple[Snapshot | None, list[Logged]]:
        """The newest snapshot that reads back whole and the records after it, torn
        tails cut off; leftover temporary snapshots are deleted."""
        listing = list_directory(self.dir)
        for leftover in listing.temporaries:
            remove(leftover)
        start = choose_start(listing)
        if start.snapshot is not None:
            self.snapshot_bytes = snapshot_bytes(listing.snapshots[start.seq])
        records: list[Logged] = []
        tail = Tail(start.seq, 0, 0)
        for i, (seq, segment) in enumerate(start.segments):
            found = scan(segment)
            if found.torn:
                if i != len(start.segments) - 1:
                    raise CorruptLogError(segment, found.good_end, "a record cut short")
                _truncate(segment, found.good_end)
            records += decoded(segment, found.payloads)
            tail = Tail(seq, found.good_end, len(found.payloads))
        skipped = max((sequence(path) for path, _ in start.skipped), default=0)
        if skipped > tail.seq:  # never append behind a skipped snapshot: should it read
            tail = Tail(skipped, 0, 0)  # back after all, opening would skip those records
        self.tail = tail
        return start.snapshot, records

    # -- writing -----------------------------------------------------------------

    def append(self, record: Record) -> None:
        """Write `record` durably (`undo(end)` with `end` as it was before removes it).
        On failure the segment is cut back to where it was and `DurabilityError` is
        raised. Bytes past `end` (an append or undo interrupted by a signal) are cut
        off first: they are no acknowledged record."""
        self._check_writable()
        data = memoryview(frame(encode(record)))
        size, tail, segment = len(data), self.tail, self.segment
        try:
            fd = os.open(segment, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as error:
            raise DurabilityError(f"could not open the log {segment}: {error}") from None
        try:
            offset = os.lseek(fd, 0, os.SEEK_END)
            try:
                if offset != tail.end:
                    os.ftruncate(fd, tail.end)
                    offset = tail.end
                while data:  # unbuffered: nothing is left to flush after a failure
                    data = data[os.write(fd, data) :]
                if self.sync:
                    os.fsync(fd)
                    self._sync_dir()  # a new segment's entry must survive too
            except OSError as error:
                self._cut_back(fd, offset, error)
                raise DurabilityError(f"could not write the log {segment}: {error}") from None
        finally:
            os.close(fd)
        self.tail = Tail(tail.seq, offset + size, tail.records + 1)

    def undo(self, end: int) -> None:
        """Cut the segment back to `end`, the value of `self.end` before a commit whose
        record may have been (partly) written did not happen. Called while that
        failure propagates, it raises nothing: if the record cannot be cut off, the log
        takes no more writes (`broken`), so nothing is logged after a record whose
        commit did not happen."""
        tail = self.tail
        try:
            fd = os.open(self.segment, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            self._break(f"the record of a failed commit could not be removed: {error}")
            return
        try:
            if os.lseek(fd, 0, os.SEEK_END) > end:
                self._cut_back(fd, end, None)
        except OSError as error:
            self._break(f"the record of a failed commit could not be removed: {error}")
        finally:
            os.close(fd)
        if self.broken is None:
            self.tail = Tail(tail.seq, end, tail.records - (tail.end > end))

    def _cut_back(self, fd: int, offset: int, cause: OSError | None) -> None:
        """Truncate the segment to `offset` after a failed or undone append; if even
        that fails, the log is `broken` (a half record, or one whose commit did not
        happen, would be followed by the next)."""
        try:
            os.ftruncate(fd, offset)
            if self.sync:
                os.fsync(fd)
        except OSError as error:
            after = f" after {cause}" if cause is not None else ""
            self._break(f"the log could not be cut back to byte {offset}{after}: {error}")

    def _break(self, reason: str) -> None:
        self.broken = reason
        _log.error("durable log of %s is closed for writing: %s", self.dir, reason)

    def _check_writable(self) -> None:
        if self.broken is not None:
            raise DurabilityError(
                f"the durable log of {self.dir} takes no more writes: {self.broken}; "
                "reopen the database"
            )

    def _sync_dir(self) -> None:
        if not self.dir_synced:
            _fsync_dir(self.dir)
            self.dir_synced = True

    def wants_checkpoint(self, every: int) -> bool:
        """The log outgrew the snapshot (bytes) or holds `every` records."""
        return self.records >= every or self.end > max(self.snapshot_bytes, 1 << 20)

    # -- checkpoints -------------------------------------------------------------

    def checkpoint(self, snapshot: Snapshot) -> None:
        """Write `snapshot` (the state at the end of the log) durably, continue the log
        in a new segment, and drop what the previous snapshot covers.

        Each step leaves a directory that opening reads as every acknowledged
        commit, and a `tail` that appends where opening will replay: the log moves
        to the new segment before the snapshot is written (if the snapshot never
        lands, the new segment is replayed after the old one), and nothing is
        deleted before the snapshot is renamed, fsynced and verified. Fsynced even
        with `sync=False`: a checkpoint is the one step that deletes data."""
        self._check_writable()
        self._seal()
        seq = self.tail.seq + 1
        self.dir_synced = False  # before the switch: the new segment's entry is new
        self.tail = Tail(seq, 0, 0)  # from here on, commits go to log-<seq>
        final = self.dir / name("snapshot", seq)
        self._write(final, snapshot)
        self.snapshot_bytes = snapshot_bytes(final)
        self._prune(seq)

    def _seal(self) -> None:
        """Cut the segment back to its last acknowledged record (bytes an interrupted
        append left would replay after it) and fsync it; create it if no record went
        there yet, so the segments after a snapshot stay consecutive."""
        try:
            fd = os.open(self.segment, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if os.lseek(fd, 0, os.SEEK_END) != self.tail.end:
                    os.ftruncate(fd, self.tail.end)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as error:
            raise DurabilityError(f"could not write a checkpoint in {self.dir}: {error}") from None

    def _write(self, final: Path, snapshot: Snapshot) -> None:
        """Write `final` through a temporary directory, rename it, fsync the directory,
        and read it back; a stale `final` (a damaged one opening skipped) goes first."""
        tmp = final.with_name(final.name + ".tmp")
        for stale in (tmp, final):
            remove(stale)
        try:
            write_snapshot(tmp, snapshot, sync=True)
            tmp.rename(final)
            _fsync_dir(self.dir)  # before anything is deleted
        except OSError as error:
            remove(tmp)
            raise DurabilityError(f"could not write a checkpoint in {self.dir}: {error}") from None
        try:
            verify_snapshot(final)
        except DurabilityError as error:
            remove(final)  # the log from the previous snapshot still has it all
            raise DurabilityError(f"a checkpoint did not read back: {error.message}") from None

    def _prune(self, newest: int) -> None:
        """Delete the snapshots and segments older than the newest snapshot before
        `newest` that verifies (none verifies: nothing), and leftover temporaries."""
        try:
            listing = list_directory(self.dir)
        except DurabilityError as error:
            _log.warning("%s (nothing deleted)", error)
            return
        keep = 0
        for seq in sorted((s for s in listing.snapshots if s < newest), reverse=True):
            try:
                verify_snapshot(listing.snapshots[seq])
            except DurabilityError:
                continue
            keep = seq
            break
        old = [p for s, p in [*listing.snapshots.items(), *listing.segments.items()] if s < keep]
        for path in [*old, *listing.temporaries]:
            remove(path)

    def close(self) -> None:
        self._finalizer()


def decoded(segment: Path, payloads: Sequence[bytes]) -> list[Logged]:
    """The records of a segment's frames; `CorruptLogError` at a frame whose checksum
    matches but which holds no record this version reads."""
    records, at = [], 0
    for payload in payloads:
        try:
            records.append(Logged(decode(payload), segment, at))
        except Exception as error:  # struct, Arrow, UTF-8, unknown kind: all the same
            raise CorruptLogError(segment, at, f"no record this version reads: {error}") from None
        at += HEADER_SIZE + len(payload)
    return records


def _truncate(path: Path, size: int) -> None:
    try:
        os.truncate(path, size)  # never a rewrite in place
    except OSError as error:
        raise DurabilityError(f"cannot cut the torn end of {path}: {error.strerror}") from None


def _create(directory: Path, sync: bool) -> None:
    """Make `directory` (and its parents), their entries fsynced unless `sync=False`."""
    try:
        created = [d for d in (directory, *directory.parents) if not d.exists()]
        directory.mkdir(parents=True, exist_ok=True)
        for new in reversed(created if sync else []):  # their entries survive
            _fsync_dir(new.parent)  # a machine crash
    except OSError as error:
        raise DurabilityError(
            f"cannot open the database directory {directory}: {error.strerror} "
            f"({error.filename or directory})"
        ) from None


def _lock(directory: Path) -> list[int]:
    """`flock` the directory itself, and `LOCK` (all that earlier versions lock)."""
    fds: list[int] = []
    try:
        fds.append(os.open(directory, os.O_RDONLY | os.O_DIRECTORY))
        fds.append(os.open(directory / LOCK, os.O_WRONLY | os.O_CREAT, 0o644))
        for fd in fds:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        _release(fds)
        raise DatabaseLockedError(
            f"the database in {directory} is already open (in this or another process)"
        ) from None
    except OSError as error:
        _release(fds)
        raise DurabilityError(
            f"cannot lock the database directory {directory}: {error.strerror} "
            f"({error.filename or directory})"
        ) from None
    except BaseException:
        _release(fds)
        raise
    return fds


def _release(fds: list[int]) -> None:
    """Close the lock's descriptors, which releases the locks."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
