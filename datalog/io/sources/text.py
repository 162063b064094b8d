"""A relation's rows as delimited text, written whole columns at a time.

Layer: datalog (sources). Imports numpy and pyarrow; nothing from the engine.

`.output` writes rows sorted as Python sorts their tuples (numbers numerically,
symbols by code point, column by column) and formats each value as Soufflé does
(`datalog.io.sources.csv.format_value`: a float without a trailing `.0`, symbols
unquoted). Formatting a million rows one Python tuple at a time took seconds; here
the rows are ordered by one Arrow sort over the columns, and each chunk of
`CHUNK_ROWS` rows is formatted by column (Arrow casts numbers to text, symbols are
already strings), joined by the delimiter and handed out as one string. Floats are
the exception: no vectorized formatter gives `repr`'s shortest digits in its layout
(Arrow writes `1e-8` and `1.739367877130134e+12` where Python writes `1e-08` and
`1739367877130.134`), so a float column is formatted by `repr`, one column at a time.

The output is byte for byte what the row writer gave (`tests/datalog/
test_output_text.py` twins them), but for NaN: Python's sort leaves NaN wherever its
comparisons happen to put it, here it sorts after every number, as numpy's does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CHUNK_ROWS = 1 << 20  # rows formatted at once: bounds the text held in memory


def sorted_text(
    columns: Sequence[np.ndarray], size: int, delimiter: str = "\t", chunk_rows: int = CHUNK_ROWS
) -> Iterator[str]:
    """The rows of `columns` (numpy; symbols as strings), sorted, as text lines in
    chunks of `chunk_rows` rows; a nullary relation that holds (`size` 1, no
    columns) is `()`."""
    if not columns:
        if size:
            yield "()\n"
        return
    arrays = [_arrow(column) for column in columns]
    order = _order(arrays)
    for start in range(0, size, chunk_rows):
        taken = order[start : start + chunk_rows]
        texts = [_formatted(array, taken) for array in arrays]
        lines = pc.binary_join_element_wise(*texts, _text(delimiter))
        yield _joined(pc.binary_join_element_wise(lines, _text(""), _text("\n")))


def _text(value: str) -> pa.Scalar:
    return pa.scalar(value, pa.large_string())


def _arrow(column: np.ndarray) -> pa.Array:
    if column.dtype == object:
        return pa.array(column, type=pa.large_string())
    return pa.array(column)


def _order(arrays: Sequence[pa.Array]) -> pa.Array:
    """Positions in the order of Python's `sorted` over the rows (a stable sort,
    first column first)."""
    table = pa.table({f"c{i}": array for i, array in enumerate(arrays)})
    keys = [(name, "ascending") for name in table.column_names]
    return pc.sort_indices(table, sort_keys=keys)


def _formatted(array: pa.Array, taken: pa.Array) -> pa.Array:
    """The values at `taken`, as text."""
    values = pc.take(array, taken)
    if pa.types.is_floating(values.type):
        reprs = list(map(repr, values.to_numpy(zero_copy_only=False).tolist()))
        texts = pa.array(reprs, pa.large_string())
        return pc.replace_substring_regex(texts, pattern=r"\.0$", replacement="")
    if pa.types.is_large_string(values.type):
        return values
    return pc.cast(values, pa.large_string())


def _joined(lines: pa.Array) -> str:
    """The text of every line of a string array, one after the other."""
    lines = lines.cast(pa.large_string())
    offsets = np.frombuffer(lines.buffers()[1], np.int64)
    begin, end = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
    return lines.buffers()[2].slice(begin, end - begin).to_pybytes().decode("utf-8")
