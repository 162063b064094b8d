"""The durable directory of a database: a lock, snapshots and log segments.

Layer: datalog (storage). Imports the standard library and the other storage
modules.

Layout of `Database(path)`:

    LOCK                   held (flock) by the one process that has it open
    snapshot-<seq>/        a checkpoint: manifest.json, symbols.arrow, r<i>.arrow
    log-<seq>.bin          framed records committed after snapshot <seq> (0: none)

Write order: a record is appended and (unless `sync=False`) fsynced, with the
directory once after a new entry, before its commit touches memory; if the
write fails, the file is cut back and nothing changes; if the commit does not
happen after all, `undo(end)` cuts the log back to `end` as it was before. A log
that cannot be cut back takes no more writes (`broken`). A checkpoint (fsynced
whatever `sync` says) writes `snapshot-<seq>.tmp/`, renames it into place and
fsyncs the directory; only then do the old snapshot and segments go. Opening
takes the newest complete snapshot and replays the segments from its sequence
number on; a torn last frame (a crash during an append) is cut off with
`os.truncate`, never by rewriting the file. See ADRs 0013 and 0032.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import weakref
from pathlib import Path
from typing import IO

from datalog.storage.frames import CorruptLogError, DurabilityError, frame, scan
from datalog.storage.records import Record, decode, encode
from datalog.storage.snapshots import Snapshot, read_snapshot, write_snapshot
from datalog.storage.snapshots import fsync_dir as _fsync_dir

LOCK = "LOCK"
_log = logging.getLogger("deltalog")


def _name(prefix: str, seq: int, suffix: str = "") -> str:
    return f"{prefix}-{seq:012d}{suffix}"


def _seq(path: Path) -> int:
    return int(path.name.split("-")[1].split(".")[0])


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        _log.warning("could not delete %s (opening ignores it)", path)


class Store:
    """One writer's handle on a durable directory (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], sync: bool = True) -> None:
        self.dir = Path(path)
        try:
            created = [d for d in (self.dir, *self.dir.parents) if not d.exists()]
            self.dir.mkdir(parents=True, exist_ok=True)
            for directory in reversed(created if sync else []):  # their entries survive
                _fsync_dir(directory.parent)  # a machine crash
            self._lock: IO[bytes] | None = (self.dir / LOCK).open("ab")
        except OSError as error:
            raise DurabilityError(
                f"cannot open the database directory {self.dir}: {error}"
            ) from None
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise DurabilityError(
                f"the database in {self.dir} is already open (in this or another process)"
            ) from None
        # a database dropped without close() still releases its lock when collected
        self._finalizer = weakref.finalize(self, self._lock.close)
        self.sync = sync
        self.records = 0  # records in the current segment
        self.end = 0  # where its last whole record ends: what is after is no record
        self.snapshot_bytes = 0
        self.seq = 0
        self.dir_synced = False  # the directory was fsynced since its last new entry
        self.broken: str | None = None  # why the log cannot be written any more

    # -- opening -----------------------------------------------------------------

    def recover(self) -> tuple[Snapshot | None, list[Record]]:
        """The newest complete snapshot and the records after it, torn tails cut off."""
        for leftover in self.dir.glob("snapshot-*.tmp"):
            shutil.rmtree(leftover, ignore_errors=True)
        snapshots = sorted(self.dir.glob("snapshot-*[0-9]"), key=_seq)
        snapshot = read_snapshot(snapshots[-1]) if snapshots else None
        self.seq = _seq(snapshots[-1]) if snapshots else 0
        if snapshots:
            self.snapshot_bytes = sum(f.stat().st_size for f in snapshots[-1].iterdir())
        segments = [s for s in sorted(self.dir.glob("log-*.bin"), key=_seq) if _seq(s) >= self.seq]
        records: list[Record] = []
        for i, segment in enumerate(segments):
            found = scan(segment)
            if found.torn:
                if i != len(segments) - 1:
                    raise CorruptLogError(segment, found.good_end, "a record cut short")
                os.truncate(segment, found.good_end)  # never a rewrite in place
            records += [decode(p) for p in found.payloads]
            self.seq, self.records, self.end = _seq(segment), len(found.payloads), found.good_end
        return snapshot, records

    # -- writing -----------------------------------------------------------------

    @property
    def segment(self) -> Path:
        return self.dir / _name("log", self.seq, ".bin")

    def append(self, record: Record) -> None:
        """Write `record` durably (`undo(end)` with `end` as it was before removes it).
        On failure the segment is cut back to where it was and `DurabilityError` is
        raised. Bytes past `end` (an append or undo interrupted by a signal) are cut
        off first: they are no acknowledged record."""
        self._check_writable()
        data = memoryview(frame(encode(record)))
        size = len(data)
        try:
            fd = os.open(self.segment, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as error:
            raise DurabilityError(f"could not open the log {self.segment}: {error}") from None
        try:
            offset = os.lseek(fd, 0, os.SEEK_END)
            try:
                if offset != self.end:
                    os.ftruncate(fd, self.end)
                    offset = self.end
                while data:  # unbuffered: nothing is left to flush after a failure
                    data = data[os.write(fd, data) :]
                if self.sync:
                    os.fsync(fd)
                    self._sync_dir()  # a new segment's entry must survive too
            except OSError as error:
                self._cut_back(fd, offset, error)
                raise DurabilityError(f"could not write the log {self.segment}: {error}") from None
        finally:
            os.close(fd)
        self.records += 1
        self.end = offset + size

    def undo(self, end: int) -> None:
        """Cut the segment back to `end`, the value of `self.end` before a commit whose
        record may have been (partly) written did not happen. Called while that
        failure propagates, it raises nothing: if the record cannot be cut off, the log
        takes no more writes (`broken`), so nothing is logged after a record whose
        commit did not happen."""
        appended = self.end > end
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
            self.records -= appended
            self.end = end

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
        size = self.segment.stat().st_size if self.segment.exists() else 0
        return self.records >= every or size > max(self.snapshot_bytes, 1 << 20)

    def checkpoint(self, snapshot: Snapshot) -> None:
        """Write `snapshot` atomically, start a new segment, drop what it covers.

        Once the snapshot is renamed into place, opening would take it and replay
        the segments from its sequence on: the log continues there even if what
        follows fails (the older files stay until the directory is fsynced).
        A checkpoint is fsynced even with `sync=False`: it deletes the files it
        covers, and a machine crash must not leave a renamed snapshot whose data
        never reached the disk in their place (an unreadable database)."""
        self._check_writable()
        seq = self.seq + 1
        tmp = self.dir / _name("snapshot", seq, ".tmp")
        final = self.dir / _name("snapshot", seq)
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            write_snapshot(tmp, snapshot, sync=True)
            tmp.rename(final)
        except OSError as error:
            shutil.rmtree(tmp, ignore_errors=True)
            raise DurabilityError(f"could not write a checkpoint in {self.dir}: {error}") from None
        old = self.seq
        self.seq, self.records, self.dir_synced, self.end = seq, 0, False, 0
        try:
            self.segment.touch()
            self._sync_dir()
            self.snapshot_bytes = sum(f.stat().st_size for f in final.iterdir())
        except OSError as error:
            raise DurabilityError(f"could not finish a checkpoint in {self.dir}: {error}") from None
        for path in [*self.dir.glob("log-*.bin"), *self.dir.glob("snapshot-*[0-9]")]:
            if _seq(path) <= old:  # covered by the new snapshot; a leftover is ignored
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else _unlink(path)

    def close(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._finalizer()
            self._lock = None


def recover_directory(path: Path) -> tuple[int, int]:
    """Cut the newest segment of `path` at its first bad record (keeping every record
    before it); returns (records kept, bytes dropped). For `deltalog recover`."""
    store = Store(path)
    try:
        segments = sorted(path.glob("log-*.bin"), key=_seq)
        if not segments:
            return 0, 0
        last = segments[-1]
        data = last.read_bytes()
        try:
            found = scan(last, data)
            end, kept = found.good_end, len(found.payloads)
        except CorruptLogError as error:
            end = error.offset
            kept = len(scan(last, data[:end]).payloads)
        os.truncate(last, end)
        return kept, len(data) - end
    finally:
        store.close()
