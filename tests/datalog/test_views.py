"""Shared derived relations (views): live queries whose plans agree on a derived
relation read it from one view instead of each computing it.

Every live subscription must still equal the reference evaluator's answer after
every commit, subscription and unsubscription (views appear and go, and queries
are rebuilt onto them, while the data changes); the shared relation must be
computed by one dataflow however many queries read it; a relation one query reads
costs no view; views go with their last reader. `stats()`, `explain` and
`deltalog.*` show the sharing.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog import Database, Subscription
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.errors import FunctorError
from datalog.lang.parser import parse_program, parse_query
from differential.operators.iterate import Subscope
from tests.budget import examples
from tests.datalog.answers import Accumulated

PROGRAM = """
.decl edge(x: number, y: number)
.decl tc(x: number, y: number)
.decl reach_count(x: number, n: number)
.decl sink(x: number)
tc(x, y) :- edge(x, y).
tc(x, z) :- tc(x, y), edge(y, z).
reach_count(x, n) :- tc(x, _), n = count : { tc(x, _) }.
sink(y) :- tc(_, y), !edge(y, _).
.decl even(x: number)
.decl odd(x: number)
even(x) :- sink(x).
odd(y) :- even(x), edge(x, y).
even(y) :- odd(x), edge(x, y).
"""
QUERIES = (
    "tc(x, y)",
    "tc(x, y), x < y",
    "reach_count(x, n)",
    "sink(x)",
    "reach_count(x, n), sink(x)",
    "tc(1, y)",  # specialized (magic sets): its own relations, never a view
    "even(x)",  # mutual recursion: one view of its whole stratum
    "odd(x)",
)
WRITABLE = ("edge", "tc")  # facts may be inserted into the derived `tc` too
# Rules `redefine` swaps in for `tc` mid-stream (the views move to the new rules).
TC_RULES = (
    "tc(x, y) :- edge(x, y).\ntc(x, z) :- tc(x, y), edge(y, z).",
    "tc(x, y) :- edge(x, y).\ntc(x, z) :- tc(x, y), tc(y, z).",
    "tc(x, y) :- edge(y, x).",
)


def recursions(db: Database, relation: str = "tc") -> int:
    """Iteration scopes in all dataflows, views included: how often `relation` is
    computed."""
    flows = [*db.engine.dataflows, *db.engine.view_flows()]
    return sum(
        isinstance(op, Subscope) and relation in op.name
        for df in flows
        for op in df.root.all_operators()
    )


class Model:
    """The base facts and each live subscription, checked against the reference."""

    def __init__(self) -> None:
        self.db = Database()
        self.db.define(PROGRAM)
        self.checked = check_program(parse_program(PROGRAM))
        self.facts: dict[str, set[tuple[Any, ...]]] = {name: set() for name in WRITABLE}
        self.subs: list[tuple[str, Accumulated, Subscription]] = []
        self.recursive = True

    def step(self, step: tuple[str, Any]) -> None:
        kind, arg = step
        if kind == "commit":
            with self.db.transaction() as tx:
                for relation, row, inserting in arg:
                    (tx.insert if inserting else tx.retract)(relation, [row])
            for relation, row, inserting in arg:
                (self.facts[relation].add if inserting else self.facts[relation].discard)(row)
        elif kind == "redefine":
            self.db.redefine("tc", TC_RULES[arg])
            program = PROGRAM.replace(TC_RULES[0], TC_RULES[arg])
            self.checked = check_program(parse_program(program))
            self.recursive = arg < len(TC_RULES) - 1
        elif kind == "subscribe":
            acc = Accumulated()
            self.subs.append((arg, acc, self.db.subscribe(arg, acc)))
        elif self.subs:
            self.subs.pop(arg % len(self.subs))[2].close()

    def check(self) -> None:
        relations = reference.evaluate(self.checked, self.facts)
        for text, acc, _ in self.subs:
            query = check_query(parse_query(text), self.checked.schema)
            assert acc.rows() == reference.answer(query, relations), text
        live = {text for text, _, _ in self.subs}
        # tc computed once for all unspecialized readers, plus once for `tc(1, y)`
        # (while its rules recurse: the last of TC_RULES does not)
        unspecialized = any(text != "tc(1, y)" for text in live)
        expected = unspecialized + ("tc(1, y)" in live) if self.recursive else 0
        assert recursions(self.db) == expected
        engine = self.db.engine  # none outlives its readers (a group: all of its views)
        assert all(any(v.read for v in engine.group(view)) for view in engine.views)
        # the mutually recursive {even, odd} is computed once, whoever reads it
        assert recursions(self.db, "even") == bool(live & {"even(x)", "odd(x)"})


_change = st.tuples(
    st.sampled_from(WRITABLE), st.tuples(st.integers(1, 5), st.integers(1, 5)), st.booleans()
)
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.lists(_change, min_size=1, max_size=4)),
        st.tuples(st.just("subscribe"), st.sampled_from(QUERIES)),
        st.tuples(st.just("unsubscribe"), st.integers(0, 7)),
        st.tuples(st.just("redefine"), st.integers(0, len(TC_RULES) - 1)),
    ),
    max_size=16,
)


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_live_queries_over_shared_views_equal_the_reference_after_every_step(
    steps: list[tuple[str, Any]],
) -> None:
    model = Model()
    for step in steps:
        note(repr(step))
        model.step(step)
        model.check()


def test_queries_reading_one_derived_relation_share_one_view() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3), (3, 4)])
    subs = [db.subscribe(q, lambda change: None) for q in QUERIES[:5]]
    assert recursions(db) == 1
    views: Any = db.stats()["views"]
    # tc is read by two queries and by the views of reach_count and sink
    assert views["tc [view]"]["readers"] == 4 and views["tc [view]"]["tuples"] == 6
    assert set(views) == {"tc [view]", "reach_count [view]", "sink [view]"}
    plan = db.explain("tc(x, y), y > 2")
    assert "derived relation tc: read from the shared view `tc [view]`" in plan
    view, own = plan.split("shared arrangements: ")
    assert "iterate['tc']" in view  # the view's plan, shown under the relation
    assert own.startswith("tc (view `tc [view]`)") and "iterate" not in own
    dataflows = {q: s for q, _, s in db.query("deltalog.dataflow(q, o, s)")}
    assert dataflows["tc [view]"] == 0 and dataflows["tc(x, y)"] == 1
    for sub in subs:
        sub.close()
    assert db.engine.views == [] and not any("[view]" in name for name in db.engine.inputs)


def test_one_shot_queries_read_views_but_never_create_one() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    assert db.query("tc(x, y)") and db.engine.views == []
    assert "view" not in db.explain("tc(x, y)")  # computed by the query itself
    with db.subscribe("sink(x)", lambda change: None):
        assert db.engine.views == []  # one reader: it computes tc itself
        with db.subscribe("tc(x, y), x < y", lambda change: None):  # now two: a view
            assert [v.input.name for v in db.engine.views] == ["tc [view]"]
            assert "read from the shared view `tc [view]`" in db.explain("tc(x, y)")
            assert set(db.query("tc(a, b)")) == {(1, 2), (2, 3), (1, 3)}
    assert db.engine.views == []


def test_a_definition_changing_a_shared_relation_moves_its_readers_to_a_new_view() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    a, b = Accumulated(), Accumulated()
    db.subscribe("tc(x, y)", a)
    db.subscribe("sink(x)", b)
    db.define(".decl extra(x: number, y: number)\ntc(x, y) :- extra(x, y).")
    db.insert("extra", [(3, 9)])
    assert a.rows() == {(1, 2), (2, 3), (1, 3), (3, 9)} == set(db.query("tc(p, q)"))
    assert b.rows() == {(3,), (9,)}
    # the new view was made while the old one was still read: its name is suffixed
    assert [v.input.name for v in db.engine.views] == ["tc [view] 2"]
    assert recursions(db) == 1


def test_a_failing_commit_in_a_view_changes_nothing_and_the_views_come_back() -> None:
    def checked(x: int) -> int:
        if x == 13:
            raise ValueError("unlucky")
        return x

    db = Database(functors={"checked": checked})
    db.define(PROGRAM + ".functor checked(x: number): number\n.decl safe(x: number)\n"
              "safe(@checked(x)) :- tc(x, _).")  # fmt: skip
    db.insert("edge", [(1, 2)])
    seen = Accumulated()
    db.subscribe("safe(x)", lambda change: None)
    db.subscribe("safe(x), sink(y)", seen)  # shares safe and tc with the first
    before = set(seen.rows())
    with pytest.raises(FunctorError):
        db.insert("edge", [(13, 1)])
    assert seen.rows() == before == set(db.query("safe(p), sink(q)"))
    assert {v.input.name for v in db.engine.views} == {"tc [view]", "safe [view]"}
    assert recursions(db) == 1
    db.insert("edge", [(2, 5)])
    assert seen.rows() == {(1, 5), (2, 5)}


def test_queries_with_other_join_plans_get_views_of_their_own() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    for plan in ("auto", "binary"):
        db.subscribe("tc(x, y)", lambda change: None, plan=plan)
        assert recursions(db) == 1 + (plan == "binary")  # no view yet: plans differ
        db.subscribe("tc(x, y), x < y", lambda change: None, plan=plan)
    names = Counter(v.input.name for v in db.engine.views)
    assert names == Counter({"tc [view]": 1, "tc [view, plan=binary]": 1})
    assert recursions(db) == 2


def test_a_subscription_whose_sharing_fails_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    first = Accumulated()
    db.subscribe("tc(x, y)", first)

    def fail(live: object) -> None:
        raise MemoryError("while moving the first query onto the view")

    with monkeypatch.context() as patched:
        patched.setattr(db.queries, "rebuild", fail)
        with pytest.raises(MemoryError):
            db.subscribe("tc(x, y), x < y", lambda change: None)
    assert list(db.live) == ["tc(x, y)"] and db.engine.views == []
    assert recursions(db) == 1  # the first still computes tc itself
    db.insert("edge", [(3, 4)])
    assert first.rows() == {(1, 2), (2, 3), (1, 3), (3, 4), (2, 4), (1, 4)}


def test_time_travel_reads_base_relations_not_the_views_of_today() -> None:
    db = Database(history=None)
    db.define(PROGRAM)
    first = db.insert("edge", [(1, 2)])
    db.subscribe("tc(x, y)", lambda change: None)
    db.subscribe("sink(x)", lambda change: None)
    assert [v.input.name for v in db.engine.views] == ["tc [view]"]
    db.insert("edge", [(2, 3)])
    assert set(db.query("tc(x, y)", as_of=first)) == {(1, 2)}
    assert set(db.query("tc(x, y)")) == {(1, 2), (2, 3), (1, 3)}
    assert str(db.why("tc(1, 3)")).startswith("tc(1, 3)")
    relations = {("edge", 2), ("tc", 0), ("reach_count", 0), ("sink", 0), ("even", 0), ("odd", 0)}
    assert set(db.query("deltalog.relation(n, t)")) == relations  # no view among them


def test_a_checkpoint_holds_the_relations_and_never_a_view(tmp_path: Any) -> None:
    with Database(tmp_path / "db") as db:
        db.define(PROGRAM)
        db.insert("edge", [(1, 2), (2, 3)])
        db.subscribe("tc(x, y)", lambda change: None)
        db.subscribe("sink(x)", lambda change: None)
        assert db.engine.views
        db.checkpoint()
        db.insert("edge", [(3, 4)])
    with Database(tmp_path / "db") as again:
        assert not any("[view]" in name for name in again.engine.inputs)
        assert set(again.query("sink(x)")) == {(4,)}
        assert len(again.query("tc(x, y)")) == 6


def test_tenant_queries_and_view_readers_live_side_by_side() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3), (3, 1), (4, 5)])
    one, two, whole, sinks = Accumulated(), Accumulated(), Accumulated(), Accumulated()
    db.subscribe("tc(1, y)", one)
    db.subscribe("tc(4, y)", two)  # the same tenant dataflow as tc(1, y)
    db.subscribe("tc(x, y)", whole)
    db.subscribe("sink(x)", sinks)  # shares tc with tc(x, y): a view
    assert [v.input.name for v in db.engine.views] == ["tc [view]"]
    db.retract("edge", [(3, 1)])
    db.insert("edge", [(5, 6)])
    assert one.rows() == {(2,), (3,)}
    assert two.rows() == {(5,), (6,)}
    assert sinks.rows() == {(3,), (6,)}
    assert whole.rows() == set(db.query("tc(x, y)"))
    assert recursions(db) == 2  # the view's tc and the tenants' specialized tc


def test_a_mutual_recursion_is_shared_as_one_view_of_its_whole_stratum() -> None:
    """Queries reading `a` and `b` of one mutually recursive stratum compute it once:
    one view dataflow computes both (a group of two views, each read as a base
    relation is); the group stays while either is read and goes with the last."""
    db = Database()
    db.define(".decl e(x: number, y: number)\n.decl low(x: number)\n.decl a(x: number)\n"
              ".decl b(x: number)\nlow(x) :- e(x, _).\na(x) :- b(x).\nb(x) :- low(x).\n"
              "b(x) :- a(x), x > 100.")  # fmt: skip
    first, second = Accumulated(), Accumulated()
    reading_a = db.subscribe("a(x)", first)
    reading_b = db.subscribe("b(x)", second)
    db.insert("e", [(1, 2), (3, 1), (200, 1)])
    assert first.rows() == second.rows() == {(1,), (3,), (200,)}
    assert {"a [view]", "b [view]"} <= {v.input.name for v in db.engine.views}
    flows = [*db.engine.dataflows, *db.engine.view_flows()]
    scopes = [op.name for df in flows for op in df.root.all_operators() if isinstance(op, Subscope)]
    assert len(scopes) == 1 and "'a', 'b'" in scopes[0]  # the stratum, computed once
    assert db.stats()["views"]["a [view]"]["computed with"] == ["b [view]"]
    reading_a.close()
    db.retract("e", [(3, 1)])
    assert second.rows() == {(1,), (200,)}
    assert any(v.input.name == "b [view]" for v in db.engine.views)
    reading_b.close()
    assert not db.engine.views
