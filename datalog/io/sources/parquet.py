"""Parquet files into base relations, one row group at a time.

Layer: datalog (sources). Uses the public API of `datalog` (a transaction, the
schema) and pyarrow; never `joins` or `differential`.

`insert_parquet(db, relation, path)` reads the file row group by row group and
inserts its rows as one transaction. A relation of numbers (`number`, `unsigned`,
`float`) gets numpy columns allocated once for the whole file, each row group
copied into them and its Arrow memory released before the next is read; the
columns are then inserted at once. `pyarrow.parquet.read_table` would first build
an Arrow table of the whole file, with threads: for 10M edges it held about 350 MB
of Arrow memory besides the table's 160 MB and took four times the CPU on a busy
machine (ADR 0044). A relation with `symbol` columns inserts each row group as an
Arrow table (strings are interned as they come).

The file's columns are matched to the relation's attributes by name when it has
them all, else by position, as for any table inserted. Values are checked as every
insert checks them (`TransactionError` naming the column and row, nothing applied);
a null is refused with the row group it is in.
"""

from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING, Any

import numpy as np

from datalog.eval.expressions import DTYPES
from datalog.lang.errors import TransactionError

if TYPE_CHECKING:
    from datalog.db.database import Database
    from datalog.lang.schema import RelationInfo


def insert_parquet(db: Database, relation: str, path: str | PathLike[str]) -> int:
    """Insert the rows of the Parquet file at `path` into `relation` (one epoch,
    returned; see the module docstring)."""
    import pyarrow.parquet as pq

    info = db.checked.schema.require(relation)
    source = pq.ParquetFile(path)
    positions = _positions(info, source.schema_arrow.names)
    with db.transaction() as tx:
        if "symbol" in info.types:
            for group in range(source.num_row_groups):
                tx.insert(relation, source.read_row_group(group, columns=positions))
        else:
            tx.insert(relation, _numeric_columns(source, info, positions))
    return db.epoch


def _positions(info: RelationInfo, names: list[str]) -> list[str]:
    """The names of the file's columns holding the relation's attributes: those of
    the attributes' names when it has them all, else the first `arity`."""
    if set(info.column_names) <= set(names):
        return list(info.column_names)
    if len(names) < info.arity:
        raise TransactionError(
            f"`{info.name}` has {info.arity} columns, but the file has {len(names)}"
        )
    return names[: info.arity]


def _numeric_columns(source: Any, info: RelationInfo, positions: list[str]) -> list[np.ndarray]:
    """The file's columns for a relation of numbers, each one numpy array filled one
    row group at a time: of the narrowest integer type holding every value when the
    file's statistics bound them (a node id below 2**31 takes 4 bytes, and a bulk
    load into a set hashes it at that width: ADR 0073), else of the file's type (or
    the relation's, when it holds every value of the file's). They are returned
    read-only: the insert takes them without a copy."""
    import pyarrow as pa

    from datalog.eval.arrow import to_numpy

    rows = source.metadata.num_rows
    columns = []
    for i, (name, kind) in enumerate(zip(positions, info.types, strict=True)):
        dtype = _narrowest(source, i, name) or _dtype(source.schema_arrow.field(name).type, kind)
        columns.append(np.empty(rows, dtype=dtype))
    at = 0
    for group in range(source.num_row_groups):
        table = source.read_row_group(group, columns=positions)
        for name, column, target in zip(info.column_names, table.columns, columns, strict=True):
            if column.null_count:
                raise TransactionError(
                    f"column `{name}` of `{info.name}` holds nulls in row group {group}, "
                    "which are not values"
                )
            target[at : at + table.num_rows] = to_numpy(column)
        at += table.num_rows
        del table
    pa.default_memory_pool().release_unused()
    for filled in columns:  # the insert takes read-only columns without a copy (ADR 0073)
        filled.flags.writeable = False
    return columns


def _narrowest(source: Any, index: int, name: str) -> np.dtype | None:
    """The smallest integer type holding the column's values, by the minimum and the
    maximum every row group's statistics give (None: not integers, or unbounded)."""
    import pyarrow as pa

    if not pa.types.is_integer(source.schema_arrow.field(name).type):
        return None
    low = high = None
    for group in range(source.num_row_groups):
        chunk = source.metadata.row_group(group).column(_leaf(source, name))
        stats = chunk.statistics
        if chunk.num_values and (stats is None or not stats.has_min_max):
            return None
        if chunk.num_values:
            low = stats.min if low is None else min(low, stats.min)
            high = stats.max if high is None else max(high, stats.max)
    if low is None or high is None:
        return None
    for dtype in (np.int8, np.int16, np.int32, np.uint32):
        bounds = np.iinfo(dtype)
        if bounds.min <= low and high <= bounds.max:
            return np.dtype(dtype)
    return None


def _leaf(source: Any, name: str) -> int:
    """The index of the Parquet leaf column of a top-level column `name`."""
    schema = source.metadata.schema
    return next(i for i in range(len(schema)) if schema.column(i).path == name)


def _dtype(arrow_type: Any, kind: str) -> np.dtype:
    """Where a row group's values go: the relation's type when every value of the
    file's type fits it (int32 into number, say), else the file's own (the insert
    then checks and converts, as for any array)."""
    import pyarrow as pa

    wanted = np.dtype(DTYPES[kind])
    try:
        found = np.dtype(arrow_type.to_pandas_dtype())
    except (NotImplementedError, TypeError):
        return np.dtype(object)
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type):
        return wanted if np.can_cast(found, wanted, casting="safe") else found
    return found
