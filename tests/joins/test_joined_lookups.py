"""Lookups joined with the one time of the rows asking (ADR 0086).

`Tuning.joined_lookups`: a delta query's extenders, when the prefixes they are asked
about are all at one time, look up with each batch's found times joined with it (and
each found part's diffs as one where they agree); `Tuning.joined_pairs`: a binary
join's changes do the same. Off, the found times are gathered as stored and joined
later (the reference). Every time a candidate meets is joined with its prefix's time in
the end, so both must send the same updates, times included: live recursive programs
(iteration scopes: entries of earlier epochs at later rounds, incomparable with the
step's time) under inserts and retractions, on and off, every update the delta queries
and joins send compared, and the answers against the reference evaluator; and CSPA,
live, against the reference, its candidates holding one time on and a time a row off.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from bench.analysis_data import CSPA
from datalog import Database
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from differential.batch import Updates, consolidate, uniform
from differential.dataflow import Stream
from differential.operators.join import JoinOp
from differential.tuning import Tuning, tuned
from joins.delta_query import DeltaQueryOp
from joins.extenders import Prefixes, Proposals
from tests.budget import examples
from tests.datalog.answers import Accumulated

DECLS = """
.decl a(x: number, y: number)
.decl b(x: number, y: number)
.decl c(x: number, y: number)
.decl h(x: number, y: number)
.decl g(x: number, y: number)
"""
# Recursions whose bodies are delta queries (three atoms) and binary joins (two), and
# a negation read inside one: their lookups meet batches of several rounds and epochs.
RULES = {
    "delta query": "h(x, y) :- a(x, y).\nh(x, y) :- h(x, z), b(z, w), c(w, y).",
    "binary": "h(x, y) :- a(x, y).\nh(x, y) :- h(x, z), h(z, y).",
    "mutual": (
        "h(x, y) :- a(x, y).\ng(x, y) :- h(y, x).\n"
        "h(x, y) :- g(z, x), b(z, w), g(w, y).\ng(x, y) :- h(x, z), c(z, y)."
    ),
    "negation": "h(x, y) :- a(x, y).\nh(x, y) :- h(x, z), b(z, w), c(w, y), !a(y, x).",
}
PAIRS = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=10)
FACTS = st.fixed_dictionaries({"a": PAIRS, "b": PAIRS, "c": PAIRS})
# Numpy at every size (the rows tactic of a few changes never looks up by columns), and
# parts of two rows (every extension, join and lookup in several parts).
PRESETS = [Tuning.columns_only(), Tuning.small_parts().but(few=0, few_pairs=0)]


@contextmanager
def proposed() -> Iterator[list[int]]:
    """Per extension by proposals, how many candidates hold a time of their own (0 when
    their times are one repeated time)."""
    apart: list[int] = []
    extend = Proposals.extend

    def extending(self: Proposals, *args: Any) -> Prefixes:
        one = self.times is None or len(self) < 2 or uniform(self.times)
        apart.append(0 if one else len(self))
        return extend(self, *args)

    with mock.patch.object(Proposals, "extend", extending):
        yield apart


@contextmanager
def sent() -> Iterator[Counter[tuple[Any, ...]]]:
    """Every update the delta queries and binary joins send, `(operator, row, time)`
    to its summed diff."""
    seen: Counter[tuple[Any, ...]] = Counter()
    send = Stream.send

    def sending(stream: Stream, updates: Updates) -> None:
        if isinstance(stream.producer, DeltaQueryOp | JoinOp) and len(updates):
            name = stream.producer.describe()
            for *row, time, diff in consolidate(updates).rows():
                seen[(name, tuple(row), time)] += diff
        send(stream, updates)

    with mock.patch.object(Stream, "send", sending):
        yield seen


def expected(program: str, facts: dict[str, set[tuple[int, int]]], query: str) -> set[Any]:
    checked = check_program(parse_program(program))
    computed = reference.evaluate(checked, {r: sorted(rows) for r, rows in facts.items()})
    return set(reference.answer(check_query(parse_query(query), checked.schema), computed))


def live(
    program: str, steps: list[dict[str, list[tuple[int, int]]]], query: str, tuning: Tuning
) -> tuple[list[set[Any]], Counter[tuple[Any, ...]]]:
    """A subscription to `query`'s answer after each transaction of `steps` (each
    retracts half of what is there and inserts its rows), and what was sent."""
    facts: dict[str, set[tuple[int, int]]] = {}
    answers = []
    with tuned(tuning), sent() as seen:
        db = Database()
        db.define(program)
        answer = Accumulated()
        db.subscribe(query, answer)
        for step in steps:
            with db.transaction() as tx:
                for name, rows in step.items():
                    held = sorted(facts.get(name, set()))
                    gone = set(held[::2])
                    tx.retract(name, sorted(gone))
                    tx.insert(name, sorted(set(rows) - gone))
                    facts[name] = (set(held) - gone) | set(rows) - gone
            answers.append(answer.rows())
            assert answers[-1] == expected(program, facts, query)
    return answers, +seen


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(RULES)), st.lists(FACTS, min_size=2, max_size=3), st.data())
def test_joined_lookups_send_what_the_reference_sends(
    name: str, steps: list[dict[str, list[tuple[int, int]]]], data: st.DataObject
) -> None:
    preset = data.draw(st.sampled_from(PRESETS))
    note(RULES[name])
    program = DECLS + RULES[name]
    on, sent_on = live(
        program, steps, "h(x, y)", preset.but(joined_lookups=True, joined_pairs=True)
    )
    off, sent_off = live(
        program, steps, "h(x, y)", preset.but(joined_lookups=False, joined_pairs=False)
    )
    assert on == off
    assert sent_on == sent_off


_RNG = random.Random(0)
ASSIGN = [(i, _RNG.randrange(max(1, i - 5), i + 1) if i else 0) for i in range(300)]
ASSIGN += [(_RNG.randrange(300), _RNG.randrange(300)) for _ in range(30)]
DEREFERENCE = [(_RNG.randrange(300), _RNG.randrange(300)) for _ in range(30)]


def test_cspa_live_answers_as_the_reference() -> None:
    """CSPA over 40 variables, fed in three transactions (the last retracting a tenth
    of the assignments), with and without the joined lookups."""
    rng = random.Random(0)
    n = 40
    assign = [(i, rng.randrange(max(1, i - 5), i + 1) if i else 0) for i in range(n)]
    assign += [(rng.randrange(n), rng.randrange(n)) for _ in range(n // 10)]
    dereference = [(rng.randrange(n), rng.randrange(n)) for _ in range(n // 8)]
    facts = {"assign": set(assign) - set(assign[::10]), "dereference": set(dereference)}
    results, apart = [], []
    for on in (True, False):
        tuning = Tuning().but(joined_lookups=on, joined_pairs=on, sorted_from=64)
        with tuned(tuning), sent() as seen:
            db = Database()
            db.define(CSPA)
            answer = Accumulated()
            db.subscribe("valueAlias(x, y)", answer)
            db.insert("assign", assign[: n // 2])
            db.insert("dereference", dereference)
            db.insert("assign", assign[n // 2 :])
            db.retract("assign", assign[::10])
            found = answer.rows()
        with tuned(tuning), proposed() as times_apart:  # (one-shot: every time <= the step's)
            db = Database()
            db.define(CSPA)
            db.insert("assign", ASSIGN)
            db.insert("dereference", DEREFERENCE)
            assert len(db.query("valueAlias(x, y)")) > 10_000
        assert found == expected(CSPA, facts, "valueAlias(x, y)") and len(found) > 100
        results.append(+seen)
        apart.append(times_apart)
    assert results[0] == results[1]
    # On, the delta queries' candidates hold one time (their found times, of batches of
    # several rounds, were joined with the step's) but where entries of a later round
    # are met; off, a time a row wherever several rounds' batches are met (one-shot, 300
    # variables, as `test_advance_unsorted`).
    assert apart[0] and sum(apart[0]) * 100 < sum(apart[1])  # (868 and 688,787 rows)
