"""A delta query gathers only what is read after each stage (ADR 0078).

`Tuning.narrow_prefixes`: each stage of a delta query's pipeline gathers the variables
its own checks, the later stages and the output read, and a delta query that ends a
rule's body outputs only the variables the head reads (`joins.pipeline.narrowed`,
`datalog.plan.order`). Off, every bound variable is gathered and output (the
reference). Both must answer as the reference evaluator, one-shot and live under
inserts and retractions, for bodies whose dropped variables are read late (a
predicate, a negation, a constant, recursion); and on, the CSPA rule's prefixes never
hold all four variables, its output two.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datalog import Database
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from differential.dataflow import Stream
from differential.tuning import TUNING, Tuning, tuned
from joins.delta_query import DeltaQueryOp
from joins.extenders import Prefixes, Proposals
from tests.budget import examples
from tests.datalog.answers import Accumulated

DECLS = """
.decl a(x: number, y: number)
.decl b(x: number, y: number)
.decl c(x: number, y: number)
.decl h(x: number, y: number)
"""
# Rule bodies of three or more atoms (the `auto` plan's delta query) whose heads drop
# variables, some of them read late: by a predicate, a negation, a constant, the head
# of a recursion.
RULES = {
    "cspa": "h(x, y) :- a(z, x), b(z, w), a(w, y).",
    "predicate": "h(x, y) :- a(x, z), b(z, w), c(w, y), w != x.",
    "negation": "h(x, y) :- a(x, z), b(z, w), c(w, y), !a(w, x).",
    "constant": "h(x, y) :- a(x, z), b(z, y), c(y, w), w = 2.",
    "one kept": "h(x, x) :- a(x, z), b(z, w), c(w, x).",
    "recursive": "h(x, y) :- a(x, y).\nh(x, y) :- h(x, z), b(z, w), c(w, y).",
    "four": "h(x, y) :- a(x, z), b(z, w), c(w, v), a(v, y), z < v.",
}
PAIRS = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=14)
FACTS = st.fixed_dictionaries({"a": PAIRS, "b": PAIRS, "c": PAIRS})
# Numpy at every size (the columns tactic narrows; the rows one keeps every variable),
# parts of two rows (every extension in several parts, `gathered` of none or many).
PRESETS = [Tuning.columns_only(), Tuning.small_parts().but(few=0, few_pairs=0)]


def expected(rule: str, facts: dict[str, list[tuple[int, int]]]) -> set[Any]:
    checked = check_program(parse_program(DECLS + rule))
    computed = reference.evaluate(checked, {r: sorted(set(rows)) for r, rows in facts.items()})
    return reference.answer(check_query(parse_query("h(x, y)"), checked.schema), computed)


def retracted(rows: list[tuple[int, int]]) -> set[tuple[int, int]]:
    return set(sorted(set(rows))[::2])


def live(rule: str, first: dict, then: dict) -> tuple[set[Any], set[Any]]:
    """A subscription's answer to `h` after `first` is inserted, and after half of
    `first`'s rows are retracted and `then`'s (but those) inserted in one transaction."""
    db = Database()
    db.define(DECLS + rule)
    answer = Accumulated()
    db.subscribe("h(x, y)", answer)
    for name, rows in first.items():
        db.insert(name, rows)
    before = answer.rows()
    with db.transaction() as tx:
        for name, rows in first.items():
            gone = retracted(rows)
            tx.retract(name, sorted(gone))
            tx.insert(name, [row for row in then[name] if row not in gone])
    return before, answer.rows()


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(RULES)), FACTS, FACTS, st.sampled_from(PRESETS))
def test_narrowed_delta_queries_answer_as_the_reference(
    name: str, first: dict, then: dict, preset: Tuning
) -> None:
    rule = RULES[name]
    after = {r: sorted((set(first[r]) | set(then[r])) - retracted(first[r])) for r in first}
    for narrow in (True, False):
        with tuned(preset.but(narrow_prefixes=narrow)):
            db = Database()
            db.define(DECLS + rule)
            for relation, rows in first.items():
                db.insert(relation, rows)
            assert set(db.query("h(x, y)")) == expected(rule, first), (name, narrow)
            before, now = live(rule, first, then)
        assert before == expected(rule, first), (name, narrow)
        assert now == expected(rule, after), (name, narrow)


@contextmanager
def watched() -> Iterator[tuple[list[int], list[tuple[str, ...]]]]:
    """The widths of what delta queries send, and the variables of every extension."""
    widths: list[int] = []
    extended: list[tuple[str, ...]] = []
    send, extend = Stream.send, Proposals.extend

    def sending(stream: Stream, updates: Any) -> None:
        if isinstance(stream.producer, DeltaQueryOp):
            widths.append(len(updates.columns))
        send(stream, updates)

    def extending(self: Proposals, *args: Any) -> Prefixes:
        out: Prefixes = extend(self, *args)
        extended.append(out.vars)
        return out

    with (
        mock.patch.object(Stream, "send", sending),
        mock.patch.object(Proposals, "extend", extending),
    ):
        yield widths, extended


def cspa_run(narrow: bool) -> tuple[set[Any], list[int], list[tuple[str, ...]]]:
    db = Database()
    db.define(DECLS + RULES["cspa"])
    db.insert("a", [(i, (i * 7) % 40) for i in range(40)] + [(i, i + 1) for i in range(39)])
    db.insert("b", [(i, (i * 3) % 40) for i in range(40)])
    with tuned(TUNING.but(narrow_prefixes=narrow)), watched() as (widths, extended):
        answer = set(db.query("h(x, y)"))
    return answer, widths, extended


def test_the_cspa_rules_prefixes_hold_what_is_read_after_and_it_sends_the_heads() -> None:
    narrowed, widths, extended = cspa_run(True)
    kept, all_widths, all_extended = cspa_run(False)
    assert narrowed == kept and len(narrowed) > 100
    assert widths and set(widths) == {2}  # x, y: the head's
    assert set(all_widths) == {4}  # z, x, w, y (the reference)
    assert extended and max(map(len, extended)) == 2  # z is not gathered past w's stage
    assert max(map(len, all_extended)) == 4
