"""Value columns at the width their values need (`Tuning.narrow_values`, ADR 0085).

Layer: differential (trace). Imports numpy and `differential.batch`.

A batch holds an int64 value column whose every value fits int32 at int32 (decided
per batch and per column from the column's minimum and maximum, by whole columns),
and reads it back at int64: every column a batch hands out has the dtype it had
before (`widened`). Only int64 columns are narrowed: unsigned, float and other
columns are held as they are, and an int64 column read back is the same numbers.
`narrowed` is the positions, among a batch's value columns, held at int32.

A merge keeps at int32 a column that every input holds at int32 or whose values fit
(`merge_values`): the merged values are some of the inputs', so they fit too, and
nothing is widened to be merged. Arithmetic never touches a narrowed column: merges
sort, compare and gather it; sums are of diffs, which are never narrowed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from differential.batch import Column

Narrowed = tuple[int, ...]

_LOW = int(np.iinfo(np.int32).min)
_HIGH = int(np.iinfo(np.int32).max)


def fits(column: Column) -> bool:
    """Whether `column` is int64 and each of its values fits int32 (empty: it does)."""
    if column.dtype != np.int64:
        return False
    return not len(column) or (int(column.min()) >= _LOW and int(column.max()) <= _HIGH)


def narrowed_columns(
    values: Sequence[Column], keys: Sequence[Column]
) -> tuple[Narrowed, tuple[Column, ...]]:
    """Which of `values` to hold at int32, and the values so held. A value column that
    is a key column (a reduce's key repeated in its tuple: one array held once) stays
    as it is; a column repeated among the values is narrowed once and shared."""
    picked: list[int] = []
    out = list(values)
    made: dict[int, Column] = {}
    for i, column in enumerate(values):
        if any(column is key for key in keys):
            continue
        if id(column) not in made:
            if not fits(column):
                continue
            made[id(column)] = column.astype(np.int32)
        out[i] = made[id(column)]
        picked.append(i)
    return tuple(picked), tuple(out)


def widened(values: Sequence[Column], narrowed: Narrowed | None) -> tuple[Column, ...]:
    """The value columns as handed out: those held at int32 read back at int64."""
    if not narrowed:
        return tuple(values)
    return tuple(c.astype(np.int64) if i in narrowed else c for i, c in enumerate(values))


def widened_at(column: Column, at: npt.NDArray[np.intp] | slice, narrow: bool) -> Column:
    """`column[at]`, read back at int64 when the column is held narrowed."""
    part = column[at]
    return part.astype(np.int64) if narrow else part


def merge_values(
    stored: Sequence[tuple[Sequence[Column], Narrowed | None]],
) -> tuple[Narrowed, list[tuple[Column, ...]]]:
    """The value columns of batches being merged (`stored`: each batch's held value
    columns and its `narrowed`), of one dtype across the batches, and which of them are
    at int32: a column one batch holds narrowed stays narrow when every other batch
    holds it narrowed or its values fit (a small batch's, never decided: narrowed for
    the merge); else it is read back at int64 where narrowed."""
    some = sorted({i for _, narrowed in stored for i in narrowed or ()})
    kept = tuple(i for i in some if all(i in (n or ()) or fits(cols[i]) for cols, n in stored))
    out: list[tuple[Column, ...]] = []
    for cols, narrowed in stored:
        held = narrowed or ()
        out.append(tuple(_merged(c, i in kept, i in held) for i, c in enumerate(cols)))
    return kept, out


def _merged(column: Column, kept: bool, held: bool) -> Column:
    """A value column as merged: at int32 when `kept` narrow (narrowed now if it was
    not), read back at int64 when `held` narrow but not kept, else as held."""
    if kept:
        return column if held else column.astype(np.int32)
    return column.astype(np.int64) if held else column
