"""Fused rounds (`differential.operators.chain`, ADR 0029) against the scheduler's.

Twin runs of the same random recursion and transactions, once as the engine runs
(fused rounds where they apply) and once with fusion off: every commit must give
the same answers to a one-shot query and the same changes to a subscription that
lives through all epochs (so later retractions and re-insertions read the state
the fused rounds left). The recursions are chains of maps and filters on a finite
domain (`band 15`), mixed with facts inserted into the recursive relations, a base
relation, mutual recursion (several distincts in one scope), and sometimes a join
(which keeps the scope off the fused path while it has work).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from hypothesis import given, note, settings
from hypothesis import strategies as st

from datalog import Change, Database
from differential.batch import Updates
from differential.engine import Dataflow
from differential.operators import chain, iterate
from differential.operators.arrange import ArrangeOp
from differential.operators.reduce import ReduceOp
from differential.tuning import TUNING, tuned

Row = tuple[int, int]
STEPS = st.sampled_from(["x + 1", "x + 3", "x - 2", "x * 3", "y", "x bxor y", "-x", "7"])
TESTS = st.sampled_from(["x < 12", "y != 5", "x >= y", "x = x", "x * y < 40"])
ROWS = st.tuples(st.integers(-3, 20), st.integers(-3, 20))


@st.composite
def programs(draw: st.DrawFn) -> str:
    lines = [
        ".decl base(x: number, y: number)",
        ".decl p(x: number, y: number)",
        ".decl q(x: number, y: number)",
        "p(x, y) :- base(x, y).",
    ]
    mutual = draw(st.booleans())  # p and q derive each other: two distincts in one scope
    for _ in range(draw(st.integers(1, 3))):
        x, y, test = draw(STEPS), draw(STEPS), draw(TESTS)
        head, body = draw(st.sampled_from(["pp", "pq", "qp"])) if mutual else "pp"
        lines.append(f"{head}(({x}) band 15, ({y}) band 15) :- {body}(x, y), {test}.")
    if draw(st.booleans()):
        lines.append("p(x, z) :- p(x, y), base(y, z), z < 3.")
    if draw(st.booleans()):
        lines.append("p(0, 0).")
    return "\n".join(lines)


transactions = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["insert", "retract"]), st.sampled_from(["base", "p", "q"]), ROWS
        ),
        min_size=1,
        max_size=4,
    ),
    min_size=1,
    max_size=5,
)


@contextmanager
def fusion(on: bool) -> Iterator[None]:
    if on:
        yield
        return
    with mock.patch.object(iterate, "fused_rounds", lambda scope: None):
        yield


def run(program: str, commits: list[list[tuple[str, str, Row]]], fused: bool) -> list[Any]:
    """Per commit: the one-shot answers and the subscriptions' changes, as sets; at
    the end, the state of the live dataflows' iteration scopes."""
    seen: list[tuple[int, frozenset[tuple[Row, int]]]] = []

    def record(change: Change) -> None:
        rows = Counter()
        for row, diff in zip(change.rows, change.diffs, strict=True):
            rows[tuple(row)] += diff
        seen.append((change.epoch, frozenset((r, n) for r, n in rows.items() if n)))

    out: list[Any] = []
    with fusion(fused):
        db = Database()
        db.define(program)
        db.subscribe("p(x, y)", record)
        db.subscribe("q(x, y)", record)
        for commit in commits:
            with db.transaction() as tx:
                for op, relation, row in commit:
                    (tx.insert if op == "insert" else tx.retract)(relation, [row])
            out.append((sorted(db.query("p(x, y)")), sorted(db.query("q(x, y)"))))
        held = [inner_state(dataflow, db.epoch) for dataflow in db.engine.dataflows]
    return [*out, seen, held]


def inner_state(
    dataflow: Dataflow, epoch: int, iterations: int = 20
) -> list[list[list[tuple[object, ...]]]]:
    """What the live dataflow's inner distincts and their input arrangements hold,
    as accumulated at the iterations of the next epoch: the state later epochs read,
    whatever the batching or compaction (and so at inner times, not only in sum)."""
    state = []
    for op in dataflow.root.all_operators():
        if op.scope.parent is None:
            continue
        if isinstance(op, ReduceOp):
            op.settle()
            held = op.trace.updates()
        elif isinstance(op, ArrangeOp):
            op.seal()
            held = op.settle().updates()
        else:
            continue
        state.append([_accumulated(held, (epoch + 1, i)) for i in range(iterations)])
    return state


def _accumulated(updates: Updates, time: tuple[int, int]) -> list[tuple[object, ...]]:
    counts: Counter[tuple[object, ...]] = Counter()
    for *row, at, diff in updates.rows():
        if all(a <= b for a, b in zip(at, time, strict=True)):
            counts[tuple(row)] += diff
    return sorted((*row, n) for row, n in counts.items() if n)


@settings(max_examples=60)
@given(programs(), transactions)
def test_fused_rounds_give_the_scheduler_answers(program: str, commits: list) -> None:
    note(program)
    assert run(program, commits, True) == run(program, commits, False)


@contextmanager
def fused_runs() -> Iterator[list[bool]]:
    """What each `Chain.run` returned (True: it ran fused rounds) within the block."""
    taken: list[bool] = []
    original = chain.Chain.run

    def spy(self: chain.Chain, time: tuple[int, ...]) -> bool:
        taken.append(original(self, time))
        return taken[-1]

    with mock.patch.object(chain.Chain, "run", spy):
        yield taken


def test_the_counter_takes_the_fused_rounds() -> None:
    with fused_runs() as taken:
        db = Database()
        db.define(".decl c(x: number)\nc(0).\nc(x + 1) :- c(x), x < 10000.")
        assert len(db.query("c(x)")) == 10_001
        db.retract("c", [(0,)])
        assert db.query("c(x)") == []
        db.insert("c", [(0,)])
        assert len(db.query("c(x)")) == 10_001
    assert any(taken)


@tuned(TUNING.but(handover=64))
def test_a_mutual_chain_takes_the_fused_rounds() -> None:
    """`b(x + 1) :- a(x)` and `a(x) :- b(x)`: two distincts, each feeding the other."""
    program = (
        ".decl a(x: number)\n.decl b(x: number)\na(0).\nb(x + 1) :- a(x), x < 3000.\na(x) :- b(x)."
    )
    with fused_runs() as taken:
        db = Database()
        db.define(program)
        assert len(db.query("a(x)")) == 3001 and len(db.query("b(x)")) == 3000
        db.retract("a", [(0,)])
        assert db.query("a(x)") == [] and db.query("b(x)") == []
    assert any(taken)


def test_a_long_chain_hands_over_in_chunks_and_retracts() -> None:
    db = Database()
    db.define(".decl c(x: number, y: number)\nc(x + 1, (x * 7) band 3) :- c(x, _), x < 2000.")
    sub: Counter[tuple[int, int]] = Counter()

    def record(change: Change) -> None:
        for row, diff in zip(change.rows, change.diffs, strict=True):
            sub[tuple(row)] += diff

    db.subscribe("c(x, y)", record)
    db.insert("c", [(0, 0)])
    assert len(db.query("c(x, y)")) == 2_001
    assert sum(sub.values()) == 2_001
    db.insert("c", [(1_000, 9)])  # its successor (1_001, 0) is known: one round
    assert len(db.query("c(x, y)")) == 2_002
    db.retract("c", [(0, 0)])  # what stays is (1_000, 9)'s chain
    assert len(db.query("c(x, y)")) == 1_001
    assert +sub == Counter(tuple(r) for r in db.query("c(x, y)"))


def test_a_chain_wraps_around_through_the_smallest_integer() -> None:
    """`x + 1` wraps like int64, and the smallest int64 (the key set's free-slot
    marker) is a key like any other, fused or not."""
    program = (
        ".decl c(x: number)\nc(9223372036854775800).\nc(x + 1) :- c(x), x != -9223372036854775800."
    )
    answers = []
    for fused in (True, False):
        with fusion(fused):
            db = Database()
            db.define(program)
            answers.append(sorted(db.query("c(x)")))
    assert answers[0] == answers[1]
    assert len(answers[0]) == 17 and (-(2**63),) in answers[0]
