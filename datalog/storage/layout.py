"""The entries of a durable directory, and which of them an open reads.

Layer: datalog (storage). Imports the standard library and the other storage
modules.

    snapshot-<seq>/      the state at the end of every log segment before <seq>
    log-<seq>.bin        the records that follow: log-<k+1> continues where log-<k>
                         ends, whether or not snapshot-<k+1> exists
    snapshot-<seq>.tmp/  a checkpoint being written (removed when opening)

Any other name is not the store's and is left alone. Opening starts from the
newest snapshot that reads back whole (every checksum) and replays every segment
from its sequence on. A damaged newer snapshot is skipped, with a warning, if
the segments from the older start bridge it (that is why a checkpoint keeps the
previous snapshot and the log after it); if they do not, or a segment between
two others is missing, opening refuses rather than load a state without
acknowledged commits. The empty database is the start of sequence 0.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from datalog.storage.frames import DurabilityError
from datalog.storage.snapshots import Snapshot, read_snapshot

LOCK = "LOCK"
LEGACY_LOG = "log.jsonl"  # the first durable format: migrated, then renamed
_SNAPSHOT = re.compile(r"snapshot-(\d+)")
_SEGMENT = re.compile(r"log-(\d+)\.bin")
_TEMPORARY = re.compile(r"snapshot-\d+\.tmp")
_log = logging.getLogger("deltalog")


def name(prefix: str, seq: int, suffix: str = "") -> str:
    return f"{prefix}-{seq:012d}{suffix}"


@dataclass(frozen=True)
class Listing:
    """The store's entries in a directory, by sequence number."""

    directory: Path
    snapshots: dict[int, Path]
    segments: dict[int, Path]
    temporaries: list[Path]


def list_directory(directory: Path) -> Listing:
    try:
        names = os.listdir(directory)
    except OSError as error:
        raise DurabilityError(
            f"cannot list the database directory {directory}: {error.strerror}"
        ) from None
    snapshots, segments, temporaries = {}, {}, []
    for entry in names:
        if found := _SNAPSHOT.fullmatch(entry):
            snapshots[int(found[1])] = directory / entry
        elif found := _SEGMENT.fullmatch(entry):
            segments[int(found[1])] = directory / entry
        elif _TEMPORARY.fullmatch(entry):
            temporaries.append(directory / entry)
    return Listing(directory, snapshots, segments, temporaries)


def remove(path: Path) -> None:
    """Delete a file or a directory tree; a failure is logged (what is left is ignored
    or deleted later)."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass
    except OSError as error:
        _log.warning("could not delete %s: %s", path, error.strerror)


@dataclass(frozen=True)
class Start:
    """Where an open starts: a snapshot (None: the empty database at sequence 0), the
    segments to replay after it, in order, and the newer snapshots skipped as damaged."""

    seq: int
    snapshot: Snapshot | None
    segments: list[tuple[int, Path]]
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def choose_start(listing: Listing) -> Start:
    """The newest snapshot that reads back whole, and the log to replay after it;
    `DurabilityError` (naming the directory for `deltalog recover`) if no start
    leads to every acknowledged commit."""
    skipped: list[tuple[Path, str]] = []
    for seq in sorted(listing.snapshots, reverse=True):
        try:
            snapshot = read_snapshot(listing.snapshots[seq])
        except DurabilityError as damaged:
            skipped.append((listing.snapshots[seq], damaged.message))
            continue
        return _checked(listing, Start(seq, snapshot, [], skipped))
    return _checked(listing, Start(0, None, [], skipped))


def _checked(listing: Listing, start: Start) -> Start:
    """`start` with its segments, once the log from it reaches past every skipped
    snapshot with no segment missing."""
    later = [seq for seq in listing.segments if seq >= start.seq]
    needed = max([*later, *(sequence(path) - 1 for path, _ in start.skipped)], default=-1)
    missing = [seq for seq in range(start.seq, needed + 1) if seq not in listing.segments]
    legacy = start.snapshot is None and (listing.directory / f"{LEGACY_LOG}.migrated").exists()
    if missing or (start.skipped and legacy):
        raise DurabilityError(_unopenable(listing, start, missing))
    for _, reason in start.skipped:
        _log.warning("%s; skipped it: opening from the snapshot before it and the log", reason)
    segments = [(seq, listing.segments[seq]) for seq in sorted(later)]
    return Start(start.seq, start.snapshot, segments, start.skipped)


def _unopenable(listing: Listing, start: Start, missing: list[int]) -> str:
    if missing:
        what = f"the log segment {name('log', missing[0], '.bin')} is missing"
    else:
        what = f"the records migrated from {LEGACY_LOG} are in no older snapshot"
    if start.skipped:
        what = f"{start.skipped[0][1]}, and the log to replay instead is gone ({what})"
    return (
        f"cannot open the database in {listing.directory}: {what}; "
        f"`deltalog recover {listing.directory}` makes it openable with what is left"
    )


def sequence(path: Path) -> int:
    """The sequence number of a snapshot or segment."""
    found = _SNAPSHOT.fullmatch(path.name) or _SEGMENT.fullmatch(path.name)
    if found is None:
        raise ValueError(f"{path.name} is no snapshot or log segment")
    return int(found[1])


def snapshot_bytes(directory: Path) -> int:
    """The size of a snapshot's files (what the log may grow to before a checkpoint)."""
    try:
        return sum(entry.stat().st_size for entry in directory.iterdir())
    except OSError:
        return 0
