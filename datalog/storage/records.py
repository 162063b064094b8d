"""What a log record holds, and its binary form.

Layer: datalog (storage). Imports numpy, pyarrow (when a record is encoded or decoded:
it is not loaded with `datalog`) and the standard library.

Two kinds of record: a definition (the program text `define` was given) and a
committed transaction (its epoch, the rules it replaced (`redefine`: relation
and text), and per change the relation, insert or retract, and the columns). A
transaction that replaced no rules keeps the original form (kind `C`); one that
did is kind `R`, with its replacements before its changes. Columns travel as an
Arrow IPC stream: numbers as int64, unsigned as uint64, floats as float64 (bit
for bit) and symbols as strings, so every value comes back exactly (a NUL inside
a symbol, the whole unsigned range) and no symbol id is ever written to the log.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

Columns = tuple[np.ndarray, ...]  # symbols as object arrays of str


@dataclass(frozen=True)
class Define:
    text: str


@dataclass(frozen=True)
class Change:
    relation: str
    inserting: bool
    columns: Columns


@dataclass(frozen=True)
class Commit:
    epoch: int
    changes: Sequence[Change]
    redefinitions: Sequence[tuple[str, str]] = ()  # (relation, rules text), in order


Record = Define | Commit

_DEFINE, _COMMIT, _REDEFINE = b"D", b"C", b"R"
_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")


def encode(record: Record) -> bytes:
    if isinstance(record, Define):
        return _DEFINE + record.text.encode("utf-8")
    parts = [_REDEFINE if record.redefinitions else _COMMIT, _U64.pack(record.epoch)]
    if record.redefinitions:
        parts.append(_U32.pack(len(record.redefinitions)))
        for relation, text in record.redefinitions:
            parts += [_sized(relation.encode("utf-8")), _sized(text.encode("utf-8"))]
    parts.append(_U32.pack(len(record.changes)))
    for change in record.changes:
        name = change.relation.encode("utf-8")
        table = encode_columns(change.columns)
        parts += [_U16.pack(len(name)), name, b"\1" if change.inserting else b"\0"]
        parts += [_U64.pack(len(table)), table]
    return b"".join(parts)


def decode(payload: bytes) -> Record:
    if payload[:1] == _DEFINE:
        return Define(payload[1:].decode("utf-8"))
    if payload[:1] not in (_COMMIT, _REDEFINE):
        raise ValueError(f"unknown record kind {payload[:1]!r}")
    epoch = _U64.unpack_from(payload, 1)[0]
    at, redefinitions = 9, []
    if payload[:1] == _REDEFINE:
        at += 4
        for _ in range(_U32.unpack_from(payload, 9)[0]):
            relation, at = _unsized(payload, at)
            text, at = _unsized(payload, at)
            redefinitions.append((relation.decode("utf-8"), text.decode("utf-8")))
    count = _U32.unpack_from(payload, at)[0]
    at, changes = at + 4, []
    for _ in range(count):
        size = _U16.unpack_from(payload, at)[0]
        name = payload[at + 2 : at + 2 + size].decode("utf-8")
        inserting = payload[at + 2 + size] == 1
        at += 3 + size
        length = _U64.unpack_from(payload, at)[0]
        columns = decode_columns(payload[at + 8 : at + 8 + length])
        at += 8 + length
        changes.append(Change(name, inserting, columns))
    return Commit(epoch, changes, tuple(redefinitions))


def _sized(data: bytes) -> bytes:
    return _U64.pack(len(data)) + data


def _unsized(payload: bytes, at: int) -> tuple[bytes, int]:
    """The length-prefixed bytes at `at`, and the offset after them."""
    size = _U64.unpack_from(payload, at)[0]
    return payload[at + 8 : at + 8 + size], at + 8 + size


def encode_columns(columns: Columns) -> bytes:
    """Columns as one Arrow IPC stream (column `c{i}`)."""
    import pyarrow as pa  # here: `import datalog` stays fast (pyarrow loads in 50 ms)

    arrays = [_arrow(c) for c in columns]
    table = pa.table(arrays, names=[f"c{i}" for i in range(len(arrays))])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def decode_columns(data: bytes) -> Columns:
    import pyarrow as pa

    table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    return tuple(_numpy(table.column(i)) for i in range(table.num_columns))


def _arrow(column: np.ndarray) -> pa.Array:
    import pyarrow as pa

    if column.dtype == object:
        return pa.array(column, type=pa.large_string())
    return pa.array(column)


def _numpy(column: pa.ChunkedArray) -> np.ndarray:
    array = column.combine_chunks()
    return array.to_numpy(zero_copy_only=False)  # strings: an object array of str
