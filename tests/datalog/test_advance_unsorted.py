"""Rounds settled unconsolidated still advance the trace's times (ADR 0078).

An arrangement of a one-shot dataflow's totally ordered scope stops consolidating the
rounds it settles once that stops paying (`Tuning.compact_gain`); with
`Tuning.advance_unsorted` its trace's `since` still advances to the latest round
settled, so its merges keep one time, not a time column per row. Off (the reference),
`since` stays where the last consolidating settle left it. Both must answer as the
reference evaluator for generated programs (recursion, negation, aggregates) and
CSPA; on, CSPA's merged batches hold one time each.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import differential.trace.spine as spine_module
from datalog import Database
from differential.batch import uniform
from differential.trace.batch import Batch
from differential.tuning import TUNING, tuned
from tests.budget import examples
from tests.datalog.programs import (
    cspa_database,
    tunings_agree_with_the_reference,
)

# Every settle arranges (no rows wait), numpy at every size, and a settle stops
# consolidating as soon as it may (after two): the unconsolidated path runs on the
# few rows of a generated program.
UNSORTED = {"deferred_rows": 0, "few": 0, "few_pairs": 0, "recent_rows": 0, "compact_gain": 1.0}


def answers(db: Database, queries: list[str], advance: bool, **tuning: Any) -> list[set[Any]]:
    with tuned(TUNING.but(advance_unsorted=advance, **tuning)):
        return [set(db.query(q)) for q in queries]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_advanced_unsorted_rounds_answer_as_the_reference(data: st.DataObject) -> None:
    on, off = {**UNSORTED, "advance_unsorted": True}, {**UNSORTED, "advance_unsorted": False}
    tunings_agree_with_the_reference(data, [on, off, {"advance_unsorted": True}])


@contextmanager
def merged() -> Iterator[list[Batch]]:
    """Every batch the traces' merges make."""
    made: list[Batch] = []
    merge = spine_module.merge

    def watched(*args: Any, **kwargs: Any) -> Batch:
        batch = merge(*args, **kwargs)
        made.append(batch)
        return batch

    with mock.patch.object(spine_module, "merge", watched):
        yield made


def cspa(advance: bool) -> tuple[set[Any], list[Batch]]:
    """CSPA over 300 variables (each assigned from one of the five before it, a tenth
    more assignments and dereferences at random), and the batches its merges made."""
    db = cspa_database(300)
    with merged() as made:
        found = answers(db, ["valueAlias(x, y)"], advance, sorted_from=64)[0]
    return found, [b for b in made if len(b) >= 64]


def test_cspas_merges_keep_one_time_once_rounds_are_settled_unsorted() -> None:
    found, made = cspa(True)
    kept, apart = cspa(False)
    assert found == kept and len(found) > 10_000
    assert made and all(uniform(b.times) for b in made)
    assert any(not uniform(b.times) for b in apart)  # (the reference: a time per row)
