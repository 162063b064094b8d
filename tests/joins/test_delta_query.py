"""Delta queries (worst-case optimal joins) against binary joins and the reference.

Random conjunctive bodies over binary relations `e`, `f` and a unary `v` on a
small domain — cyclic (triangles, 4-cycles) and acyclic (paths, stars), with
comparisons, negation, a relation bound several times, source conflicts
(`e(a, b), e(b, a)`) and constant atoms the binary path handles — are kept up
to date under random insert/retract streams in which several bindings change in
the same transaction. After every commit the `wcoj`, `binary` and `auto`
subscriptions' accumulated outputs must equal each other and the reference
evaluator, and no row's count may leave {0, 1}. The same holds for a recursive
rule whose body is a delta query. Finally, a delta query holds no arranged
intermediate results, where a chain of binary joins does. Every test runs with
pipelines over a few changes on Python lists (`joins.few`) and without.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog import Change, Database
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from datalog.plan.wcoj import JoinPlan
from differential.tuning import TUNING, tuned
from joins.delta_query import DeltaQueryOp
from tests.budget import examples

pytestmark = pytest.mark.usefixtures("small_path")

Row = tuple[int, ...]
Op = tuple[str, str, Row]  # ("insert" | "retract", relation, row)
PLANS: tuple[JoinPlan, ...] = ("wcoj", "binary", "auto")
DOMAIN = st.integers(0, 3)
BINARY = ("e", "f")

DECLS = """
.decl e(x: number, y: number)
.decl f(x: number, y: number)
.decl v(x: number)
"""

# Shapes of the positive binary part: variable pairs (a relation and an
# orientation are drawn for each).
SHAPES: dict[str, list[tuple[str, str]]] = {
    "triangle": [("a", "b"), ("b", "c"), ("a", "c")],
    "4-cycle": [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")],
    "path": [("a", "b"), ("b", "c"), ("c", "d")],
    "star": [("a", "b"), ("a", "c"), ("a", "d")],
    "2-path": [("a", "b"), ("b", "c")],
    "conflict": [("a", "b"), ("b", "a")],
    "conflict-path": [("a", "b"), ("b", "a"), ("b", "c")],
    "disconnected": [("a", "b"), ("c", "d")],  # no delta query: binary joins only
}


class Accumulated:
    """A subscription's answer as a multiset, rebuilt from its snapshot and changes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: Counter[tuple[Any, ...]] = Counter()
        self.changes = 0

    def __call__(self, change: Change) -> None:
        assert change.snapshot == (self.changes == 0), f"{self.name}: snapshot first, once"
        self.changes += 1
        for row, diff in zip(change.rows, change.diffs, strict=True):
            self.counts[row] += diff
        bad = {row: n for row, n in self.counts.items() if n not in (0, 1)}
        assert not bad, f"{self.name}: counts outside {{0, 1}} at epoch {change.epoch}: {bad}"

    def rows(self) -> set[tuple[Any, ...]]:
        return {row for row, n in self.counts.items() if n}


# -- strategies --------------------------------------------------------------------


@dataclass(frozen=True)
class Body:
    """A conjunctive body, whether the `wcoj` plan must use a delta query for it,
    and the phrases its `explain` must show (the extenders the body calls for)."""

    text: str
    delta: bool
    shows: tuple[str, ...] = ()


@st.composite
def bodies(draw: st.DrawFn) -> Body:
    """A shape's atoms plus extra literals: repeated bindings, unary atoms (plain
    or a binary atom with a constant), comparisons, `x = c`, and negations (of
    binary and unary relations, with constants and wildcards)."""
    shape_name = draw(st.sampled_from(sorted(SHAPES)), label="shape")
    shape = SHAPES[shape_name]
    literals = []
    for x, y in shape:
        name = draw(st.sampled_from(BINARY))
        x, y = (y, x) if draw(st.booleans()) else (x, y)
        literals.append(f"{name}({x}, {y})")
    variables = sorted({v for pair in shape for v in pair})
    var = st.sampled_from(variables)
    shows: list[str] = []

    def somewhere_unbound(x: str) -> bool:
        """Some pipeline binds `x` in a stage (its source atom lacks `x`)."""
        return any(x not in pair for pair in shape)

    if draw(st.booleans()):  # the same binding twice
        literals.append(draw(st.sampled_from(literals)))
    for _ in range(draw(st.integers(0, 2))):  # unary atoms: they may propose
        x = draw(var)
        if draw(st.booleans()):
            atom = f"v({x})"
        else:
            name, c = draw(st.sampled_from(BINARY)), draw(DOMAIN)
            atom = f"{name}({x}, {c})" if draw(st.booleans()) else f"{name}({c}, {x})"
        literals.append(atom)
        if somewhere_unbound(x):
            shows.append(f"unary {atom}")
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["<", "!=", "<=", ">"]))
        left, right = draw(var), draw(var)
        if left != right:
            literals.append(f"{left} {op} {right}")
    fixed: set[str] = set()
    for _ in range(draw(st.integers(0, 2))):  # x = c: a constant extender
        x, c = draw(var), draw(DOMAIN)
        fixed.add(x)
        literals.append(f"{x} = {c}" if draw(st.booleans()) else f"{c} = {x}")
        shows.append(f"const {c}" if somewhere_unbound(x) else f"check {x} = {c}")
    for _ in range(draw(st.integers(0, 2))):  # negations: validate, and a pipeline each
        kind = draw(st.sampled_from(["binary", "unary", "wildcard", "constant"]))
        name = draw(st.sampled_from(BINARY))
        x, y = draw(var), draw(var)
        negated = {
            "binary": f"!{name}({x}, {y})",
            "unary": f"!v({x})",
            "wildcard": f"!{name}({x}, _)" if draw(st.booleans()) else f"!{name}(_, {x})",
            "constant": f"!{name}({x}, {draw(DOMAIN)})",
        }[kind]
        literals.append(negated)
        shows += [f"check {negated}", f"pipeline from d{negated}"]
    # Constants connect the two halves of the disconnected shape (a product).
    delta = shape_name != "disconnected" or bool(fixed & {"a", "b"} and fixed & {"c", "d"})
    order = draw(st.permutations(literals))
    return Body(", ".join(order), delta, tuple(shows) if delta else ())


def rows_of(relation: str) -> st.SearchStrategy[Row]:
    if relation == "v":
        return st.tuples(DOMAIN)
    return st.tuples(DOMAIN, DOMAIN)


def ops(relations: Sequence[str]) -> st.SearchStrategy[Op]:
    return st.sampled_from(relations).flatmap(
        lambda r: st.tuples(
            st.sampled_from(["insert", "insert", "retract"]), st.just(r), rows_of(r)
        )
    )


def streams(relations: Sequence[str], size: int = 6) -> st.SearchStrategy[list[list[Op]]]:
    """Transactions of several changes each (so several bindings change together)."""
    return st.lists(st.lists(ops(relations), min_size=1, max_size=10), min_size=1, max_size=size)


# -- the harness -------------------------------------------------------------------


@dataclass
class Run:
    """A database with one subscription per plan to `query`, and a model of its facts."""

    program: str
    query: str
    db: Database
    subs: dict[JoinPlan, Accumulated]
    facts: dict[str, set[Row]]

    @staticmethod
    def start(
        program: str,
        query: str,
        initial: Sequence[Op],
        delta: bool = True,
        shows: Sequence[str] = (),
    ) -> Run:
        db = Database()
        db.define(program)
        run = Run(program, query, db, {}, {"e": set(), "f": set(), "v": set()})
        run.commit(initial)  # the first subscriptions start from a snapshot
        for plan in PLANS:
            acc = Accumulated(f"{plan}: {query}")
            db.subscribe(query, acc, plan=plan)
            run.subs[plan] = acc
        run.check("after subscribing")
        explained = db.explain(query, plan="wcoj")
        assert ("delta query" in explained) == delta
        for phrase in shows:  # the extenders the body calls for are in the plan
            assert phrase in explained, f"{phrase!r} not in\n{explained}"
        assert "delta query" not in db.explain(query, plan="binary")
        return run

    def commit(self, tx: Sequence[Op]) -> None:
        with self.db.transaction() as t:
            for op, relation, row in tx:
                (t.insert if op == "insert" else t.retract)(relation, [row])
        for op, relation, row in tx:
            (self.facts[relation].add if op == "insert" else self.facts[relation].discard)(row)

    def expected(self) -> set[tuple[Any, ...]]:
        checked = check_program(parse_program(self.program))
        query = check_query(parse_query(self.query), checked.schema)
        return reference.answer(query, reference.evaluate(checked, self.facts))

    def check(self, when: str) -> None:
        expected = self.expected()
        for plan in PLANS:  # a one-shot dataflow, started from the current snapshot
            assert set(self.db.query(self.query.replace("a", "x"), plan=plan)) == expected
        for plan, acc in self.subs.items():
            assert acc.rows() == expected, (
                f"{when}: plan {plan} differs from the reference\n"
                f"  missing {expected - acc.rows()}\n  extra {acc.rows() - expected}"
            )


def replay(
    program: str,
    query: str,
    initial: list[Op],
    stream: list[list[Op]],
    delta: bool = True,
    shows: Sequence[str] = (),
) -> None:
    note(f"query: {query}")
    note(f"initial: {initial}")
    for n, tx in enumerate(stream):
        note(f"tx {n}: {tx}")
    run = Run.start(program, query, initial, delta, shows)
    for n, tx in enumerate(stream):
        run.commit(tx)
        run.check(f"after transaction {n}")


SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=examples(40), suppress_health_check=SLOW)
@given(
    body=bodies(),
    initial=st.lists(ops(["e", "f", "v"]), max_size=12),
    stream=streams(["e", "f", "v"]),
)
def test_wcoj_binary_and_auto_plans_equal_the_reference_after_every_commit(
    body: Body, initial: list[Op], stream: list[list[Op]]
) -> None:
    replay(DECLS, body.text, initial, stream, body.delta, body.shows)


@settings(max_examples=examples(25), suppress_health_check=SLOW)
@given(
    body=bodies(),
    initial=st.lists(ops(["e", "f", "v"]), max_size=12),
    stream=streams(["e", "f", "v"]),
)
def test_delta_queries_in_rule_bodies_equal_the_reference(
    body: Body, initial: list[Op], stream: list[list[Op]]
) -> None:
    """The same bodies as a rule: the delta query feeds a relation's distinct."""
    text = body.text
    checked = check_query(parse_query(text), check_program(parse_program(DECLS)).schema)
    head = ", ".join(checked.answer_vars)
    program = f"{DECLS}\n.decl q({', '.join(f'{v}: number' for v in checked.answer_vars)})\n"
    program += f"q({head}) :- {text}.\n"
    replay(program, f"q({head})", initial, stream, body.delta, body.shows)


RECURSIVE: dict[str, tuple[str, tuple[str, ...]]] = {  # rules, and what explain must show
    "3-atom step": ("p(a, b) :- e(a, b).\np(a, c) :- p(a, b), e(b, c), f(a, c).\n", ()),
    "triangle closure": ("p(a, b) :- e(a, b).\np(a, c) :- p(a, b), p(b, c), f(a, c).\n", ()),
    "2-atom step": ("p(a, b) :- e(a, b).\np(a, c) :- p(a, b), e(b, c), a != c.\n", ()),
    "unary guard": (
        "p(a, b) :- e(a, b).\np(a, c) :- p(a, b), f(b, c), v(c), e(a, b).\n",
        ("unary v(c)",),
    ),
    "negated base": (
        "p(a, b) :- e(a, b).\np(a, c) :- p(a, b), e(b, c), !f(a, c).\n",
        ("check !f(a, c)", "pipeline from d!f(a, c)"),
    ),
    "negated derived": (
        ".decl g(a: number, b: number)\ng(a, b) :- f(a, b), !v(b).\n"
        "p(a, b) :- e(a, b).\np(a, c) :- p(a, b), e(b, c), !g(a, c), !v(a).\n",
        ("check !g(a, c)", "check !v(a)", "pipeline from d!g(a, c)"),
    ),
    "constant step": (
        "p(a, b) :- e(a, b).\np(a, c) :- p(a, b), e(b, c), f(c, d), d = 1.\n",
        ("d by const 1", "check d = 1"),
    ),
}


@settings(max_examples=examples(30), suppress_health_check=SLOW)
@given(
    rules=st.sampled_from(sorted(RECURSIVE)),
    initial=st.lists(ops(["e", "f", "v"]), max_size=12),
    stream=streams(["e", "f", "v"], size=8),
)
def test_recursive_rules_with_delta_query_bodies_agree_across_plans(
    rules: str, initial: list[Op], stream: list[list[Op]]
) -> None:
    """Inside iteration scopes too, with negated base and lower-stratum relations
    (entered arrangements) changing in the same epochs as the positive ones."""
    text, shows = RECURSIVE[rules]
    program = DECLS + ".decl p(a: number, b: number)\n" + text
    note(program)
    replay(program, "p(x, y)", initial, stream, shows=shows)


# -- no intermediate state ---------------------------------------------------------

TRIANGLES = (
    DECLS
    + """
.decl tri(a: number, b: number, c: number)
tri(a, b, c) :- e(a, b), e(b, c), e(a, c).
"""
)


def _arrangements(db: Database, plan: JoinPlan) -> list[tuple[str, int, int]]:
    key = "tri(a, b, c)" + ("" if plan == "auto" else f" [plan={plan}]")
    return db.live[key].plan.dataflow.arrangements()


def test_a_delta_query_arranges_no_intermediate_results() -> None:
    db = Database()
    db.define(TRIANGLES)
    # Two triangles (1,2,3), (2,3,4) and five 2-paths a->b->c.
    edges = [(1, 2), (2, 3), (1, 3), (3, 4), (2, 4)]
    db.insert("e", edges)
    for plan in ("wcoj", "binary"):
        db.subscribe("tri(a, b, c)", lambda _c: None, plan=plan)
    # Only distincts of results (tri's, and the query's if it has one) hold
    # tuples in the delta-query dataflow: two triangles each.
    wcoj = _arrangements(db, "wcoj")
    assert wcoj
    for op, tuples, _ in wcoj:
        assert op in ("arrange(key=3 of 3)", "distinct(arrange(key=3 of 3))")
        assert tuples == 2
    # The binary plan arranges `e(a, b)` by b (a private copy of e) and the
    # intermediate join `e(a, b), e(b, c)` by (a, c): one tuple per 2-path.
    paths = sum(1 for _, b in edges for b2, _ in edges if b == b2)
    assert _arrangements(db, "binary") == [
        ("arrange(key=1 of 2)", len(edges), 1),
        ("arrange(key=2 of 3)", paths, 1),
        *wcoj,
    ]

    db.insert("e", [(1, 4)])  # two more triangles: (1,2,4), (1,3,4)
    assert [n for _, n, _ in _arrangements(db, "wcoj")] == [4] * len(wcoj)


# -- targeted cases ----------------------------------------------------------------


def _subscribed(program: str, query: str) -> tuple[Database, dict[JoinPlan, Accumulated]]:
    db = Database()
    db.define(program)
    subs = {plan: Accumulated(plan) for plan in PLANS}
    for plan, acc in subs.items():
        db.subscribe(query, acc, plan=plan)
    return db, subs


def test_a_triangle_whose_edges_all_arrive_in_one_transaction_is_derived_once() -> None:
    db, subs = _subscribed(TRIANGLES, "tri(a, b, c)")
    db.insert("e", [(1, 2), (2, 3), (1, 3)])
    for acc in subs.values():
        assert acc.counts == Counter({(1, 2, 3): 1})
    with db.transaction() as tx:  # retract two edges and add one back, together
        tx.retract("e", [(1, 2), (2, 3)])
        tx.insert("e", [(3, 1)])
    for acc in subs.values():
        assert acc.rows() == set()


def test_less_than_keeps_only_the_smaller_left_side() -> None:
    db, subs = _subscribed(DECLS, "e(a, b), f(b, c), a < c")
    with db.transaction() as tx:
        tx.insert("e", [(1, 5), (3, 5)])
        tx.insert("f", [(5, 2)])
    for acc in subs.values():
        assert acc.rows() == {(1, 5, 2)}
    assert set(db.query("e(a, b), f(b, c), c > a", plan="wcoj")) == {(1, 5, 2)}
    assert set(db.query("e(a, b), f(b, c), a != c, c < a", plan="wcoj")) == {(3, 5, 2)}


def test_a_huge_product_streams_out_in_bounded_parts() -> None:
    """The delta query walks depth first: its output leaves in parts of about
    `TUNING.pairs` rows (each extension about `TUNING.proposals` candidates), never as
    one batch of the whole product (a LiveJournal triangle count held hundreds of
    millions of rows at once), and the parts add up to exactly the answer."""
    n, proposals = 24, 50
    edges = [(a, b) for a in range(n) for b in range(a + 1, n)]  # every a < b < c
    db = Database()
    db.define(TRIANGLES)
    # (recompute_min_rows: the commit runs through this dataflow, not a rebuilt one)
    streaming = TUNING.but(
        proposals=proposals, prefixes=proposals, pairs=proposals, recompute_min_rows=10**9
    )
    with tuned(streaming):
        acc = Accumulated("wcoj")
        db.subscribe("tri(a, b, c)", acc, plan="wcoj")
        dataflow = db.live["tri(a, b, c) [plan=wcoj]"].plan.dataflow
        (op,) = [op for op in dataflow.root.operators if isinstance(op, DeltaQueryOp)]
        sent: list[int] = []
        op.output.connect(lambda updates: sent.append(len(updates)))
        db.insert("e", edges)
    triangles = n * (n - 1) * (n - 2) // 6
    assert acc.rows() == {(a, b, c) for a, b in edges for c in range(b + 1, n)}
    assert sum(sent) == triangles and len(sent) > 1
    # A batch is flushed once it reaches `pairs` rows; a part adds at most a chunk's
    # survivors (about `proposals` candidates) to it, or goes alone.
    assert max(sent) < 3 * proposals


def test_each_part_of_a_depth_first_walk_is_checked_after_its_own_stage() -> None:
    """Found by `test_delta_queries_in_rule_bodies_equal_the_reference` (a seeded
    run), fixed: the walk built each stage's checked parts as a generator expression,
    which looked its stage up when a part was drawn, after the walk had gone deeper;
    a shallower part was checked as the deeper stage (here `a > c` before `c` was
    bound: a crash; elsewhere, checks lost or misplaced and wrong rows)."""
    body = "a > c, e(b, a), f(a, c), f(d, a), !e(b, 0), e(d, 3), e(b, a), f(0, a), !e(a, a)"
    program = f"{DECLS}\n.decl q(a: number, c: number, b: number, d: number)\n"
    program += f"q(a, c, b, d) :- {body}.\n"
    stream = [
        [("insert", "f", (0, 1)), ("insert", "f", (3, 0)), ("insert", "f", (3, 1))],
        [
            ("insert", "e", (0, 1)),
            ("insert", "e", (0, 3)),
            ("insert", "e", (3, 3)),
            ("insert", "f", (1, 3)),
        ],
        [("insert", "f", (3, 3)), ("insert", "e", (1, 3)), ("retract", "e", (0, 1))],
    ]
    run = Run.start(program, "q(a, c, b, d)", [])
    for n, tx in enumerate(stream):
        run.commit(tx)
        run.check(f"after transaction {n}")
