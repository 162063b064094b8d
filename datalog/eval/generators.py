"""`range` over columns: the vectorized counterpart of `functions.range_values`.

Layer: datalog. Imports numpy and `datalog.lang.functions`. `expand_range` turns a batch
of argument rows into the generated values and, for each value, the index of the
row it came from (so a caller repeats that row's columns, time and diff: the
expansion is linear, and a retracted input row retracts exactly its values). Row
counts are computed in closed form and the values with `np.repeat`/`np.arange`;
no Python loop runs over rows. Must agree with `functions.range_values`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from datalog.lang.ast import ColumnType
from datalog.lang.functions import RANGE_LIMIT, range_too_long

Array = npt.NDArray[Any]
Mask = npt.NDArray[np.bool_]


def expand_range(args: Sequence[Array], kind: ColumnType, ok: Mask | None) -> tuple[Array, Array]:
    """The rows (input row index per value) and values of `range(*args)` per row;
    rows where `ok` is False (an argument without a value) generate nothing."""
    if kind == "float":
        counts, start, step = _float_counts(args)
    else:
        counts, start, step = _integer_counts(args, kind)
    if ok is not None:
        counts = np.where(ok, counts, 0)
    too_long = np.flatnonzero(counts > RANGE_LIMIT)
    if len(too_long):
        raise range_too_long([arg[too_long[0]].item() for arg in args])
    sizes = counts.astype(np.int64)
    rows = np.repeat(np.arange(len(sizes)), sizes)
    offsets = np.arange(len(rows)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    if kind == "float":
        values = np.repeat(start, sizes) + offsets.astype(np.float64) * np.repeat(step, sizes)
        return rows, values
    moved = offsets.astype(np.uint64) * np.repeat(step, sizes)  # wraps: two's complement
    values = np.repeat(start, sizes) + moved
    return rows, values.view(np.int64 if kind == "number" else np.uint64)


def _integer_counts(args: Sequence[Array], kind: ColumnType) -> tuple[Array, Array, Array]:
    """Counts (uint64), starts and signed steps as uint64 bit patterns."""
    start, stop = args[0], args[1]
    if len(args) == 3:
        step = args[2]
        up, zero = step > 0, step == 0
        magnitude = np.where(up | zero, step, np.negative(step)).view(np.uint64)
    else:
        up, zero = start <= stop, np.zeros(len(start), dtype=bool)
        magnitude = np.ones(len(start), dtype=np.uint64)
    first, last = start.view(np.uint64), stop.view(np.uint64)
    ahead = np.where(up, start < stop, start > stop)
    span = np.where(up, last - first, first - last)  # exact where `ahead`
    divisor = np.where(magnitude == 0, np.uint64(1), magnitude)
    counts = span // divisor + (span % divisor != 0)
    counts = np.where(zero, (start != stop).astype(np.uint64), np.where(ahead, counts, 0))
    signed = np.where(up | zero, magnitude, np.negative(magnitude))
    return counts.astype(np.uint64), first, signed


def _float_counts(args: Sequence[Array]) -> tuple[Array, Array, Array]:
    """Counts: the least i with start + i*step past stop (0 for a zero step: once
    if start != stop), from the quotient and corrected by one where it rounded."""
    start, stop = args[0], args[1]
    step = args[2] if len(args) == 3 else np.where(start <= stop, 1.0, -1.0)
    with np.errstate(all="ignore"):
        quotient = (stop - start) / step
        endless = np.isinf(quotient) & (quotient > 0)
        estimate = np.where(np.isfinite(quotient) & (quotient > 0), np.ceil(quotient), 0.0)
        counts = np.minimum(estimate, RANGE_LIMIT + 1).astype(np.int64)
        counts[endless] = RANGE_LIMIT + 1
        moving = (step != 0) & ~endless & (counts <= RANGE_LIMIT)

        def inside(i: Array) -> Mask:
            at = start + i.astype(np.float64) * step
            return moving & np.where(step > 0, at < stop, at > stop)

        while True:
            too_many = (counts > 0) & ~inside(counts - 1) & moving
            too_few = inside(counts)
            if not (too_many.any() or too_few.any()):
                break
            counts = counts - too_many + too_few
    counts = np.where(step == 0, (start != stop).astype(np.int64), counts)
    return counts, start, step
