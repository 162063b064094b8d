"""Arrow columns read from their buffers (`datalog.eval.arrow`) equal pyarrow's own
`to_numpy`, for every integer and float type, chunked, sliced, and with nulls
(which fall back to pyarrow)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from datalog.eval.arrow import to_numpy

TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(),
         pa.uint32(), pa.uint64(), pa.float32(), pa.float64()]  # fmt: skip


@given(
    st.sampled_from(TYPES),
    st.lists(st.lists(st.integers(0, 100), max_size=12), min_size=1, max_size=4),
    st.integers(0, 3),
    st.booleans(),
)
def test_buffers_read_as_numpy_equal_pyarrows_conversion(
    kind: pa.DataType, chunks: list[list[int | None]], cut: int, null: bool
) -> None:
    if null:  # a null anywhere: pyarrow converts
        chunks[-1] = [*chunks[-1], None]
    column = pa.chunked_array([pa.array(c, kind) for c in chunks], kind)
    sliced = column.slice(min(cut, len(column)))  # chunks with an offset
    for data in (column, sliced, column.combine_chunks()):
        ours, theirs = to_numpy(data), data.to_numpy(zero_copy_only=False)
        assert ours.dtype == theirs.dtype
        assert np.array_equal(ours, theirs, equal_nan=ours.dtype.kind == "f")
        assert ours.flags.writeable  # a copy, never Arrow's read-only buffer
