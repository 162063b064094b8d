"""The engine against the reference evaluator, after every commit (DESIGN §10).

For a random valid program and a random stream of transactions over its base
relations (and sometimes facts inserted into one derived relation), every
derived relation's full query and one query with a constant are subscribed
before the first commit. After each commit, each subscription's accumulated
changes (its snapshot plus every diff since) must equal `reference.answer` on
a from-scratch reference evaluation of the current facts, no row's count may
leave {0, 1}, and `Database.query` must agree, both through the live dataflow
and through a one-shot dataflow (the same query with renamed variables, which
no subscription shares). The join plan (`auto`, `wcoj` delta queries or
`binary` joins) is drawn separately for the subscriptions and the one-shot
queries, so the plans are also compared with each other.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog import Change, Database
from datalog.eval import reference
from datalog.lang.checks import CheckedProgram, CheckedQuery, check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from datalog.plan.wcoj import JoinPlan
from tests.budget import examples
from tests.datalog.programs import (
    BASE,
    Generated,
    Row,
    Types,
    apply,
    constant_query,
    format_stream,
    full_query,
    programs,
    streams,
)


class Accumulated:
    """A subscription's answer, rebuilt from its snapshot and changes."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.counts: Counter[tuple[Any, ...]] = Counter()
        self.changes: list[Change] = []

    def __call__(self, change: Change) -> None:
        assert change.snapshot == (not self.changes), f"{self.query}: snapshot comes first, once"
        assert len(change.rows) == len(change.diffs)
        self.changes.append(change)
        for row, diff in zip(change.rows, change.diffs, strict=True):
            self.counts[row] += diff
        for row, n in self.counts.items():
            assert 0 <= n <= 1, f"{self.query}: row {row} has count {n} at epoch {change.epoch}"

    def rows(self) -> set[tuple[Any, ...]]:
        return {row for row, n in self.counts.items() if n}


PLANS: st.SearchStrategy[JoinPlan] = st.sampled_from(("auto", "wcoj", "binary"))


# Both kernels (Python for a few rows, numpy for many) meet the same oracle.
pytestmark = pytest.mark.usefixtures("small_path")


def renamed(query: str) -> str:
    """The same query with its variables renamed: a different live key, the same answer."""
    return query.replace("x", "y")


@dataclass(frozen=True)
class Plans:
    """The join plan of the subscriptions, and of the one-shot queries (often another)."""

    live: JoinPlan
    once: JoinPlan


def check_all(
    db: Database,
    checked: CheckedProgram,
    queries: dict[str, CheckedQuery],
    subs: dict[str, Accumulated],
    facts: dict[str, set[Row]],
    plans: Plans,
    when: str,
) -> None:
    relations = reference.evaluate(checked, facts)
    for text, query in queries.items():
        expected = reference.answer(query, relations)
        assert subs[text].rows() == expected, f"{when}: subscription `{text}`"
        assert set(db.query(text, plans.live)) == expected, f"{when}: query `{text}`"
        once = renamed(text)
        assert set(db.query(once, plans.once)) == expected, f"{when}: one-shot `{once}`"


def queries_of(generated: Generated, data: st.DataObject) -> list[str]:
    found = [full_query(r, generated.relations[r]) for r in generated.derived]
    constant = data.draw(constant_query(generated), label="constant query")
    return list(dict.fromkeys([*found, constant]))


def writable(generated: Generated, data: st.DataObject) -> dict[str, Types]:
    """The base relations and, sometimes, a derived one: facts may be inserted into it too."""
    out = dict(BASE)
    candidates = [r for r in generated.derived if generated.relations[r]]  # not nullary
    if candidates and data.draw(st.integers(0, 3), label="write derived?") == 0:
        chosen = data.draw(st.sampled_from(candidates), label="derived written")
        out[chosen] = generated.relations[chosen]
    return out


@settings(
    max_examples=examples(100),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_subscriptions_and_queries_equal_the_reference_after_every_commit(
    data: st.DataObject,
) -> None:
    check_against_reference(data)


def check_against_reference(data: st.DataObject) -> None:
    """A drawn program, stream and queries: every subscription and one-shot query
    equals the reference evaluator before and after every commit."""
    generated = data.draw(programs(), label="program")
    stream = data.draw(streams(writable(generated, data)), label="stream")
    queries = queries_of(generated, data)
    plans = Plans(data.draw(PLANS, label="live plan"), data.draw(PLANS, label="one-shot plan"))
    note(f"program:\n{generated.text}")
    note(f"stream:\n{format_stream(stream)}")
    note(f"queries: {queries}")

    checked = check_program(parse_program(generated.text))
    checked_queries = {q: check_query(parse_query(q), checked.schema) for q in queries}
    db = Database()
    db.define(generated.text)
    subs = {q: Accumulated(q) for q in queries}
    for q, acc in subs.items():
        db.subscribe(q, acc, plans.live)
    facts: dict[str, set[Row]] = {}
    check_all(db, checked, checked_queries, subs, facts, plans, "before any commit")
    for n, tx in enumerate(stream):
        with db.transaction() as t:
            for op, relation, row in tx:
                (t.insert if op == "insert" else t.retract)(relation, [row])
        apply(facts, tx)
        check_all(db, checked, checked_queries, subs, facts, plans, f"after transaction {n}")
