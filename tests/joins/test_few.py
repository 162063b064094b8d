"""A pipeline over a few changes on Python lists (joins/few.py) against its numpy twin.

The relation `e` is committed over several epochs of random inserts and
retractions, so its trace holds unconsolidated history: several batches, the few
rows waiting unmerged in the spine, and a staged epoch that `include_delta` shows
or hides. Prefixes carry random times (earlier and later than the entries they
meet) and multiplicities. Extending (propose by the fewest entries, validate by
the others) and checking must give exactly the numpy extenders' updates: the
same rows, times and multiplicities once consolidated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from differential.batch import Updates
from differential.engine import Engine
from differential.operators.shared import ImportOp
from differential.trace.batch import key_hash
from differential.tuning import TUNING
from joins import few
from joins.extenders import CollectionExtender, Prefixes
from tests.differential.harness import new_engine, requests

Row = tuple[int, ...]
Op = tuple[bool, Row]
DOMAIN = st.integers(0, 2)  # few values: rows are inserted, retracted and inserted again
PAIRS = st.tuples(DOMAIN, DOMAIN)
EPOCHS = st.lists(st.lists(st.tuples(st.booleans(), PAIRS), max_size=6), min_size=1, max_size=8)


class History:
    """`e` committed epoch by epoch, arranged by first, by second and by both columns,
    with the last epoch's changes staged (pending)."""

    def __init__(self, epochs: Sequence[Sequence[Op]], staged: Sequence[Op]) -> None:
        self.engine: Engine = new_engine({"e": 2})
        df = self.engine.dataflow("few")
        self.by_first: ImportOp = df.import_input("e", [0, 1], 1)
        self.by_second: ImportOp = df.import_input("e", [1, 0], 1)
        self.by_both: ImportOp = df.import_input("e", [0, 1], 2)
        self.engine.start(df)
        for ops in epochs:
            self.engine.commit({"e": requests(ops, 2)})
        self.now = (self.engine.epoch + 1,)
        inp = self.engine.inputs["e"]
        inp.stage(inp.diffs(requests(staged, 2), self.now[0]), self.now[0])


def _prefixes(vars_: Sequence[str], rows: Sequence[tuple[Row, int, int]]) -> Prefixes:
    columns = [np.array([r[i] for r, _, _ in rows], dtype=np.int64) for i in range(len(vars_))]
    times = np.array([[t for _, t, _ in rows]], dtype=np.int64).reshape(1, len(rows))
    diffs = np.array([d for _, _, d in rows], dtype=np.int64)
    return Prefixes(tuple(vars_), Updates(tuple(columns), times, diffs))


Bag = dict[tuple[Row, tuple[int, ...]], int]


def _bag(updates: Updates) -> Bag:
    """Each (row, time) with its summed multiplicity, zero sums dropped."""
    out: Counter[tuple[Row, tuple[int, ...]]] = Counter()
    columns = [c.tolist() for c in updates.columns]
    times = updates.times.T.tolist()
    for i, diff in enumerate(updates.diffs.tolist()):
        out[(tuple(c[i] for c in columns), tuple(times[i]))] += diff
    return {k: v for k, v in out.items() if v}


def _listed(prefixes: list[few.Prefix] | None) -> Bag:
    assert prefixes is not None
    if not prefixes:
        return {}
    return _bag(few.to_updates(prefixes, [np.dtype(np.int64)] * len(prefixes[0][0]), 1))


PREFIX_ROWS = st.lists(
    st.tuples(st.tuples(DOMAIN), st.integers(1, 8), st.sampled_from([1, -1, 2])),
    min_size=1,
    max_size=6,
)


@given(
    epochs=EPOCHS,
    staged=st.lists(st.tuples(st.booleans(), PAIRS), max_size=4),
    rows=PREFIX_ROWS,
    new=st.booleans(),
)
def test_extending_by_two_bindings_equals_propose_and_validate(
    epochs: list[list[Op]], staged: list[Op], rows: list[tuple[Row, int, int]], new: bool
) -> None:
    """`y` such that `e(x, y)` and `e(y, x)`: one binding proposes, the other validates."""
    h = History(epochs, staged)
    forward = CollectionExtender("x", "y", h.by_first, h.by_both, ("x", "y"), new)
    backward = CollectionExtender("x", "y", h.by_second, h.by_both, ("y", "x"), new)
    p = _prefixes(["x"], rows)
    every = np.arange(len(p), dtype=np.intp)
    proposed = backward.validate(p, forward.propose(p, every, h.now), h.now)
    expected = _bag(proposed.extend(p, "y").updates)

    bindings = [
        few.Binding(0, h.by_first, new),
        few.Binding(0, h.by_second, new),
    ]
    got = few.extend(few.prefixes_of(p.updates), bindings, h.now)
    assert got is not None
    assert _listed(got) == expected


@given(
    epochs=EPOCHS,
    staged=st.lists(st.tuples(st.booleans(), PAIRS), max_size=4),
    rows=st.lists(
        st.tuples(PAIRS, st.integers(1, 8), st.sampled_from([1, -1, 2])), min_size=1, max_size=6
    ),
    new=st.booleans(),
)
def test_checking_a_bound_binding_equals_the_numpy_filter(
    epochs: list[list[Op]], staged: list[Op], rows: list[tuple[Row, int, int]], new: bool
) -> None:
    """`e(y, x)` checked on bound `(x, y)`: every entry met, times joined."""
    h = History(epochs, staged)
    p = _prefixes(["x", "y"], rows)
    check = CollectionExtender("y", "x", h.by_second, h.by_both, ("y", "x"), new)
    expected = _bag(check.filter(p, h.now).updates)
    got = few.matched(few.prefixes_of(p.updates), [1, 0], h.by_both, h.now, new)
    assert _listed(got) == expected


def test_a_hub_sends_the_pipeline_back_to_numpy() -> None:
    hub = [(True, (0, y)) for y in range(TUNING.few_pairs + 1)]
    h = History([hub], [])
    prefixes = few.prefixes_of(_prefixes(["x"], [((0,), 1, 1)]).updates)
    binding = few.Binding(0, h.by_first, False)
    assert few.extend(prefixes, [binding], h.now) is None
    assert (
        few.extend(few.prefixes_of(_prefixes(["x"], [((1,), 1, 1)]).updates), [binding], h.now)
        == []
    )


@given(
    st.integers(1, 2),
    st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=8),
)
def test_few_keys_hash_as_key_hash_does_even_above_two_to_the_63(
    width: int, flat: list[int]
) -> None:
    """uint64 values above 2**63 wrap in the int64 hash column; the few keys' Python
    hashes must wrap alike, or a lookup misses a key that is there."""
    rows = [tuple(flat[i : i + width]) for i in range(0, len(flat) - width + 1, width)]
    if not rows:
        return
    columns = [np.array([r[c] for r in rows], dtype=np.uint64) for c in range(width)]
    assert few.few_keys(rows).hashes == key_hash(columns).tolist()  # type: ignore[arg-type]
