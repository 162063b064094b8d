"""The rules of magic sets for every stratified program (docs/adr/0043): which
relations the pragmas let be specialized, constants inside rules, negation and
aggregates with their own demand while the rewrite stays stratified, bounded magic
sets, and multi-tenant dataflows. Each test also checks the answer against the
unspecialized one (`.pragma "magic-transform" ""`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from datalog import Database
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from datalog.plan.explain import plan_notes
from datalog.plan.magic import MagicPolicy, specialize
from tests.datalog.answers import Accumulated

OFF = '\n.pragma "magic-transform" ""\n'

SAMEGEN = """
.decl samegen(x: number, y: number)
.decl node(x: number)
.decl parent(x: number, y: number)
.decl query()
samegen(x, x) :- node(x).
samegen(x, y) :- parent(x, a), samegen(a, b), parent(y, b).
query() :- samegen({left}, {right}).
"""

NR = """
.decl edge(x: number, y: number)
.decl secret(x: number, y: number)
.decl reach(x: number, y: number)
.decl hidden(x: number, y: number)
.decl nr(x: number, y: number)
.decl seen(x: number, n: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
hidden(x, y) :- secret(x, y).
hidden(x, z) :- hidden(x, y), edge(y, z).
nr(x, y) :- reach(x, y), !hidden(x, y).
seen(x, n) :- edge(x, _), n = count : { reach(x, y), !hidden(x, y) }.
"""


def _pair(text: str) -> tuple[Database, Database]:
    """The same program twice: specialized as usual, and with magic sets off."""
    on, off = Database(), Database()
    on.define(text)
    off.define(text + OFF)
    return on, off


def _samegen(height: int, pragma: str = "", qualifier: str = "") -> tuple[Database, Database]:
    leaves = 2 ** (height - 1)
    text = pragma + SAMEGEN.format(left=leaves, right=2 * leaves - 1)
    text = text.replace(
        ".decl samegen(x: number, y: number)", f".decl samegen(x: number, y: number) {qualifier}"
    )
    on, off = _pair(text)
    nodes = np.arange(1, 2 * leaves)
    for db in (on, off):
        db.insert("node", [nodes])
        db.insert("parent", [nodes[1:], nodes[1:] // 2])
    return on, off


def _chain(text: str, n: int = 30) -> tuple[Database, Database]:
    on, off = _pair(text)
    for db in (on, off):
        db.insert("edge", [(i, i + 1) for i in range(n)])
        db.insert("secret", [(1, 12), (3, 20)])
    return on, off


def _same(on: Database, off: Database, query: str) -> list[Any]:
    rows = sorted(on.query(query))
    assert rows == sorted(off.query(query))
    return rows


def _specialized(text: str, query: str) -> Any:
    checked = check_program(parse_program(text))
    found = specialize(checked, check_query(parse_query(query), checked.schema))
    assert found is not None, "not specialized"
    return found


# --- which relations may be specialized ------------------------------------------------


def _policy(text: str) -> MagicPolicy:
    return MagicPolicy.of(
        check_program(parse_program(text + "\n.decl a(x: number)\n.decl b(x: number)"))
    )


@pytest.mark.parametrize(
    ("pragmas", "allowed"),
    [
        ("", {"a", "b"}),  # Deltalog's default: every relation
        ('.pragma "magic-transform" "*"', {"a", "b"}),
        ('.pragma "magic-transform" " a "', {"a"}),  # names are trimmed
        ('.pragma "magic-transform" "a, b"', {"a", "b"}),
        ('.pragma "magic-transform" ""', set()),
        ('.pragma "magic-transform-exclude" "b"', {"a"}),
        ('.pragma "magic-transform" "*"\n.pragma "magic-transform-exclude" "a,b"', set()),
        ('.pragma "magic-transform" "a"\n.pragma "magic-transform" "b"', {"b"}),  # later wins
        ('.pragma "magic-transform-exclude" "*"', set()),
        ('.pragma "magic-transform" "a, *"\n.pragma "magic-transform-exclude" "*"', {"a"}),
    ],
)
def test_the_magic_transform_pragmas_choose_the_relations_as_souffle_does(
    pragmas: str, allowed: set[str]
) -> None:
    policy = _policy(pragmas)
    assert {r for r in ("a", "b") if policy.allows(r)} == allowed


def test_the_magic_and_no_magic_qualifiers_specify_and_exclude() -> None:
    checked = check_program(parse_program(".decl a(x: number) magic\n.decl b(x: number)"))
    assert MagicPolicy.of(checked).allows("a") and not MagicPolicy.of(checked).allows("b")
    checked = check_program(parse_program(".decl a(x: number) no_magic\n.decl b(x: number)"))
    assert not MagicPolicy.of(checked).allows("a") and MagicPolicy.of(checked).allows("b")


# --- constants inside rules ---------------------------------------------------------------


def test_a_constant_pair_inside_a_rule_asks_for_one_generation_only() -> None:
    on, off = _samegen(7)
    plan = on.explain("query()")
    assert "demand: samegen@bb" in plan
    assert "recursive stratum ['samegen']" not in plan  # never every pair
    assert _same(on, off, "query()") == [()]


def test_samegen_holds_only_the_pairs_its_constants_ask_for() -> None:
    on, _ = _samegen(7)
    sub = Accumulated()
    on.subscribe("query()", sub)
    held = sum(t for df in on.stats()["dataflows"] for _, t, _ in df["arrangements"])  # type: ignore[index]
    assert sub.rows() == {()}
    assert held < 200, held  # the full relation holds 5,461 pairs


@pytest.mark.parametrize(
    ("pragma", "qualifier"),
    [
        ('.pragma "magic-transform" "node"\n', ""),
        ('.pragma "magic-transform-exclude" "samegen"\n', ""),
        ("", "no_magic"),
    ],
)
def test_a_relation_the_pragmas_exclude_is_read_whole(pragma: str, qualifier: str) -> None:
    on, off = _samegen(5, pragma, qualifier)
    assert "magic@samegen" not in on.explain("query()")
    assert _same(on, off, "query()") == [()]


def test_the_pragma_naming_the_relation_specializes_it() -> None:
    on, off = _samegen(5, '.pragma "magic-transform" "samegen, query"\n')
    assert "demand: samegen@bb" in on.explain("query()")
    assert _same(on, off, "query()") == [()]


def test_a_query_without_constants_over_rules_without_constants_is_not_specialized() -> None:
    on, _ = _chain(NR)
    assert "magic" not in on.explain("reach(x, y)")


def test_a_join_on_unbound_variables_does_not_specialize() -> None:
    """`samegen(a, b)` after `parent(x, a)` with nothing bound: specializing it would
    compute the whole relation twice (a magic set of every node)."""
    on, off = _samegen(4)
    assert "magic" not in on.explain("samegen(x, y)")
    assert len(_same(on, off, "samegen(x, y)")) > 0


# --- negation and aggregates ------------------------------------------------------------------


def test_a_negated_derived_relation_gets_its_own_demand() -> None:
    on, off = _chain(NR)
    plan = on.explain("nr(1, y)")
    assert "hidden@bb" in plan and "!hidden@bb(x, y)" in plan
    assert "recursive stratum ['hidden']" not in plan
    assert _same(on, off, "nr(1, y)") == [(y,) for y in range(2, 12)]


def test_an_aggregated_derived_relation_gets_its_own_demand() -> None:
    on, off = _chain(NR)
    plan = on.explain("seen(3, n)")
    assert "reach@bf" in plan and "hidden@bb" in plan
    assert "recursive stratum ['reach']" not in plan
    assert _same(on, off, "seen(3, n)") == [(16,)]


LOOP = """
.decl e(x: number, y: number)
.decl r(x: number, y: number)
.decl q(x: number)
.decl p(x: number, y: number)
q(y) :- r(y, _).
p(x, y) :- e(x, y).
p(x, z) :- p(x, y), e(y, z), !q(z).
.decl c(x: number, n: number)
c(x, n) :- p(x, _), n = count : { p(x, y), q(y) }.
.decl k(x: number, y: number)
k(x, y) :- e(x, y).
k(x, z) :- k(x, y), e(y, z), n = count : { q(z) }, n = 0.
"""


def test_a_negation_whose_own_demand_closes_a_cycle_reads_the_relation_whole() -> None:
    """`!q(z)` inside `p`'s recursion: `magic@q@b` would read `p@bf`, which reads
    `!q@b`: not stratified, so `q` is read whole and `p` is still specialized."""
    on, off = _pair(LOOP)
    for db in (on, off):
        db.insert("e", [(i, i + 1) for i in range(12)] + [(2, 7)])
        db.insert("r", [(5, 0), (9, 1)])
    plan = on.explain("p(1, y)")
    assert "demand: p@bf" in plan and "negated or aggregated `q` read through" in plan
    assert "magic@q" not in plan
    assert _same(on, off, "p(1, y)") == [(2,), (3,), (4,), (7,), (8,)]
    assert _same(on, off, "c(2, n)") == [(0,)]


def test_an_aggregate_whose_own_demand_closes_a_cycle_reads_the_relation_whole() -> None:
    on, off = _pair(LOOP)
    for db in (on, off):
        db.insert("e", [(i, i + 1) for i in range(12)] + [(2, 7)])
        db.insert("r", [(5, 0), (9, 1)])
    plan = on.explain("k(1, y)")
    assert "demand: k@bf" in plan and "negated or aggregated `q` read through" in plan
    assert _same(on, off, "k(1, y)") == [(2,), (3,), (4,), (7,), (8,)]


def test_a_rewrite_is_always_stratified() -> None:
    found = _specialized(LOOP, "c(1, n)")
    assert found.program.strata  # checked: stratification errors would have raised
    assert "q" in {s for stratum in found.program.strata for s in stratum.relations}


# --- bounded magic sets -------------------------------------------------------------------------


DOWN = """
.decl v(x: number)
.decl w(x: number)
.decl down(x: number)
w(n) :- v(n).
down(0) :- v(0).
down(n) :- m = n - 1, down(m), w(n).
"""


def test_a_value_computed_from_a_head_variable_binds_only_through_a_relation() -> None:
    """`m = n - 1` with `n` from the head alone would make `magic@down@b` count down
    for ever; `m` binds once `w(n)` has bound `n`, so the magic set stays within `w`."""
    found = _specialized(DOWN, "down(5)")
    magic_rules = [r for r in found.program.rules if r.head.name == "magic@down@b"]
    recursive = [
        r for r in magic_rules if any(getattr(lit, "name", "") == "magic@down@b" for lit in r.body)
    ]
    assert recursive
    assert all(any(getattr(lit, "name", "").startswith("w") for lit in r.body) for r in recursive)
    on, off = _pair(DOWN)
    for db in (on, off):
        db.insert("v", [(i,) for i in range(8)])
    assert _same(on, off, "down(5)") == [()]


# --- live, and multi-tenant dataflows ---------------------------------------------------------


def _held(db: Database) -> int:
    stats = db.stats()
    return sum(t for df in stats["dataflows"] for _, t, _ in df["arrangements"])  # type: ignore[index]


@pytest.mark.parametrize("tenants", [True, False])
def test_a_subscription_over_negation_holds_what_its_constant_asks_for(tenants: bool) -> None:
    on, off = _chain(NR, n=100)
    on.queries.tenants.enabled = tenants
    sub = Accumulated()
    on.subscribe("nr(1, y)", sub)
    shown = "parameter relation (magic sets)" if tenants else "query's constants (magic sets)"
    assert shown in on.explain("nr(1, y)") or tenants  # explain plans a one-shot query
    assert _held(on) < 3000, _held(on)  # the closure alone is 5,050 pairs
    rng = np.random.default_rng(7)
    for _ in range(12):
        a, b = sorted(int(v) for v in rng.integers(0, 100, 2))
        for db in (on, off):
            with db.transaction() as tx:
                tx.insert("secret", [(1, b)])
                tx.retract("edge", [(a, a + 1)])
                tx.insert("edge", [(b, a)])
        assert sub.rows() == set(off.query("nr(1, y)"))
        for db in (on, off):
            db.insert("edge", [(a, a + 1)])
            db.retract("secret", [(1, b)])
        assert sub.rows() == set(off.query("nr(1, y)"))


def test_tenant_members_over_negation_and_aggregates_follow_changes() -> None:
    on, off = _chain(NR, n=40)
    queries = [f"nr({p}, y)" for p in (1, 3, 5)] + [f"seen({p}, n)" for p in (0, 2)]
    subs = {q: Accumulated() for q in queries}
    for q in queries:
        on.subscribe(q, subs[q])
    assert "magic sets" in " ".join(
        note
        for t in on.queries.tenants.by_key.values()
        if t.plan
        for note in plan_notes(t.plan.plan)
    )
    rng = np.random.default_rng(3)
    for _ in range(10):
        x, y = (int(v) for v in rng.integers(0, 40, 2))
        for db in (on, off):
            with db.transaction() as tx:
                tx.insert("secret", [(x, y)])
                tx.retract("edge", [(y, y + 1)])
        for q in queries:
            assert subs[q].rows() == set(off.query(q)), q
