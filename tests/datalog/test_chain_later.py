"""Fused rounds in later epochs (`differential.operators.later_rounds`, ADR 0034).

Twin runs, fused and with fusion off (`test_chain.run`), of long chains that later
epochs extend, merge, cut and re-seed: every commit must give the same answers,
the same subscription changes and, at the end, the same inner state (the
distincts' and their arrangements' accumulations at each iteration of the next
epoch). Chains here are long (up to 60 rounds, most keys new) and meet each
other, so the rounds both run to the end and stop at keys whose history is later.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from hypothesis import given, note, settings
from hypothesis import strategies as st

from datalog.db.database import Database
from differential.operators import later_rounds
from differential.tuning import TUNING, tuned
from tests.budget import examples
from tests.datalog.test_chain import fusion
from tests.datalog.test_chain import inner_state as chain_state
from tests.datalog.test_chain import run as run_answers

HEADS = st.sampled_from(
    ["x + 1, y", "x + 1, (x * 7) band 3", "x + 2, y", "x + 1, y band 1", "x + 3, y - 1"]
)
ITERATIONS = 70  # beyond the longest chain (60 rounds)
Row = tuple[int, int]
SEEDS = st.tuples(st.integers(0, 12), st.integers(0, 3))


@st.composite
def programs(draw: st.DrawFn) -> str:
    limit = draw(st.integers(8, 60))
    lines = [
        ".decl base(x: number, y: number)",
        ".decl p(x: number, y: number)",
        ".decl q(x: number, y: number)",
    ]
    if draw(st.booleans()):
        lines.append("p(x, y) :- base(x, y).")
    mutual = draw(st.booleans())  # p and q feed each other: two distincts in one scope
    for _ in range(draw(st.integers(1, 2))):
        head, body = draw(st.sampled_from(["pq", "qp"] if mutual else ["pp"]))
        lines.append(f"{head}({draw(HEADS)}) :- {body}(x, y), x < {limit}.")
    if mutual:
        lines.append("p(x, y) :- q(x, y), y = 1." if draw(st.booleans()) else "q(0, 3).")
    return "\n".join(lines)


commits = st.lists(
    st.lists(
        st.tuples(st.sampled_from(["insert", "retract"]), st.sampled_from(["base", "p"]), SEEDS),
        min_size=1,
        max_size=3,
    ),
    min_size=2,
    max_size=6,
)


def run(program: str, commits: list[list[tuple[str, str, Row]]], fused: bool) -> list[Any]:
    """`test_chain.run`'s answers and changes, and after every commit the inner
    state at each iteration a chain reaches (a key evaluated at a wrong time shows
    there, though the answers heal by the end of the epoch)."""
    states = []
    with fusion(fused):
        db = Database()
        db.define(program)
        for commit in commits:
            with db.transaction() as tx:
                for op, relation, row in commit:
                    (tx.insert if op == "insert" else tx.retract)(relation, [row])
            states.append(inner_state(db))
    return [run_answers(program, commits, fused), states]


def inner_state(db: Database) -> list[list[list[tuple[object, ...]]]]:
    """`test_chain.inner_state` of every dataflow, at iterations up to `ITERATIONS`."""
    return [
        part
        for dataflow in db.engine.dataflows
        for part in chain_state(dataflow, db.epoch, ITERATIONS)
    ]


@contextmanager
def counted() -> Iterator[list[bool]]:
    """What each `later_rounds.run` returned (True: it ran rounds) within the block."""
    taken: list[bool] = []
    original = later_rounds.run

    def spy(*args: object) -> bool:
        taken.append(original(*args))  # type: ignore[arg-type]
        return taken[-1]

    with mock.patch.object(later_rounds, "run", spy):
        yield taken


@settings(max_examples=examples(80), deadline=None)
@given(programs(), commits)
def test_later_epochs_give_the_scheduler_answers(program: str, commits: list) -> None:
    note(program)
    assert run(program, commits, True) == run(program, commits, False)


@tuned(TUNING.but(later_handover=16))
@settings(max_examples=examples(30), deadline=None)
@given(programs(), commits)
def test_later_epochs_hand_over_in_chunks(program: str, commits: list) -> None:
    note(program)
    assert run(program, commits, True) == run(program, commits, False)


SECOND = (
    ".decl p(x: number, y: number)\n.decl q(x: number, y: number)\np(x + 1, y) :- p(x, y), x < 300."
)


def test_a_second_chain_and_a_retraction_take_the_later_rounds() -> None:
    """Epoch 2 seeds a second chain (no key has history), epoch 3 retracts the first
    (every key's history is at earlier iterations of earlier epochs), epoch 4 seeds
    it again, epoch 5 seeds a chain that meets the second (stopping there)."""
    steps = [
        [("insert", "p", (0, 0))],
        [("insert", "p", (0, 1))],
        [("retract", "p", (0, 0))],
        [("insert", "p", (0, 0))],
        [("insert", "p", (100, 1)), ("insert", "p", (150, 2))],
        [("retract", "p", (0, 1))],
    ]
    with counted() as taken:
        fused = run(SECOND, steps, True)  # type: ignore[arg-type]
    assert fused == run(SECOND, steps, False)  # type: ignore[arg-type]
    fused = fused[0]
    assert taken.count(True) >= 4
    assert len(fused[1][0]) == 602 and len(fused[2][0]) == 301 and len(fused[4][0]) == 753
    assert len(fused[5][0]) == 653  # (100, 1) keeps 201 rows of the second chain


def test_fusion_off_runs_no_later_rounds() -> None:
    with counted() as taken, fusion(False):
        run(SECOND, [[("insert", "p", (0, 0))], [("retract", "p", (0, 0))]], False)
    assert taken == []


@tuned(TUNING.but(later_handover=64))
def test_a_mutual_chain_takes_the_later_rounds() -> None:
    """`q(x + 1, y) :- p(x, y)` and `p(x, y) :- q(x, y)`: two distincts; a second
    chain, a retraction and a re-seed, each in its own epoch."""
    program = (
        ".decl p(x: number, y: number)\n.decl q(x: number, y: number)\n"
        "q(x + 1, y) :- p(x, y), x < 200.\np(x, y) :- q(x, y)."
    )
    steps = [
        [("insert", "p", (0, 0))],
        [("insert", "p", (0, 1))],
        [("retract", "p", (0, 0))],
        [("insert", "p", (5, 0))],
    ]
    with counted() as taken:
        fused = run(program, steps, True)  # type: ignore[arg-type]
    assert fused == run(program, steps, False)  # type: ignore[arg-type]
    assert taken.count(True) >= 3
    assert [len(p) for p, _ in fused[0][:4]] == [201, 402, 201, 397]
