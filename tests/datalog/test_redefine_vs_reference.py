"""Rules swapped in and out mid-stream, against the reference evaluator.

A random valid program (`tests.datalog.programs`), a random stream of
transactions over its base relations (sometimes also a derived one), and between
them random redefinitions of derived relations: new rules drawn like the
program's own (reading base relations, earlier groups and, recursively, their
own group, so the program stays stratified), or none at all; alone, or in one
transaction with the next rows. Every derived relation's full query and a query
with a constant are subscribed before the first step. After every step:

- each subscription's accumulated answer equals `reference.answer` over a
  from-scratch evaluation of the rules then in force and the current facts, and
  so does a one-shot query;
- the step took exactly one new epoch, and each subscription received at most one
  change, labelled with that epoch: exactly one if its answer changed, none if not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import count as counter

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog.db.database import Database
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.errors import DatalogError
from datalog.lang.parser import parse_program, parse_query
from datalog.lang.pretty import format_rule
from datalog.plan.wcoj import JoinPlan
from tests.budget import examples
from tests.datalog.answers import Recorder
from tests.datalog.programs import (
    BASE,
    Generated,
    Row,
    Transaction,
    Types,
    apply,
    constant_query,
    full_query,
    mean_rule,
    programs,
    recursive_rule,
    rule_text,
    streams,
)


@dataclass(frozen=True)
class Step:
    """A transaction's rows, and the relations it redefines (with their new rules)."""

    rows: Transaction
    redefinitions: tuple[tuple[str, str], ...] = ()


@dataclass
class Model:
    """The rules in force, by head, and the facts: what the reference evaluates."""

    decls: str
    rules: dict[str, list[str]]
    facts: dict[str, set[Row]] = field(default_factory=dict)

    @classmethod
    def of(cls, text: str) -> Model:
        program = parse_program(text)
        rules: dict[str, list[str]] = {}
        for rule in program.rules:
            rules.setdefault(rule.head.name, []).append(format_rule(rule))
        decls = "\n".join(line for line in text.splitlines() if line.startswith(".decl"))
        return cls(decls, rules)

    def text(self) -> str:
        return "\n".join([self.decls, *(r for rules in self.rules.values() for r in rules)])


def _group(name: str) -> int:
    found = re.search(r"\d+", name)
    assert found is not None
    return int(found.group())


@st.composite
def replacement(draw: st.DrawFn, generated: Generated, name: str) -> str:
    """New rules for the derived relation `name`, drawn as `programs` draws its own."""
    kinds = generated.relations[name]
    level = _group(name)
    lower: dict[str, Types] = dict(BASE)
    lower.update({n: generated.relations[n] for n in generated.derived if _group(n) < level})
    if name.startswith("m"):  # a mean relation: one mean rule, or none
        return draw(mean_rule(name, lower)) if draw(st.booleans()) else ""
    group = {
        n: generated.relations[n]
        for n in generated.derived
        if n.startswith("r") and _group(n) == level
    }
    fresh = counter()
    rules = []
    for i in range(draw(st.integers(0, 3))):
        if i and draw(st.booleans()):
            rules.append(draw(recursive_rule(name, kinds, lower, group, fresh)))
        else:
            rules.append(draw(rule_text(name, kinds, lower, group, False, fresh)))
    return "\n".join(rules)


@st.composite
def steps(draw: st.DrawFn, generated: Generated, writable: dict[str, Types]) -> list[Step]:
    """The stream's transactions, with redefinitions between them or inside them."""
    out: list[Step] = []
    for rows in draw(streams(writable)):
        for _ in range(draw(st.integers(0, 2))):
            name = draw(st.sampled_from(generated.derived))
            redefinition = (name, draw(replacement(generated, name)))
            if draw(st.booleans()):  # alone, at an epoch of its own
                out.append(Step([], (redefinition,)))
            else:
                rows_too = out.pop() if out and draw(st.booleans()) else Step([])
                out.append(Step(rows_too.rows, (*rows_too.redefinitions, redefinition)))
        out.append(Step(rows))
    return out


def _apply(db: Database, step: Step) -> None:
    with db.transaction() as tx:
        for relation, text in step.redefinitions:
            tx.redefine(relation, text)
        for op, relation, row in step.rows:
            (tx.insert if op == "insert" else tx.retract)(relation, [row])


def _expected(model: Model, queries: list[str]) -> dict[str, set[Row]]:
    checked = check_program(parse_program(model.text()))
    relations = reference.evaluate(checked, model.facts)
    return {q: reference.answer(check_query(parse_query(q), checked.schema), relations)
            for q in queries}  # fmt: skip


def _swapped(model: Model, step: Step) -> Model:
    rules = dict(model.rules)
    for relation, text in step.redefinitions:
        rules[relation] = [format_rule(r) for r in parse_program(text).rules]
    return Model(model.decls, rules, model.facts)


@settings(
    max_examples=examples(60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_subscriptions_equal_the_reference_of_the_rules_in_force_after_every_epoch(
    data: st.DataObject,
) -> None:
    generated = data.draw(programs(), label="program")
    writable = dict(BASE)
    if data.draw(st.integers(0, 3), label="write a derived relation?") == 0:
        chosen = data.draw(st.sampled_from(generated.derived), label="derived written")
        if generated.relations[chosen]:
            writable[chosen] = generated.relations[chosen]
    stream = data.draw(steps(generated, writable), label="steps")
    queries = [full_query(r, generated.relations[r]) for r in generated.derived]
    queries = list(dict.fromkeys([*queries, data.draw(constant_query(generated), label="query")]))
    plan: JoinPlan = data.draw(st.sampled_from(("auto", "wcoj", "binary")), label="plan")
    note(f"program:\n{generated.text}")
    note("steps:\n" + "\n".join(f"{i}: {s}" for i, s in enumerate(stream)))

    db = Database()
    db.define(generated.text)
    model = Model.of(generated.text)
    subs = {q: Recorder() for q in queries}
    for q, sub in subs.items():
        db.subscribe(q, sub, plan)
    expected = _expected(model, queries)
    for n, step in enumerate(stream):
        swapped = _swapped(model, step)
        try:
            now = _expected(swapped, queries)
        except DatalogError:  # the drawn rules are invalid: the database refuses them too
            epoch = db.epoch
            with pytest.raises(DatalogError):
                _apply(db, step)
            assert db.epoch == epoch, f"step {n}: a refused step took an epoch"
            continue
        seen = {q: len(sub.changes) for q, sub in subs.items()}
        epoch = db.epoch
        _apply(db, step)
        apply(swapped.facts, step.rows)
        model, now = swapped, _expected(swapped, queries)
        assert db.epoch == epoch + 1, f"step {n}: one step, one epoch"
        for q, sub in subs.items():
            new = sub.changes[seen[q] :]
            assert [c.epoch for c in new] == ([db.epoch] if now[q] != expected[q] else []), (
                f"step {n}: `{q}` got changes at epochs {[c.epoch for c in new]}"
            )
            assert sub.rows() == now[q], f"step {n}: subscription `{q}`"
            assert set(db.query(q.replace("x", "y"))) == now[q], f"step {n}: one-shot `{q}`"
        expected = now
