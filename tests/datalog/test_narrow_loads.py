"""Narrow integer columns through a database (ADR 0073, `Tuning.narrow_columns`).

The Parquet reader gives int32 columns when the file's statistics bound its values,
and a transaction keeps them at that width: the answers are those of the widened
twin, across an int32 load, int64 values that do not fit int32, and retractions; a
column the caller can still write is copied when inserted, as any column is.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from datalog import Database
from datalog.db.change import Change
from datalog.io.sources.parquet import insert_parquet
from differential.tuning import TUNING, tuned

PROGRAM = """.decl e(a: number, b: number)
.decl reach(a: number)
.decl u(a: unsigned, b: unsigned)
reach(1).
reach(b) :- reach(a), e(a, b).
"""


def answers(tmp_path: Path, narrow: bool) -> tuple[object, ...]:
    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, 3000, 30_000), rng.integers(0, 3000, 30_000)
    path = tmp_path / f"e-{narrow}.parquet"
    pq.write_table(pa.table({"a": src, "b": dst}), path, row_group_size=4096)
    with tuned(TUNING.but(narrow_columns=narrow)):
        db = Database()
        db.define(PROGRAM)
        seen: Counter[tuple[object, ...]] = Counter()

        def count(change: Change) -> None:
            for row, diff in zip(change.rows, change.diffs, strict=True):
                seen[row] += diff

        db.subscribe("reach(x)", count)
        insert_parquet(db, "e", path)
        first = sorted(db.query_columns("reach(a)")["a"].tolist())
        db.insert("e", [np.array([2999, 1 << 40]), np.array([1 << 40, -(1 << 33)])])
        db.retract("e", [src[:500].astype(np.int32), dst[:500].astype(np.int32)])
        db.insert("u", [np.array([1, 2], np.uint32), np.array([3, 4], np.uint8)])
        db.insert("u", [np.array([1 << 63]), np.array([5])])
        db.retract("u", [np.array([2], np.int16), np.array([4], np.int16)])
        edges = db.query_columns("e(a, b)")
        dtypes = {name: column.dtype for name, column in edges.items()}
        return (
            first,
            sorted(zip(edges["a"].tolist(), edges["b"].tolist(), strict=True)),
            sorted(db.query_columns("reach(a)")["a"].tolist()),
            sorted(db.query("u(a, b)")),
            sorted(row for row, count in seen.items() if count),
            dtypes,
        )


def test_a_narrow_parquet_load_answers_like_its_widened_twin(tmp_path: Path) -> None:
    narrow, wide = answers(tmp_path, True), answers(tmp_path, False)
    assert narrow == wide
    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, 3000, 30_000), rng.integers(0, 3000, 30_000)
    edges = set(zip(src.tolist(), dst.tolist(), strict=True)) | {(2999, 1 << 40)}
    edges |= {(1 << 40, -(1 << 33))}
    edges -= set(zip(src[:500].tolist(), dst[:500].tolist(), strict=True))
    assert narrow[1] == sorted(edges)
    assert (1 << 40) in narrow[2] and -(1 << 33) in narrow[2]
    assert narrow[3] == [(1, 3), (1 << 63, 5)]
    assert narrow[5] == {"a": np.dtype(np.int64), "b": np.dtype(np.int64)}


def test_a_column_the_caller_may_still_write_is_copied_when_inserted() -> None:
    for narrow in (True, False):
        with tuned(TUNING.but(narrow_columns=narrow)):
            db = Database()
            db.define(".decl e(a: number, b: number)\n")
            a = np.array([1, 2], np.int32)
            base = np.array([3, 4], np.int32)
            view = base[:]
            view.flags.writeable = False  # read-only, but its base is not
            with db.transaction() as tx:
                tx.insert("e", [a, view])
                a[:] = 7
                base[:] = 8
            assert sorted(db.query("e(x, y)")) == [(1, 3), (2, 4)]
