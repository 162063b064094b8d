"""Fused rounds (`differential.operators.chain`, ADR 0029) against the scheduler's.

Twin runs of the same random recursion and transactions, once as the engine runs
(fused rounds where they apply) and once with fusion off: every commit must give
the same answers to a one-shot query and the same changes to a subscription that
lives through all epochs (so later retractions and re-insertions read the state
the fused rounds left). The recursions are chains of maps and filters on a finite
domain (`band 15`), mixed with facts inserted into the recursive relations, a base
relation, mutual recursion (several distincts in one scope), and joins with
relations the rounds do not change (fused through `chain_joins`, ADR 0046).
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
from differential.graph import Dataflow
from differential.operators import chain, iterate
from differential.operators.arrange import ArrangeOp
from differential.operators.reduce import ReduceOp
from differential.tuning import TUNING, tuned
from tests.budget import examples

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
        ".decl twice(x: number, y: number)",
        "twice(x, (2 * y) band 15) :- base(x, y).",
    ]
    mutual = draw(st.booleans())  # p and q derive each other: two distincts in one scope
    for _ in range(draw(st.integers(1, 3))):
        x, y, test = draw(STEPS), draw(STEPS), draw(TESTS)
        head, body = draw(st.sampled_from(["pp", "pq", "qp"])) if mutual else "pp"
        lines.append(f"{head}(({x}) band 15, ({y}) band 15) :- {body}(x, y), {test}.")
    if draw(st.booleans()):
        lines.append("p(x, z) :- p(x, y), base(y, z), z < 3.")
    for _ in range(draw(st.integers(0, 2))):  # joins with relations the rounds do not change
        lines.append(draw(STATIC_JOINS).replace("q(", "p(" if not mutual else "q("))
    if draw(st.booleans()):
        lines.append("p(0, 0).")
    return "\n".join(lines)


# Rules through joins with base relations (fused: `chain_joins`): on a key, on the
# dynamic side's second column, cross products (with projections of `base`: entries
# of multiplicity above one), two static relations joined on a variable the
# recursive atom does not have (Soufflé's `independent_body3`), and a derived
# relation that is not recursive.
STATIC_JOINS = st.sampled_from(
    [
        "q(y, z band 15) :- p(x, y), base(y, z).",
        "p(z, x) :- q(x, y), base(z, y), x < 9.",
        "q((x + 1) band 15, y) :- p(x, y), base(_, _).",
        "p((x + 2) band 15, y) :- p(x, y), base(z, _), base(_, z).",
        "p(x, w) :- q(x, y), twice(y, w), w < 14.",
        "q(y, x) :- p(x, y), base(_, 3).",
        "q(x, (y + 1) band 15) :- p(x, y), base(z, _), z > 5.",
    ]
)


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


@settings(max_examples=examples(60))
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


@tuned(TUNING.but(handover=64))
def test_rounds_through_joins_with_unchanged_relations_take_the_fused_rounds() -> None:
    """Soufflé's `independent_body3`: each round joins with `c` and `d`, which the
    rounds do not change; fused, and with the scheduler's answers and inner state
    after more facts, a retraction of the start and of a static fact."""
    program = """
    .decl a(x: number)
    .decl b(x: number)
    .decl c(y: number)
    .decl d(y: number)
    a(x) :- b(x), c(y), d(y).
    b(x + 1) :- a(x), x < 500.
    b(0). c(1). c(2). d(2). d(3).
    """
    results = []
    for fused in (True, False):
        with fusion(fused), fused_runs() as taken:
            db = Database()
            db.define(program)
            seen: Counter[tuple[object, ...]] = Counter()

            def record(change: Change) -> None:
                for row, diff in zip(change.rows, change.diffs, strict=True):
                    seen[tuple(row)] += diff  # noqa: B023 (used in this iteration only)

            db.subscribe("a(x)", record)
            answers = [sorted(db.query("a(x)"))]
            db.insert("c", [(3,)])  # a second witness: the same rows, twice derived
            answers.append(sorted(db.query("a(x)")))
            db.retract("d", [(2,), (3,)])
            answers.append(sorted(db.query("a(x)")))
            db.insert("d", [(1,)])
            answers.append(sorted(db.query("a(x)")))
            db.retract("b", [(0,)])
            answers.append(sorted(db.query("a(x)")))
            held = [inner_state(dataflow, db.epoch) for dataflow in db.engine.dataflows]
            results.append((answers, +seen, held, any(taken)))
    assert results[0][0][0] == [(x,) for x in range(501)]
    assert results[0][0][2] == [] and results[0][0][4] == []
    assert results[0][3], "the rounds through the joins were fused"
    assert not results[1][3]
    assert results[0][:3] == results[1][:3]


def test_fused_joins_repeat_entries_of_multiplicity_above_one() -> None:
    """Cross products with projections of `base`: the static side holds `()` twice
    (two rows with 3 second) and `7` twice, so each image is derived twice, in the
    distincts' input arrangements as in the scheduler's rounds."""
    program = """
    .decl base(x: number, y: number)
    .decl p(x: number, y: number)
    .decl q(x: number, y: number)
    p(x, y) :- base(x, y).
    p((x + 1) band 15, y) :- p(x, y), x < 12.
    q(x, y) :- p(x, y), base(_, 3).
    p(x, y) :- q(x, y), base(z, _), z > 5.
    """
    commits = [
        [("insert", "base", (1, 3)), ("insert", "base", (2, 3))],
        [("insert", "base", (7, 1)), ("insert", "base", (7, 2))],
        [("insert", "p", (0, 0))],
        [("insert", "p", (1, 1))],
        [("retract", "base", (7, 2))],
        [("retract", "p", (0, 0)), ("insert", "q", (5, 5))],
    ]
    with fused_runs() as taken:
        fused = run(program, commits, True)
    assert any(taken)
    assert fused == run(program, commits, False)


def test_rows_waiting_at_a_join_pass_the_next_join_at_their_own_round() -> None:
    """Fused rounds that start with rows queued at the first of two joins in a row:
    what they make the second join receive is at the same round (found by the
    random twin test: the second join's side was recorded a round early)."""
    program = """
    .decl base(x: number, y: number)
    .decl p(x: number, y: number)
    .decl q(x: number, y: number)
    p(x, y) :- base(x, y).
    p((x + 1) band 15, (x + 1) band 15) :- p(x, y), x < 12.
    p((x + 2) band 15, y) :- p(x, y), base(z, _), base(_, z).
    """
    commits = [[("insert", "base", (0, 0))]]
    with fused_runs() as taken:
        fused = run(program, commits, True)
    assert any(taken)
    assert fused == run(program, commits, False)


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
