"""Physical compaction of live traces (ADR 0040): whatever a live dataflow or an input
is given, epoch after epoch, it holds within twice its compacted contents plus
`TUNING.few`, readers' handles (history kept for `as_of`) still hold compaction back,
and internal inputs (views, parameter relations) keep no history."""

from __future__ import annotations

from collections import Counter

import numpy as np

from differential.batch import Updates
from differential.engine import Engine
from differential.graph import Dataflow
from differential.operators.arrange import ArrangeOp
from differential.operators.join import JoinOp
from differential.time import Antichain
from differential.trace.spine import Spine
from differential.tuning import TUNING, tuned
from tests.differential.harness import (
    I64,
    Accumulated,
    build_reach,
    collection,
    new_engine,
    reach_reference,
    requests,
)

TOGGLES = 200
ZERO = Antichain([(0,)])


def toggle(engine: Engine, name: str, row: tuple[int, ...], n: int) -> None:
    """Retract `row` at even `n`, insert it back at odd `n`."""
    engine.commit({name: requests([(n % 2 == 1, row)], len(row))})


def held(df: Dataflow) -> dict[int, int]:
    """Updates each of the dataflow's arrangements holds, by operator index."""
    return {i: updates for i, _, updates, _ in df.traces()}


def test_spine_advance_bounds_a_trace_nobody_reads() -> None:
    spine = Spine(1, [I64], 1)
    spine.insert(Updates.at([np.arange(10, dtype=np.int64)], (1,)), ZERO, ZERO)
    spine.advance(Antichain([(2,)]))  # the first advance measures: 10 updates
    for epoch in range(2, 2 + TOGGLES):
        diff = -1 if epoch % 2 == 0 else 1
        spine.insert(Updates.at([np.array([3], dtype=np.int64)], (epoch,), diff), ZERO, ZERO)
        spine.advance(Antichain([(epoch + 1,)]))
        assert len(spine) <= 2 * 10 + TUNING.few, f"epoch {epoch}"
    assert sorted(spine.accumulate(None).rows()) == [(k, (0,), 1) for k in range(10)]


def test_spine_advance_keeps_what_handles_hold() -> None:
    """A handle held back at epoch 1 keeps every epoch's state readable: compaction
    merges batches but collapses nothing a reader may still ask for."""
    spine = Spine(1, [I64], 1)
    kept = spine.handle(Antichain([(1,)]))
    present: dict[int, Counter[int]] = {}
    state: Counter[int] = Counter()
    for epoch in range(1, 1 + TOGGLES):
        key = epoch % 3
        diff = -1 if state[key] else 1
        state[key] += diff
        spine.insert(Updates.at([np.array([key], dtype=np.int64)], (epoch,), diff), ZERO, ZERO)
        spine.advance(Antichain([(epoch + 1,)]))
        present[epoch] = +state
    for epoch, expected in present.items():
        got = Counter({row[0]: row[2] for row in spine.accumulate((epoch,)).rows()})
        assert got == expected, f"epoch {epoch}"
    kept.release()
    spine.advance(Antichain([(TOGGLES + 1,)]))
    spine.compact()
    assert len(spine) == len(present[TOGGLES])


def build_unread_join(df: Dataflow) -> tuple[ArrangeOp, Accumulated]:
    """`a(x, y) ⋈ b(x)`: `a`'s side is arranged in the dataflow and read only when
    `b` changes (a tenant's or magic seed's partner), which it never does here."""
    a = ArrangeOp(collection(df, "a", 2).output, 1)
    b = df.import_input("b", [0], 1)
    return a, Accumulated(df.capture(JoinOp(a, b, [0, 1]).output, "join"))


def test_an_arrangement_nobody_reads_stays_bounded() -> None:
    engine = new_engine({"a": 2, "b": 1})
    engine.commit({"a": requests([(True, (k % 3, k)) for k in range(12)], 2)})
    engine.commit({"b": requests([(True, (1,))], 1)})
    df = engine.dataflow("unread")
    arranged, out = build_unread_join(df)
    engine.start(df)
    start = arranged.arranged_size()[0]
    for n in range(TOGGLES):
        toggle(engine, "a", (1, 4), n)
        assert arranged.arranged_size()[0] <= 2 * start + TUNING.few, f"toggle {n}"
        expected = {(1, y): 1 for y in (1, 7, 10, *((4,) if n % 2 else ()))}
        assert out.rows() == expected, f"toggle {n}"
    engine.commit({"b": requests([(True, (2,))], 1)})  # now the arrangement is read
    assert out.rows() == {(x, y): 1 for y in range(12) if (x := y % 3) in (1, 2)}


def test_an_iteration_scope_stays_bounded_and_exact() -> None:
    engine = new_engine({"edge": 2, "root": 1})
    chain = [(i, i + 1) for i in range(10)]
    engine.commit({"edge": requests([(True, e) for e in chain], 2)})
    engine.commit({"root": requests([(True, (3,))], 1)})
    df = engine.dataflow("reach")
    out = Accumulated(build_reach(df))
    engine.start(df)
    start = held(df)
    for n in range(TOGGLES):
        toggle(engine, "edge", (5, 6), n)
        for i, updates in held(df).items():
            assert updates <= 2 * start[i] + TUNING.few, f"toggle {n}, operator {i}"
        edges = set(chain) - ({(5, 6)} if n % 2 == 0 else set())
        assert out.rows() == reach_reference(edges, {(3,)}), f"toggle {n}"
    for name in ("edge", "root"):
        for arrangement in engine.inputs[name].arrangements.values():
            assert len(arrangement) <= 2 * (len(chain) + 1) + TUNING.few


def test_base_inputs_keep_history_and_internal_ones_do_not() -> None:
    engine = Engine(history=None)  # every epoch readable
    base = engine.create_input("base", [I64])
    internal = engine.create_input("internal", [I64], history=False)
    for n in range(TOGGLES):  # inserted at even `n`, retracted at odd
        engine.commit({"base": requests([(n % 2 == 0, (7,))], 1)})
        engine.commit({"internal": requests([(n % 2 == 0, (7,))], 1)})
        assert len(internal.presence) <= 2 + TUNING.few, f"toggle {n}"
    assert len(base.presence) >= TOGGLES  # the history `as_of` reads
    for epoch in range(1, engine.epoch + 1):
        present = (epoch + 1) // 2 % 2 == 1  # `base` changes at odd epochs
        assert engine.state_as_of("base", epoch).rows() == ([(7, (epoch,), 1)] if present else [])


def test_a_view_input_keeps_no_history() -> None:
    engine = Engine(history=None)
    engine.create_input("a", [I64, I64])
    engine.commit({"a": requests([(True, (k, k + 1)) for k in range(10)], 2)})
    df = engine.dataflow("view of a")
    output = df.capture(collection(df, "a", 2).output, "a")
    (view,) = engine.create_view(df, [("a-view", "a [view]", output)])
    for n in range(TOGGLES):
        toggle(engine, "a", (4, 5), n)
        assert len(view.presence) <= 2 * 10 + TUNING.few, f"toggle {n}"
    rows = sorted(view.presence.spine.accumulate(None).rows())
    assert rows == [(k, k + 1, (0,), 1) for k in range(10)]


def test_a_fueled_compaction_holds_what_a_whole_one_holds_after_every_epoch() -> None:
    """`Tuning.fueled_compaction` (ADR 0069): traces nobody reads, one growing and
    churning, compacted by a fueled merge advanced at each `advance` or by one merge
    (the reference): the same collection after every epoch, compactions that did
    spread over epochs (counted), and the fueled trace bounded too once they finish."""
    fueled = TUNING.but(merge_fuel=8, merge_effort=1, fueled_compaction=True)
    whole = TUNING.but(merge_fuel=8, merge_effort=1, fueled_compaction=False)
    spines = {"fueled": Spine(1, [I64, I64], 1), "whole": Spine(1, [I64, I64], 1)}
    rng = np.random.default_rng(5)
    spread, state = 0, Counter[tuple[int, int]]()
    for epoch in range(1, 300):
        rows = [(int(rng.integers(0, 300)), int(rng.integers(0, 4))) for _ in range(6)]
        diffs = [-1 if state[r] > 0 and rng.random() < 0.4 else 1 for r in rows]
        for row, diff in zip(rows, diffs, strict=True):
            state[row] += diff
        cols = [np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)]
        upd = Updates(tuple(cols), Updates.at(cols, (epoch,)).times, np.array(diffs))
        for name, tuning in (("fueled", fueled), ("whole", whole)):
            with tuned(tuning):
                spines[name].insert(upd, ZERO, ZERO)
                spines[name].advance(Antichain([(epoch + 1,)]))
        spread += spines["fueled"].merges_in_progress > 0
        for spine in spines.values():
            got = Counter({(r[0], r[1]): r[3] for r in spine.accumulate(None).rows()})
            assert +got == +state, epoch
    assert spread >= 3, spread
    with tuned(fueled):
        for epoch in range(300, 340):  # nothing new: the compaction under way finishes
            spines["fueled"].advance(Antichain([(epoch,)]))
    assert len(spines["fueled"]) <= 2 * sum(1 for n in state.values() if n) + TUNING.few
