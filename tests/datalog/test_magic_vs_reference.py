"""Magic sets against the reference evaluator, after every commit (docs/adr/0043).

A random stratified program (recursion, negation, aggregates: `programs.py`) gets
extra `askN` relations whose rules ask derived relations with constants, positively,
negated and inside aggregates, and sometimes a `magic-transform` pragma or a
`magic` / `no_magic` qualifier. Its queries (each `askN` in full, and derived
relations with a constant) are subscribed on three databases: one serving queries
with constants from shared multi-tenant dataflows (`tenant_specialize`), one with
a dataflow of its own per query (`specialize`), and a twin whose pragma switches
magic sets off. After every commit of a random stream of inserts and retractions,
every subscription's accumulated answer, every one-shot query (renamed variables,
so no live dataflow serves it) and the twin's answers must equal the reference.
"""

from __future__ import annotations

from itertools import count
from typing import Any

from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from datalog import Database
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from tests.budget import examples
from tests.datalog.programs import (
    BASE,
    Body,
    Generated,
    Row,
    Types,
    apply,
    constant_query,
    format_stream,
    full_query,
    literal_text,
    programs,
    streams,
    values,
)
from tests.datalog.test_engine_vs_reference import Accumulated

# --- rules that ask with constants ----------------------------------------------------


@st.composite
def asking_rule(draw: st.DrawFn, generated: Generated, head: str, fresh: Any) -> tuple[str, Types]:
    """`head(..) :- d(c, x), ...`: a derived atom with a constant first, then maybe
    more atoms, a negation and an aggregate over derived or base relations."""
    readable = {**BASE, **{r: generated.relations[r] for r in generated.derived}}
    derived = [r for r in generated.derived if any(k != "float" for k in readable[r])]
    body = Body(draw, fresh)
    first = draw(st.sampled_from(derived))
    kinds = readable[first]
    fixed = draw(st.sampled_from([i for i, k in enumerate(kinds) if k != "float"]))
    args = []
    for i, kind in enumerate(kinds):
        if i == fixed or (kind != "float" and draw(st.integers(0, 3)) == 0):
            args.append(literal_text(draw(values(kind))))
        else:
            var = body.new_var(kind)
            body.types[var] = kind
            args.append(var)
    body.literals.append(f"{first}({', '.join(args)})")
    for _ in range(draw(st.integers(0, 1))):
        relation = draw(st.sampled_from(sorted(readable)))
        body.atom(relation, readable[relation])
    for extra in draw(st.lists(st.sampled_from(("negation", "aggregate")), max_size=2)):
        getattr(body, extra)(readable)
    chosen = [k for k in ("number", "symbol") if body.bound(k)]
    kinds_out: Types = tuple(draw(st.lists(st.sampled_from(chosen), max_size=2))) if chosen else ()
    head_args = body.head_args(kinds_out, recursive=False)
    return body.rule(head, head_args), kinds_out


@st.composite
def asking_program(draw: st.DrawFn) -> tuple[Generated, str]:
    """A generated program with `askN` relations added, and its full text."""
    generated = draw(programs())
    if not any(any(k != "float" for k in generated.relations[r]) for r in generated.derived):
        return generated, generated.text
    fresh = count(1000)
    decls, rules = [], []
    relations = dict(generated.relations)
    derived = list(generated.derived)
    for n in range(draw(st.integers(1, 2))):
        rule, kinds = draw(asking_rule(generated, f"ask{n}", fresh))
        columns = ", ".join(f"c{i}: {k}" for i, k in enumerate(kinds))
        decls.append(f".decl ask{n}({columns})")
        rules.append(rule)
        relations[f"ask{n}"] = kinds
        derived.append(f"ask{n}")
    text = generated.text + "\n".join(decls + rules) + "\n"
    grown = Generated(text, relations, tuple(derived))
    return grown, _with_policy(draw, grown)


def _with_policy(draw: st.DrawFn, generated: Generated) -> str:
    """The text, sometimes with a magic-transform pragma or a qualifier."""
    names = list(generated.derived)
    kind = draw(st.sampled_from(("none", "none", "star", "some", "exclude", "qualifier")))
    event(f"policy: {kind}")
    some = ", ".join(draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names))))
    if kind == "star":
        return '.pragma "magic-transform" "*"\n' + generated.text
    if kind == "some":
        return f'.pragma "magic-transform" "{some}"\n' + generated.text
    if kind == "exclude":
        return f'.pragma "magic-transform-exclude" "{some}"\n' + generated.text
    if kind == "qualifier":
        target = draw(st.sampled_from(names))
        qualifier = draw(st.sampled_from(("magic", "no_magic")))
        lines = [
            f"{line} {qualifier}" if line.startswith(f".decl {target}(") else line
            for line in generated.text.splitlines()
        ]
        return "\n".join(lines) + "\n"
    return generated.text


def queries_of(generated: Generated, data: st.DataObject) -> list[str]:
    asks = [full_query(r, generated.relations[r]) for r in generated.derived if r.startswith("ask")]
    constants = [data.draw(constant_query(generated), label="constant query") for _ in range(2)]
    return list(dict.fromkeys([*asks, *constants]))


def renamed(query: str) -> str:
    return query.replace("x", "z")


# --- the test -----------------------------------------------------------------------------


OFF = '\n.pragma "magic-transform" ""\n'


@settings(
    max_examples=examples(60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_specialized_answers_equal_the_reference_after_every_commit(data: st.DataObject) -> None:
    generated, text = data.draw(asking_program(), label="program")
    stream = data.draw(streams(dict(BASE)), label="stream")
    queries = queries_of(generated, data)
    note(f"program:\n{text}")
    note(f"stream:\n{format_stream(stream)}")
    note(f"queries: {queries}")
    checked = check_program(parse_program(text))
    checked_queries = {q: check_query(parse_query(q), checked.schema) for q in queries}

    tenants, own, plain = Database(), Database(), Database()
    own.queries.tenants.enabled = False
    tenants.define(text)
    own.define(text)
    plain.define(generated.text + OFF)
    event(f"specialized: {any('magic sets' in own.explain(q) for q in queries)}")
    subs = {(id(db), q): Accumulated(q) for db in (tenants, own) for q in queries}
    for db in (tenants, own):
        for q in queries:
            db.subscribe(q, subs[(id(db), q)])
    facts: dict[str, set[Row]] = {}

    def check(when: str) -> None:
        relations = reference.evaluate(checked, facts)
        for q, query in checked_queries.items():
            expected = reference.answer(query, relations)
            assert subs[(id(tenants), q)].rows() == expected, f"{when}, `{q}`: tenant member"
            assert subs[(id(own), q)].rows() == expected, f"{when}, `{q}`: own dataflow"
            assert set(own.query(renamed(q))) == expected, f"{when}, `{q}`: one-shot"
            assert set(plain.query(q)) == expected, f"{when}, `{q}`: unspecialized twin"

    check("before any commit")
    for n, tx in enumerate(stream):
        for db in (tenants, own, plain):
            with db.transaction() as t:
                for op, relation, row in tx:
                    (t.insert if op == "insert" else t.retract)(relation, [row])
        apply(facts, tx)
        check(f"after transaction {n}")
