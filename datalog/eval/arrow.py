"""Arrow columns as numpy arrays, without pyarrow's pandas shim.

Layer: datalog (data). Imports numpy and pyarrow only.

`to_numpy` may go through pyarrow's pandas compatibility layer, and its first
call in a process then imports pandas when it is installed: about 0.3 s spent
on the first Arrow load of every process (most of a cold load of the LDBC star
join). Integers and floats without nulls, which is what rows and interned
symbols are made of, are read from their data buffers instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa


def to_numpy(column: pa.Array | pa.ChunkedArray) -> npt.NDArray[Any]:
    """The values of an Arrow array or chunked array, as a new numpy array."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = [_numbers(chunk) for chunk in chunks]
    if not chunks or any(part is None for part in parts):
        return column.to_numpy(zero_copy_only=False)
    return np.concatenate([p for p in parts if p is not None])  # a copy, never Arrow's


def _numbers(chunk: pa.Array) -> npt.NDArray[Any] | None:
    """A chunk of integers or floats without nulls, viewed in its data buffer."""
    kind = chunk.type
    if chunk.null_count or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return None
    code = "f" if pa.types.is_floating(kind) else "i" if pa.types.is_signed_integer(kind) else "u"
    dtype = np.dtype(f"{code}{kind.bit_width // 8}")
    return np.frombuffer(chunk.buffers()[1], dtype, len(chunk), chunk.offset * dtype.itemsize)
