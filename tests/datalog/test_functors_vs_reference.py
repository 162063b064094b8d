"""The engine against the reference evaluator on a program that calls user functors
(plain and vectorized) in heads, filters, negations, recursion and aggregates.

For random transaction streams over its base relations, after every commit each
subscription's accumulated changes and a one-shot query of every derived
relation must equal the reference evaluator's answer on the current facts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from datalog import Database, vectorized
from datalog.eval import reference
from datalog.eval.functors import FunctorBinding, bind_program, bind_query, bindings
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from tests.budget import examples
from tests.datalog.answers import Accumulated

PROGRAM = """
.functor mix(a: number, b: number): number
.functor label(s: symbol, n: number): symbol
.decl e(x: number, y: number)
.decl name(x: number, s: symbol)
.decl m(x: number, v: number)
.decl l(x: number, s: symbol)
.decl r(x: number, y: number)
.decl c(x: number, n: number)
m(x, @mix(x, y)) :- e(x, y).
l(x, @label(s, x)) :- name(x, s), !m(x, @mix(x, 1)).
r(x, y) :- e(x, y), @mix(x, y) != 0.
r(x, z) :- r(x, y), e(y, z), @mix(y, z) > -2.
c(x, n) :- name(x, _), n = sum @mix(x, y) : { e(x, y) }.
"""
QUERIES = ("m(x, v)", "l(x, s)", "r(x, y)", "c(x, n)", "r(1, y)", 'l(x, "b@1")')


def mix(a: int, b: int) -> int:
    return (a * 31 + b * 7) % 5 - 2


PLAIN: dict[str, object] = {"mix": mix, "label": lambda s, n: f"{s}@{n}"}
VECTORIZED: dict[str, object] = {
    "mix": vectorized(lambda a, b: (a * 31 + b * 7) % 5 - 2),
    "label": vectorized(
        lambda s, n: np.array([f"{a}@{b}" for a, b in zip(s, n.tolist(), strict=True)])
    ),
}

Fact = tuple[str, tuple[Any, ...]]
numbers = st.integers(0, 5)
facts: st.SearchStrategy[Fact] = st.one_of(
    st.tuples(st.just("e"), st.tuples(numbers, numbers)),
    st.tuples(st.just("name"), st.tuples(numbers, st.sampled_from(("a", "b", "c")))),
)
steps = st.lists(st.tuples(st.booleans(), st.lists(facts, max_size=6)), min_size=1, max_size=6)


def expected(functors: dict[str, FunctorBinding], current: set[Fact]) -> dict[str, set[Any]]:
    checked = check_program(parse_program(PROGRAM))
    relations = reference.evaluate(bind_program(checked, functors), _by_relation(current))
    answers = {}
    for text in QUERIES:
        query = bind_query(check_query(parse_query(text), checked.schema), functors)
        answers[text] = reference.answer(query, relations)
    return answers


def _by_relation(current: set[Fact]) -> dict[str, list[tuple[Any, ...]]]:
    grouped: dict[str, list[tuple[Any, ...]]] = {"e": [], "name": []}
    for relation, row in current:
        grouped[relation].append(row)
    return grouped


@pytest.mark.parametrize("mode", ["plain", "vectorized"])
@settings(max_examples=examples(40))
@given(stream=steps)
def test_the_engine_equals_the_reference_with_functors(
    mode: str, stream: list[tuple[bool, list[Fact]]]
) -> None:
    functors = PLAIN if mode == "plain" else VECTORIZED
    db = Database(functors=functors)
    db.define(PROGRAM)
    watches = {text: Accumulated() for text in QUERIES}
    for text, watch in watches.items():
        db.subscribe(text, watch)
    current: set[Fact] = set()
    for insert, batch in stream:
        note(f"{'insert' if insert else 'retract'} {batch}")
        with db.transaction() as tx:
            for relation, row in batch:
                (tx.insert if insert else tx.retract)(relation, [row])
        current = current | set(batch) if insert else current - set(batch)
        answers = expected(bindings(functors), current)
        for text, watch in watches.items():
            assert watch.rows() == answers[text], text
            assert set(db.query(text.replace("x", "q"))) == answers[text], text
