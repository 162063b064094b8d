"""Answer digests: order-free, multiset-aware, and the same from rows or from changes.

Layer: bench (tests).
"""

from __future__ import annotations

import numpy as np

from bench.answers import Answer, Tally, digest, row_hash


def test_digest_ignores_order_and_normalises_values() -> None:
    rows = [(1, "a", 3), (2, "b", 4), (5, "c", 6)]
    assert digest(rows) == digest(list(reversed(rows)))
    assert row_hash((np.int64(1), "a", 3.0)) == row_hash((1, "a", 3))
    assert digest(rows) != digest(rows[:2])
    assert digest([(1, 2)]) != digest([(2, 1)])


def test_tally_of_changes_equals_the_answer_of_the_rows() -> None:
    tally = Tally(digest_rows=True)
    for row in [(1, "x"), (2, "y"), (3, "z")]:
        tally.add(row, 1)
    tally.add((2, "y"), -1)
    tally.add((4, "w"), 1)
    assert tally.answer() == Answer.of([(4, "w"), (3, "z"), (1, "x")], digest_rows=True)
    assert Answer.of([(1,), (2,)], digest_rows=False) == Answer(2, None)
