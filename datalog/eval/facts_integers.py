"""Fact files of integer columns read by numpy: the bytes checked by whole arrays, the
values parsed by `numpy.loadtxt`, no pyarrow (ADR 0067).

Layer: datalog (eval). Imports numpy and the `Tuning` in force.

`numpy.loadtxt` parses integers in C at about the speed of pyarrow's CSV reader (62
against 67 ms for a 1M-edge file) without pyarrow's 30 MiB of import or its parse
buffers, but it reads more than the reference does (spaces around a value, for one).
So the bytes are checked first, `Tuning.text_part` of them at a time: only digits,
signs, the delimiter and `\\n`; a sign only at a field's start and before a digit (`-`
not in an unsigned column); every non-empty line of exactly the relation's fields,
none empty; at most 18 characters a field, so that every value fits in int64. A file
that fails any check is the reference's to read (None).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from differential.tuning import TUNING

NEWLINE, PLUS, MINUS, ZERO, NINE = (ord(c) for c in "\n+-09")
WIDEST = 18  # characters of a field: any value of at most 18 digits fits in int64


def read_integers(
    path: Path, delimiter: str, unsigned: Sequence[bool]
) -> list[npt.NDArray[np.generic]] | None:
    """The columns of `path` (int64, uint64 where `unsigned`), or None if a check fails."""
    code = ord(delimiter)
    if not code < 128 or chr(code) in "\n\r+-0123456789":
        return None
    data = np.fromfile(path, dtype=np.uint8)
    lines = 0
    for part in _parts(data):
        found = _lines(part, code, np.array(unsigned))
        if found is None:
            return None
        lines += found
    del data
    arity = len(unsigned)
    if not lines:
        return [np.zeros(0, dtype=np.uint64 if u else np.int64) for u in unsigned]
    values = np.loadtxt(path, dtype=np.int64, delimiter=delimiter, comments=None, ndmin=2)
    if values.shape != (lines, arity):  # (the checks and the parser disagree on a line)
        return None
    return [values[:, i].astype(np.uint64 if u else np.int64) for i, u in enumerate(unsigned)]


def _parts(data: npt.NDArray[np.uint8]) -> Iterator[npt.NDArray[np.uint8]]:
    """`data` in parts of about `Tuning.text_part` bytes, each ending with a newline (the
    last given one if the file lacks it)."""
    start, n = 0, len(data)
    while start < n:
        end = _line_end(data, min(start + max(TUNING.text_part, 1), n))
        part = data[start:end]
        yield part if part[-1] == NEWLINE else np.append(part, np.uint8(NEWLINE))
        start = end


def _line_end(data: npt.NDArray[np.uint8], at: int) -> int:
    """Just past the first newline at or after `at` (the end of `data` if none)."""
    while at < len(data):
        found = np.flatnonzero(data[at : at + 4096] == NEWLINE)
        if len(found):
            return at + int(found[0]) + 1
        at += 4096
    return len(data)


def _lines(
    part: npt.NDArray[np.uint8], delimiter: int, unsigned: npt.NDArray[np.bool_]
) -> int | None:
    """The non-empty lines of `part` (whole lines, from a line's start), or None if a
    check fails."""
    other = _OTHER.copy()
    other[delimiter] = False
    counts = np.bincount(part, minlength=256)
    if counts[other].any():
        return None
    seps = np.flatnonzero((part == delimiter) | (part == NEWLINE))
    if int(np.diff(seps, prepend=-1).max()) > WIDEST + 1:  # a field of 19 or more bytes
        return None
    signs = np.zeros(0, dtype=np.intp)
    if counts[PLUS] or counts[MINUS]:  # a sign starts a field and comes before a digit
        signs = np.flatnonzero((part == PLUS) | (part == MINUS))
        before = np.where(signs > 0, part[signs - 1], NEWLINE)
        after = part[signs + 1]  # (a part ends with a newline: `signs + 1` is in it)
        starts = (before == delimiter) | (before == NEWLINE)
        if (~starts | (after < ZERO) | (after > NINE)).any():
            return None
    # A separator right after a separator or at the start ends an empty field: only a
    # whole empty line may be one.
    after = np.empty(len(seps), dtype=bool)
    after[0] = seps[0] == 0
    after[1:] = seps[1:] == seps[:-1] + 1
    empty_line = after & (part[seps] == NEWLINE)
    previous = np.empty(len(seps), dtype=np.uint8)  # the byte before each separator
    previous[0] = NEWLINE
    previous[1:] = part[seps[1:] - 1]
    if (after & ~(empty_line & (previous == NEWLINE))).any():
        return None
    ends = seps[~empty_line]  # where each field of a non-empty line ends
    arity = len(unsigned)
    if len(ends) % arity:
        return None
    shape = part[ends].reshape(-1, arity)
    if (shape[:, -1] != NEWLINE).any() or (shape[:, :-1] != delimiter).any():
        return None
    if unsigned.any() and len(signs):  # no `-` in an unsigned column
        minus = signs[part[signs] == MINUS]
        if unsigned[np.searchsorted(ends, minus) % arity].any():
            return None
    return len(shape)


_OTHER = np.ones(256, dtype=bool)  # the bytes no integer file holds (the delimiter aside)
_OTHER[[NEWLINE, PLUS, MINUS, *range(ZERO, NINE + 1)]] = False
