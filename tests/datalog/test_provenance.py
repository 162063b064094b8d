"""`Database.why`: proofs of minimal height, checked step by step (docs/adr/0018).

Every proof returned must be a valid proof in the current state (each step's
premises hold and satisfy its rule's body) of minimal height, where minimal is
measured by an independent level computation: a global naive evaluation on the
reference evaluator in which round k keeps every rule instance whose positive
premises all appeared before round k (negations and aggregates read the complete
relations).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog import Database, DatalogError, Derivation, FactNotFoundError
from datalog.eval import reference
from datalog.eval.heights import invariant_columns
from datalog.eval.reference import Env, Relations, Row
from datalog.lang.ast import Aggregate, Atom, Negation, Rule, Var, Wildcard
from datalog.lang.checks import CheckedProgram, check_program
from datalog.lang.errors import ArityError, BudgetExceeded, UnknownNameError
from datalog.lang.functions import Value
from datalog.lang.parser import parse_program
from datalog.lang.passes.variables import aggregate_groups
from datalog.lang.pretty import format_rule
from tests.budget import examples
from tests.datalog.programs import apply, format_stream, literal_text, programs, streams

TC = """
.decl edge(src: number, dst: number)
.decl reach(src: number, dst: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""


def tc(edges: list[tuple[int, int]]) -> Database:
    db = Database()
    db.define(TC)
    db.insert("edge", edges)
    return db


def proof_height(d: Derivation) -> int:
    """The height of the tree itself (recomputed, not read from `height`)."""
    facts = [p for p in d.premises if p.fact is not None and p.kind != "negation"]
    return 0 if d.rule is None else 1 + max((proof_height(p) for p in facts), default=0)


def distances(edges: list[tuple[int, int]], start: int) -> dict[int, int]:
    """Length of the shortest non-empty path from `start` to each node it reaches."""
    succ: dict[int, set[int]] = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)
    dist: dict[int, int] = {}
    queue = deque((n, 1) for n in succ.get(start, ()))
    while queue:
        node, d = queue.popleft()
        if node in dist:
            continue
        dist[node] = d
        queue.extend((n, d + 1) for n in succ.get(node, ()) if n not in dist)
    return dist


# --- examples --------------------------------------------------------------------------


def test_transitive_closure_proof_is_printed_as_an_indented_tree() -> None:
    db = tc([(1, 2), (2, 3), (3, 4), (1, 3)])
    d = db.why("reach(1, 4)")
    assert str(d) == "\n".join(
        [
            "reach(1, 4)  <- reach(x, z) :- reach(x, y), edge(y, z).  [line 5]",
            "  reach(1, 3)  <- reach(x, y) :- edge(x, y).  [line 4]",
            "    edge(1, 3)  (base fact)",
            "  edge(3, 4)  (base fact)",
        ]
    )
    assert d.fact is not None and (d.fact.relation, d.fact.values) == ("reach", (1, 4))
    assert d.rule is not None and (d.rule.line, d.rule.column) == (5, 1)
    assert d.height == 2 == proof_height(d)


@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=14))
def test_transitive_closure_proofs_have_the_bfs_distance_as_height(
    edges: list[tuple[int, int]],
) -> None:
    db = tc(edges)
    for x, y in db.query("reach(x, y)"):
        d = db.why(f"reach({x}, {y})")
        assert d.height == proof_height(d) == distances(edges, x)[y], f"reach({x}, {y})"


def test_negation_is_a_leaf_check() -> None:
    db = tc([(1, 2), (2, 3)])
    db.define(".decl root(x: number)\nroot(x) :- edge(x, _), !edge(_, x).")
    assert str(db.why("root(1)")).splitlines() == [
        "root(1)  <- root(x) :- edge(x, _), !edge(_, x).  [line 2]",
        "  edge(1, 2)  (base fact)",
        "  !edge(_, 1)",
    ]
    leaf = db.why("root(1)").premises[1]
    assert leaf.kind == "negation" and leaf.premises == [] and leaf.height is None


def test_aggregate_is_a_leaf_with_its_value() -> None:
    db = tc([(1, 2), (1, 3), (1, 4), (2, 3)])
    db.define(
        ".decl outdeg(x: number, n: number)\n"
        "outdeg(x, n) :- edge(x, _), n = count : { edge(x, _) }."
    )
    lines = str(db.why("outdeg(1, 3)")).splitlines()
    rule = "outdeg(x, n) :- edge(x, _), n = count : { edge(x, _) }."
    assert lines[0] == f"outdeg(1, 3)  <- {rule}  [line 2]"
    assert lines[-1] == "  n = count : { edge(1, _) } = 3"
    assert db.why("outdeg(1, 3)").premises[-1].kind == "aggregate"


def test_base_and_program_facts_have_no_rule() -> None:
    db = tc([(1, 2)])
    db.define("edge(5, 6).")
    for fact in ("edge(1, 2)", "edge(5, 6)"):
        d = db.why(fact)
        assert (d.rule, d.premises, d.height, d.kind) == (None, [], 0, "base")
        assert str(d) == f"{fact}  (base fact)"


def test_a_tuple_that_does_not_hold_is_an_error_naming_its_relation() -> None:
    db = tc([(1, 2)])
    with pytest.raises(FactNotFoundError, match=r"`reach\(2, 1\)` does not hold.*`reach` now"):
        db.why("reach(2, 1)")
    with pytest.raises(FactNotFoundError) as caught:
        db.why("edge(9, 9)")
    assert caught.value.category == "not_found"


@pytest.mark.parametrize(
    ("text", "error", "column", "message"),
    [
        ("rech(1, 2)", UnknownNameError, 1, "did you mean `reach`"),
        ("reach(1)", ArityError, 1, "2 columns"),
        ("reach(1, y)", DatalogError, 10, "ground fact: `y`"),
        ("reach(_, 2)", DatalogError, 7, "ground fact: `_`"),
        ("reach(1, 2), edge(1, 2)", DatalogError, 1, "one fact"),
    ],
)
def test_bad_facts_get_clear_errors_with_positions(
    text: str, error: type[DatalogError], column: int, message: str
) -> None:
    db = tc([(1, 2)])
    with pytest.raises(error, match=message) as caught:
        db.why(text)
    assert (caught.value.line, caught.value.column) == (1, column)


def test_proofs_follow_retractions() -> None:
    db = tc([(1, 2), (2, 3), (3, 4), (1, 3)])
    assert db.why("reach(1, 4)").height == 2
    db.retract("edge", [(1, 3)])
    longer = db.why("reach(1, 4)")
    assert longer.height == 3 == proof_height(longer)
    assert "edge(1, 3)" not in str(longer)
    db.retract("edge", [(2, 3)])
    with pytest.raises(FactNotFoundError):
        db.why("reach(1, 4)")


def test_a_proof_deeper_than_the_recursion_limit_is_built_and_printed() -> None:
    db = Database()
    db.define(
        ".decl edge(a: number, b: number)\n.decl path(x: number)\n"
        "path(0).\npath(y) :- path(x), edge(x, y)."
    )
    db.insert("edge", [(i, i + 1) for i in range(1500)])
    d = db.why("path(1500)")
    assert d.height == 1500
    assert len(str(d).splitlines()) == 1 + 2 * 1500
    assert d.to_dict()["premises"][0]["fact"] == "path(1499)"


def test_symbols_floats_and_functor_heads() -> None:
    db = Database(functors={"up": str.upper})
    db.define(
        ".functor up(s: symbol): symbol\n.decl name(p: number, s: symbol)\n"
        ".decl loud(s: symbol, w: float)\nloud(@up(s), 1.5) :- name(_, s).\n"
        'name(1, "ada").'
    )
    assert str(db.why('loud("ADA", 1.5)')).splitlines() == [
        'loud("ADA", 1.5)  <- loud(@up(s), 1.5) :- name(_, s).  [line 4]',
        '  name(1, "ada")  (base fact)',
    ]


@pytest.mark.parametrize(
    ("rules", "columns"),
    [
        ("r(x, y) :- e(x, y).  r(x, z) :- r(x, y), e(y, z).", [0]),
        ("r(x, y) :- e(x, y).  r(x, z) :- e(x, y), r(y, z).", [1]),
        ("r(x, y) :- e(x, y).  r(x, z) :- r(x, y), r(y, z).", []),
        ("r(x, y) :- e(x, y).  r(x, y) :- r(x, _), e(_, y).", [0]),
        ("r(x, y) :- e(x, y).  r(x, y) :- e(x, y), s(y).  s(y) :- r(_, y).", []),
    ],
)
def test_demand_keeps_only_the_columns_every_rule_copies(rules: str, columns: list[int]) -> None:
    decls = ".decl e(a: number, b: number)\n.decl r(a: number, b: number)\n.decl s(a: number)\n"
    checked = check_program(parse_program(decls + rules))
    stratum = next(s for s in checked.strata if "r" in s.relations)
    assert invariant_columns(stratum.rules, "r") == columns


def test_demand_restricts_the_evaluation_to_the_asked_row() -> None:
    db = tc([(i, j) for i in range(30) for j in range(30) if i != j])
    from datalog.eval import heights

    calls: list[int] = []
    original = heights.Table.add
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(heights.Table, "add", lambda t, r, h: (calls.append(h), original(t, r, h)))
        assert db.why("reach(3, 3)").height == 2
    assert len(calls) < 30 * 30 + 30 + 10  # edges, then reach(3, _) only (not 30 * 30)


def test_a_spent_budget_stops_why() -> None:
    db = tc([(i, i + 1) for i in range(50)])
    with pytest.raises(BudgetExceeded), db.budget(0.0):
        db.why("reach(0, 50)")


# --- every proof is valid and minimal: a property --------------------------------------


class _Levels(reference.Solver):
    """Positive atoms read `known`; negations and aggregates the complete relations."""

    def __init__(self, known: Relations, full: Relations, *args: object) -> None:
        super().__init__(known, *args)  # type: ignore[arg-type]
        self.full = full

    def apply(self, literal: object, env: Env) -> Iterator[Env]:
        if isinstance(literal, Negation):
            if not any(True for _ in self.match_atom(literal.atom, env, self.full)):
                yield env
            return
        yield from super().apply(literal, env)  # type: ignore[arg-type]

    def match_atom(self, atom: Atom, env: Env, relations: Relations | None = None) -> Iterator[Env]:
        saved = self.relations
        self.relations = relations if relations is not None else saved
        try:
            yield from list(super().match_atom(atom, env))
        finally:
            self.relations = saved

    def aggregate(self, term: Aggregate, env: Env) -> Value | None:
        saved, self.relations = self.relations, self.full
        try:
            return super().aggregate(term, env)
        finally:
            self.relations = saved


def levels(checked: CheckedProgram, base: Relations, full: Relations) -> dict[tuple[str, Row], int]:
    """Each tuple's minimal height by global naive rounds over all rules at once."""
    found = {(name, row): 0 for name, rows in base.items() for row in rows}
    known: Relations = {name: set(rows) for name, rows in base.items()}
    for name in checked.schema:
        known.setdefault(name, set())
    round_ = 1
    while True:
        new = set()
        for rule in checked.rules:
            groups = aggregate_groups(rule.head.args, rule.body)
            solver = _Levels(known, full, checked.schema, checked.types_of(rule), groups)
            for env in solver.solve(rule.body, {}):
                row = solver.head_row(rule.head, env)
                if row is not None and row not in known[rule.head.name]:
                    new.add((rule.head.name, row))
        if not new:
            return found
        for name, row in new:
            found[(name, row)] = round_
            known[name].add(row)
        round_ += 1


def check_proof(
    d: Derivation, checked: CheckedProgram, full: Relations, level: Mapping[tuple[str, Row], int]
) -> None:
    pending = [d]
    while pending:
        node = pending.pop()
        assert node.fact is not None
        key: Any = (node.fact.relation, node.fact.values)
        assert node.fact.values in full[node.fact.relation], f"{node.text} does not hold"
        assert node.height == level[key], f"{node.text}: height {node.height}, not minimal"
        if node.rule is None:
            assert node.height == 0 and not node.premises
            continue
        facts = [p for p in node.premises if p.kind in ("base", "rule")]
        assert node.height == 1 + max((p.height or 0 for p in facts), default=0)
        candidates = [r for r in checked.rules if format_rule(r) == node.rule.text]
        assert any(_instance_holds(r, node, facts, checked, full) for r in candidates), node.text
        pending.extend(p for p in facts if p.kind == "rule")


def _instance_holds(
    rule: Rule, node: Derivation, facts: list[Derivation], checked: CheckedProgram, full: Relations
) -> bool:
    """Whether the positive premises, in body order, bind `rule` to an instance whose
    whole body holds now and whose head is the node's fact."""
    assert node.fact is not None
    atoms = [lit for lit in rule.body if isinstance(lit, Atom)]
    negations = [lit for lit in rule.body if isinstance(lit, Negation)]
    if [a.name for a in atoms] != [p.fact.relation for p in facts if p.fact is not None]:
        return False
    if len(negations) != sum(p.kind == "negation" for p in node.premises):
        return False
    env: Env = {}
    for atom, premise in zip(atoms, facts, strict=True):
        assert premise.fact is not None
        for arg, value in zip(atom.args, premise.fact.values, strict=True):
            if isinstance(arg, Var) and env.setdefault(arg.name, value) != value:  # type: ignore[arg-type]
                return False
    groups = aggregate_groups(rule.head.args, rule.body)
    solver = reference.Solver(full, checked.schema, checked.types_of(rule), groups)
    for solution in solver.solve(rule.body, env):
        if solver.head_row(rule.head, solution) == node.fact.values and all(
            _matches(solver, atom, premise, solution)
            for atom, premise in zip(atoms, facts, strict=True)
        ):
            return True
    return False


def _matches(solver: reference.Solver, atom: Atom, premise: Derivation, env: Env) -> bool:
    assert premise.fact is not None
    kinds = solver.schema.types(atom.name)
    return all(
        isinstance(arg, Wildcard) or solver.value(arg, env, kind) == value
        for arg, kind, value in zip(atom.args, kinds, premise.fact.values, strict=True)
    )


ABSENT: dict[str, Value] = {"number": 99, "unsigned": 99, "float": 99.5, "symbol": "zz"}


def fact_text(relation: str, row: Row) -> str:
    return f"{relation}({', '.join(literal_text(v) for v in row)})"


@settings(
    max_examples=examples(60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_every_proof_is_valid_and_of_minimal_height(data: st.DataObject) -> None:
    generated = data.draw(programs(), label="program")
    stream = data.draw(streams(), label="stream")
    note(f"program:\n{generated.text}\nstream:\n{format_stream(stream)}")
    checked = check_program(parse_program(generated.text))
    db = Database()
    db.define(generated.text)
    facts: dict[str, set[Row]] = {}
    for fact in checked.facts:
        row = reference.Solver({}, checked.schema, {}, {}).head_row(fact.head, {})
        facts.setdefault(fact.head.name, set()).add(row)  # type: ignore[arg-type]
    for tx in stream:
        with db.transaction() as t:
            for op, relation, row in tx:
                (t.insert if op == "insert" else t.retract)(relation, [row])
        apply(facts, tx)
    full = reference.evaluate(replace(checked, facts=()), facts)
    level = levels(checked, {n: set(r) for n, r in facts.items()}, full)
    assert set(level) == {(n, r) for n, rows in full.items() for r in rows}
    for relation in generated.derived:
        for row in sorted(full[relation], key=repr)[:6]:
            d = db.why(fact_text(relation, row))
            check_proof(d, checked, full, level)
        absent = tuple(ABSENT[kind] for kind in generated.relations[relation])
        if absent not in full[relation]:
            with pytest.raises(FactNotFoundError):
                db.why(fact_text(relation, absent))
