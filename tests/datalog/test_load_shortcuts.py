"""The bulk-load and memory shortcuts of ADR 0044, at their smallest, against the
reference evaluator: sorted inputs found in order, value sorts in parts, batches
built from rows in order, one repeated time or diff held once, the packed key hash."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datalog import Database
from differential.tuning import TUNING, tuned
from tests.budget import examples
from tests.datalog.test_engine_vs_reference import check_against_reference


@settings(
    max_examples=examples(30),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_shortcut_at_its_smallest_gives_the_reference_answers(data: st.DataObject) -> None:
    # the numpy kernels whatever the size, every sorted-input shortcut at its smallest
    with tuned(TUNING.but(few=0, sorted_from=2, probe=2, value_sort_part=3, uniform_from=2)):
        check_against_reference(data)


def test_a_bulk_load_sorted_or_not_answers_like_rows_inserted_one_by_one() -> None:
    rng = np.random.default_rng(7)
    src = rng.integers(0, 3000, 20_000)
    dst = rng.integers(0, 3000, 20_000)
    order = np.lexsort([dst, src])
    program = ".decl e(a: number, b: number)\n.decl r(a: number)\nr(1).\nr(b) :- r(a), e(a, b).\n"
    answers = []
    for data in (
        pa.table({"a": src, "b": dst}),
        [src[order], dst[order]],  # sorted, with repeats
        list(zip(src.tolist(), dst.tolist(), strict=True)),
    ):
        db = Database()
        db.define(program)
        db.insert("e", data)
        db.retract("e", [(int(src[0]), int(dst[0]))])
        columns = db.query_columns("e(a, b)")
        answers.append(
            (
                sorted(zip(columns["a"].tolist(), columns["b"].tolist(), strict=True)),
                sorted(db.query_columns("r(a)")["a"].tolist()),
            )
        )
    expected_edges = sorted(
        set(zip(src.tolist(), dst.tolist(), strict=True)) - {(int(src[0]), int(dst[0]))}
    )
    assert answers[0][0] == expected_edges
    assert answers[0] == answers[1] == answers[2]


def test_a_load_in_batches_is_held_once_at_commit_and_logged_as_inserted(tmp_path: Path) -> None:
    # a relation inserted in several batches is held as ONE part (its request's columns)
    # once the commit builds its request, not as its batches and their concatenation;
    # a relation with inserts and retracts keeps its parts in order; the log replays both
    program = ".decl e(a: number, b: symbol)\n.decl f(a: number)\n"
    batches = [pa.table({"a": [i, i + 1], "b": [f"s{i}", "t"]}) for i in range(0, 8, 2)]
    with Database(tmp_path) as db:
        db.define(program)
        with db.transaction() as tx:
            for batch in batches:
                tx.insert("e", batch)
            tx.insert("f", [(1,), (2,)])
            tx.retract("f", [(1,)])
            tx.insert("f", [(1,), (3,)])
        assert [
            (relation, len(columns[0]), inserting) for relation, columns, inserting in tx.parts
        ] == [
            ("e", 8, True),
            ("f", 2, True),
            ("f", 1, False),
            ("f", 2, True),
        ]
        expected = (db.query("e(a, b)"), db.query("f(a)"))
    assert sorted(expected[1]) == [(1,), (2,), (3,)]
    with Database(tmp_path) as again:
        assert (again.query("e(a, b)"), again.query("f(a)")) == expected
