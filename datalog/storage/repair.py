"""`deltalog recover`: make a durable directory openable, keeping all that can be kept.

Layer: datalog (storage). Imports the standard library and the other storage
modules.

In order, each step reported:

- leftover temporary snapshots (`snapshot-<seq>.tmp`, a checkpoint that never
  finished) are deleted;
- damaged snapshots are moved aside (`snapshot-<seq>.damaged`): opening starts
  from the newest one that reads back whole (the empty database if none does);
- the log from there is walked segment by segment: an unfinished last record (no
  commit acknowledged it) is cut off; at a corrupt record the segment is cut, the
  bytes from it on saved to `log-<seq>.bin.dropped`, and every later segment is
  moved aside (`.dropped`), as are the segments after a missing one.

Nothing else is deleted: what is moved aside can be inspected, and the newest
epoch it still shows is reported, so the caller can tell what was lost.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from datalog.storage.frames import CorruptLogError, DurabilityError, salvage, scan
from datalog.storage.layout import list_directory, remove, sequence
from datalog.storage.records import Commit, Record, decode
from datalog.storage.snapshots import read_snapshot, snapshot_epoch
from datalog.storage.store import Store, decoded


@dataclass
class Repair:
    """What `repair` did, and the newest epoch anything it found (kept or dropped)
    shows: past the epoch the database opens at, those epochs were lost."""

    actions: list[str] = field(default_factory=list)
    newest_epoch: int = 0
    dropped: int = 0  # records read in what was dropped
    unread: bool = False  # dropped bytes hold records that cannot be read

    def saw(self, records: list[Record]) -> None:
        epochs = [r.epoch for r in records if isinstance(r, Commit)]
        self.newest_epoch = max([self.newest_epoch, *epochs])

    def add(self, other: Repair) -> None:
        self.actions += other.actions
        self.newest_epoch = max(self.newest_epoch, other.newest_epoch)
        self.dropped += other.dropped
        self.unread |= other.unread

    def lost(self, epoch: int) -> str:
        """What was lost, for a database that now opens at `epoch`."""
        if self.newest_epoch > epoch:
            return f"epochs {epoch + 1} to {self.newest_epoch}" + " or more" * self.unread
        if self.dropped or self.unread:
            return f"the records after epoch {epoch} (their epochs cannot be read)"
        return "no acknowledged commit"


def repair(directory: Path) -> Repair:
    """Repair `directory` (see the module docstring); `DurabilityError` if it is open
    elsewhere or cannot be read at all."""
    store = Store(directory)  # the lock: never while a Database has it open
    try:
        report = Repair()
        listing = list_directory(directory)
        for leftover in listing.temporaries:
            remove(leftover)
            report.actions.append(f"deleted {leftover.name} (a checkpoint that never finished)")
        start = _start(listing.snapshots, report)
        expected, cut = start, False
        for seq in sorted(s for s in listing.segments if s >= start):
            path = listing.segments[seq]
            if not cut and seq != expected:
                report.actions.append(f"the log segment of sequence {expected} is missing")
                cut = True
            if cut:
                _drop(path, report)
                continue
            cut = _repair_segment(path, report, last=seq == max(listing.segments))
            expected += 1
        return report
    finally:
        store.close()


def cut(directory: Path, segment: Path, offset: int, why: str) -> Repair:
    """Cut the log at `offset` of `segment` (a record that does not replay): the bytes
    from it on are saved aside and every later segment is moved aside."""
    store = Store(directory)
    try:
        report = Repair()
        try:
            data = segment.read_bytes()
        except OSError as error:
            raise DurabilityError(f"cannot read {segment}: {error.strerror}") from None
        _cut(segment, data, offset, why, report)
        listing = list_directory(directory)
        for seq in sorted(s for s in listing.segments if s > sequence(segment)):
            _drop(listing.segments[seq], report)
        return report
    finally:
        store.close()


def _start(snapshots: dict[int, Path], report: Repair) -> int:
    """The newest snapshot that reads back whole (0: none), damaged newer ones moved
    aside."""
    for seq in sorted(snapshots, reverse=True):
        path = snapshots[seq]
        try:
            snapshot = read_snapshot(path)
        except DurabilityError as error:
            report.newest_epoch = max(report.newest_epoch, snapshot_epoch(path) or 0)
            moved = _aside(path, ".damaged")
            report.actions.append(f"{error.message}: moved it to {moved}")
            continue
        report.newest_epoch = max(report.newest_epoch, snapshot.epoch)
        return seq
    return 0


def _repair_segment(path: Path, report: Repair, last: bool) -> bool:
    """Cut `path` after its last good record if need be; whether the log stops here."""
    try:
        data = path.read_bytes()
    except OSError as error:
        report.actions.append(f"cannot read the log segment {path.name}: {error.strerror}")
        _drop(path, report)
        return True
    try:
        found = scan(path, data)
        records = decoded(path, found.payloads)
    except CorruptLogError as error:
        _cut(path, data, error.offset, f"a corrupt record ({error.reason})", report)
        return True
    report.saw([logged.record for logged in records])
    if found.torn and last:
        _truncate(path, found.good_end)
        report.actions.append(
            f"cut an unfinished last record off {path.name} at byte {found.good_end} "
            "(no commit acknowledged it)"
        )
    elif found.torn:
        _cut(path, data, found.good_end, "a record cut short", report)
        return True
    return False


def _cut(path: Path, data: bytes, at: int, why: str, report: Repair) -> None:
    """Keep the records of `path` before byte `at`; save the rest aside."""
    payloads = scan(path, data[:at]).payloads
    kept = len(payloads)
    report.saw([logged.record for logged in decoded(path, payloads)])
    _saw_dropped(data[at:], report)
    saved = _aside(path, ".dropped", data[at:])
    _truncate(path, at)
    report.actions.append(
        f"{path.name}: {why} at byte {at}; kept the {kept} record{'s' * (kept != 1)} "
        f"before it, moved the {len(data) - at} bytes from it on to {saved}"
    )


def _drop(path: Path, report: Repair) -> None:
    """Move a segment the log cannot reach any more aside."""
    try:
        _saw_dropped(path.read_bytes(), report)
    except OSError:
        report.unread = True
    moved = _aside(path, ".dropped")
    report.actions.append(f"moved {path.name} to {moved} (the log before it is cut)")


def _saw_dropped(data: bytes, report: Repair) -> None:
    records = []
    for payload in salvage(data):
        try:
            records.append(decode(payload))
        except Exception:  # a frame that holds no record: its epoch is unknown
            report.unread = True
    report.saw(records)
    report.dropped += len(records)
    report.unread |= bool(data) and not records


def _aside(path: Path, suffix: str, data: bytes | None = None) -> str:
    """Rename `path` (or, given `data`, write it) to a free name ending in `suffix`."""
    target, n = path.with_name(path.name + suffix), 1
    while target.exists() or target.is_symlink():
        target, n = path.with_name(f"{path.name}{suffix}.{n}"), n + 1
    try:
        if data is None:
            path.rename(target)
        else:
            with target.open("xb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
    except OSError as error:
        raise DurabilityError(f"cannot move {path} aside: {error.strerror}") from None
    return target.name


def _truncate(path: Path, size: int) -> None:
    try:
        os.truncate(path, size)
    except OSError as error:
        raise DurabilityError(f"cannot cut {path} at byte {size}: {error.strerror}") from None
