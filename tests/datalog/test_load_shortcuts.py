"""The bulk-load and memory shortcuts of ADR 0044, at their smallest, against the
reference evaluator: sorted inputs found in order, value sorts in parts, batches
built from rows in order, one repeated time or diff held once, the packed key hash."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datalog import Database
from differential.tuning import TUNING, tuned
from tests.datalog.test_engine_vs_reference import check_against_reference


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
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
