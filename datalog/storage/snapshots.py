"""Snapshot directories: the base relations, program and symbols at one epoch.

Layer: datalog (storage). Imports the standard library, numpy, pyarrow and the
other storage modules.

A snapshot is `manifest.json`, `symbols.arrow` and one `r<i>.arrow` per base
relation (its columns and a count column). Arrow IPC files carry no checksum, so
a flipped bit in one would load as a different value: the manifest records the
CRC-32 of every other file and is itself one frame (`frames.frame`), and reading
checks them all. A manifest without the frame (written before checksums) is read
as plain JSON, unchecked. The manifest is written last: it marks a whole snapshot.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from datalog.storage.frames import MAGIC, CorruptLogError, DurabilityError, frame, scan
from datalog.storage.records import decode_columns, encode_columns

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Snapshot:
    """A checkpoint's contents: program, symbols in id order, and each base
    relation's rows (symbols as ids) with their multiplicities."""

    epoch: int
    program: str
    symbols: list[str]
    relations: dict[str, tuple[tuple[np.ndarray, ...], np.ndarray]]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_snapshot(directory: Path, snapshot: Snapshot, sync: bool) -> None:
    directory.mkdir()
    files: dict[str, bytes] = {
        "symbols.arrow": encode_columns((np.asarray(snapshot.symbols, dtype=object),)),
    }
    relations = []
    for i, (name, (columns, counts)) in enumerate(sorted(snapshot.relations.items())):
        files[f"r{i}.arrow"] = encode_columns((*columns, counts))
        relations.append({"name": name, "file": f"r{i}.arrow"})
    checksums = {name: zlib.crc32(data) for name, data in files.items()}
    manifest = {
        "epoch": snapshot.epoch,
        "program": snapshot.program,
        "relations": relations,
        "checksums": checksums,
    }
    files[MANIFEST] = frame(json.dumps(manifest).encode("utf-8"))
    for name, data in files.items():  # the manifest last
        with (directory / name).open("wb") as out:
            out.write(data)
            out.flush()
            if sync:
                os.fsync(out.fileno())
    if sync:
        fsync_dir(directory)


def _damage() -> tuple[type[BaseException], ...]:
    """What a damaged snapshot raises while it is read (pyarrow is imported only
    then: `import datalog` does not load it)."""
    import pyarrow as pa

    return (OSError, ValueError, KeyError, TypeError, DurabilityError, pa.ArrowException)


def read_snapshot(directory: Path) -> Snapshot:
    """The snapshot in `directory`; `DurabilityError` if any file of it is damaged."""
    try:
        manifest = _manifest(directory / MANIFEST)
        checksums = manifest.get("checksums")
        (symbols,) = decode_columns(_read(directory, "symbols.arrow", checksums))
        relations = {}
        for entry in manifest["relations"]:
            *columns, counts = decode_columns(_read(directory, entry["file"], checksums))
            relations[entry["name"]] = (tuple(columns), counts)
        return Snapshot(manifest["epoch"], manifest["program"], list(symbols), relations)
    except _damage() as error:
        raise DurabilityError(f"cannot read the snapshot {directory}: {_why(error)}") from None


def verify_snapshot(directory: Path) -> None:
    """Check every file of the snapshot in `directory` against its manifest's CRC-32
    without decoding it (one written before checksums is read whole instead);
    `DurabilityError` if one is damaged or missing."""
    try:
        manifest = _manifest(directory / MANIFEST)
        if not isinstance(manifest.get("checksums"), dict):
            read_snapshot(directory)
            return
        files = ["symbols.arrow", *(entry["file"] for entry in manifest["relations"])]
        for name in files:
            _read(directory, name, manifest["checksums"])
    except _damage() as error:
        raise DurabilityError(f"the snapshot {directory} is damaged: {_why(error)}") from None


def snapshot_epoch(directory: Path) -> int | None:
    """The epoch a snapshot's manifest names, if it can be read (for reports)."""
    try:
        epoch = _manifest(directory / MANIFEST)["epoch"]
    except _damage():
        return None
    return epoch if isinstance(epoch, int) else None


def _why(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror}: {error.filename}"
    return error.message if isinstance(error, DurabilityError) else str(error)


def _manifest(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    if data.startswith(MAGIC):
        try:
            found = scan(path, data)
        except CorruptLogError as error:
            raise ValueError(f"{path.name} is damaged at byte {error.offset}") from None
        if found.torn or len(found.payloads) != 1:
            raise ValueError(f"{path.name} is not one whole record")
        data = found.payloads[0]
    manifest = json.loads(data.decode("utf-8"))
    if not isinstance(manifest, dict):
        raise ValueError(f"{path.name} is not a manifest")
    return manifest


def _read(directory: Path, name: str, checksums: object) -> bytes:
    data = (directory / name).read_bytes()
    if isinstance(checksums, dict) and checksums.get(name) != zlib.crc32(data):
        raise ValueError(f"{name} fails its checksum")
    return data
