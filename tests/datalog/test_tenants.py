"""Multi-tenant dataflows (ADR 0022): subscriptions to queries that differ only in
constants share one dataflow, and each subscriber still accumulates exactly the
reference answer for its own constants."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from datalog import Change, Database
from datalog.eval import reference
from datalog.lang.checks import check_query
from datalog.lang.parser import parse_query
from tests.budget import examples

PROGRAM = """
.decl edge(a: number, b: number)
.decl reach(a: number, b: number)
.decl label(n: number, s: symbol)
.decl blocked(n: number)
.decl open(a: number, b: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
open(x, y) :- edge(x, y), !blocked(y).
"""


class Accumulated:
    """A subscriber's answer: its snapshot plus every change since (a multiset)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[object, ...]] = Counter()
        self.epochs: list[int] = []

    def __call__(self, change: Change) -> None:
        self.epochs.append(change.epoch)
        for row, diff in zip(change.rows, change.diffs, strict=True):
            self.counts[row] += diff

    def rows(self) -> set[tuple[object, ...]]:
        assert all(n in (0, 1) for n in self.counts.values()), self.counts
        return {row for row, n in self.counts.items() if n}


def expected(db: Database, text: str, facts: dict[str, set[tuple[object, ...]]]) -> set:
    relations = reference.evaluate(db.checked, facts)
    return reference.answer(check_query(parse_query(text), db.checked.schema), relations)


def dataflow_names(db: Database) -> list[str]:
    return [str(d["name"]) for d in db.engine.stats()["dataflows"]]  # type: ignore[index]


QUERIES = ["reach({k}, y)", "open({k}, y)", "reach({k}, y), label(y, s)", "edge({k}, {k})"]
EDGE = st.tuples(st.integers(0, 5), st.integers(0, 5))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.sampled_from(["edge", "blocked", "label"]), EDGE),
        st.tuples(st.just("retract"), st.sampled_from(["edge", "blocked", "label"]), EDGE),
        st.tuples(st.just("subscribe"), st.sampled_from(QUERIES), st.integers(0, 5)),
        st.tuples(st.just("unsubscribe"), st.just(""), st.integers(0, 30)),
    ),
    max_size=25,
)


def _row(relation: str, pair: tuple[int, int]) -> tuple[object, ...]:
    if relation == "blocked":
        return (pair[0],)
    if relation == "label":
        return (pair[0], f"s{pair[1]}")
    return pair


@settings(max_examples=examples(60), deadline=None)
@given(OPS)
def test_each_subscriber_accumulates_its_own_reference_answer(ops: list) -> None:
    db = Database()
    db.define(PROGRAM)
    facts: dict[str, set[tuple[object, ...]]] = {"edge": set(), "blocked": set(), "label": set()}
    subs: list[tuple[str, Accumulated, object]] = []
    for kind, what, arg in ops:
        if kind in ("insert", "retract"):
            row = _row(what, arg)
            (db.insert if kind == "insert" else db.retract)(what, [row])
            (facts[what].add if kind == "insert" else facts[what].discard)(row)
        elif kind == "subscribe":
            text = what.format(k=arg)
            acc = Accumulated()
            subs.append((text, acc, db.subscribe(text, acc)))
        elif subs:
            _, _, sub = subs.pop(arg % len(subs))
            sub.close()  # type: ignore[attr-defined]
        for text, acc, _ in subs:
            assert acc.rows() == expected(db, text, facts), text
            assert acc.epochs == sorted(set(acc.epochs)), "one change per epoch, in order"
    shapes = {text.split("(")[0] + ("," in text.split(")")[1]) * "+" for text, _, _ in subs}
    assert len([n for n in dataflow_names(db) if n.startswith("tenant ")]) == len(shapes)
    for _, _, sub in subs:
        sub.close()  # type: ignore[attr-defined]
    assert dataflow_names(db) == []
    assert not [name for name in db.engine.inputs if name.startswith("tenant@")]


def test_a_thousand_subscribers_hold_one_dataflow() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(k, 1000 + k % 10) for k in range(1000)])
    db.insert("edge", [(1000 + j, 2000) for j in range(10)])
    accs = {k: Accumulated() for k in range(1000)}
    subs = [db.subscribe(f"reach({k}, y)", accs[k]) for k in range(1000)]
    assert dataflow_names(db) == ["tenant reach(_p0, y)"]
    assert len(db.stats()["queries"]) == 1000  # type: ignore[arg-type]
    assert accs[998].rows() == {(1008,), (2000,)}
    before = {k: len(a.epochs) for k, a in accs.items()}
    db.insert("edge", [(1003, 3000)])
    touched = {k for k, a in accs.items() if len(a.epochs) != before[k]}
    assert touched == {k for k in range(1000) if k % 10 == 3}  # the parameters touched
    assert accs[13].rows() == {(1003,), (2000,), (3000,)}
    before = {k: len(a.epochs) for k, a in accs.items()}
    db.insert("edge", [(5000, 5001)])  # ... but nobody reaches 5000: nothing delivered
    assert all(len(a.epochs) == before[k] for k, a in accs.items())
    for sub in subs:
        sub.close()
    assert dataflow_names(db) == []


def test_a_new_parameter_takes_no_epoch_and_joins_with_the_next_commit() -> None:
    """Reads never write (ADR 0041): the new member's snapshot is of the current
    epoch; its parameter enters the shared dataflow with the next commit, where the
    member gets exactly what that commit changed (not its whole answer again) and
    the other members get nothing on its account."""
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    one, two = Accumulated(), Accumulated()
    db.subscribe("reach(1, y)", one)
    epoch = db.epoch
    db.subscribe("reach(2, y)", two)
    assert db.epoch == epoch and two.epochs == [epoch] and two.rows() == {(3,)}
    same = Accumulated()
    db.subscribe("reach(2, y)", same)  # an existing parameter: its member's answer
    assert db.epoch == epoch and same.rows() == {(3,)}
    db.insert("blocked", [(7,)])  # changes no reach: the join is silent
    assert two.epochs == [epoch] and one.epochs == [epoch]
    db.insert("edge", [(3, 4)])
    assert two.epochs == [epoch, epoch + 2] and two.rows() == {(3,), (4,)}
    assert one.epochs == [epoch, epoch + 2] and one.rows() == {(2,), (3,), (4,)}
    assert same.rows() == {(3,), (4,)}


def test_a_parameter_joining_at_a_commit_that_changes_its_answer() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    two = Accumulated()
    db.subscribe("reach(2, y)", two)
    db.retract("edge", [(2, 3)])  # the commit that inserts the parameter
    assert two.rows() == set() and len(two.epochs) == 2
    db.insert("edge", [(2, 5)])
    assert two.rows() == {(5,)}


def test_unsubscribing_retracts_the_parameter_with_the_next_commit() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    keep, go = Accumulated(), Accumulated()
    db.subscribe("reach(1, y)", keep)
    sub = db.subscribe("reach(2, y)", go)
    params = db.engine.inputs["tenant@" + str(_tenant_id(db))]
    assert len(params.presence.spine.accumulate(None)) == 0  # both join at the next commit
    db.insert("edge", [(5, 6)])
    assert len(params.presence.spine.accumulate(None)) == 2
    sub.close()
    db.insert("edge", [(3, 4)])
    assert len(params.presence.spine.accumulate(None)) == 1 and "reach(2, y)" not in db.live
    assert keep.rows() == {(2,), (3,), (4,)}
    back = Accumulated()  # re-subscribing starts from a fresh answer
    db.subscribe("reach(2, y)", back)
    assert back.rows() == {(3,), (4,)}


def test_resubscribing_a_retiring_parameter_before_any_commit() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    db.subscribe("reach(1, y)", Accumulated())
    db.subscribe("reach(2, y)", Accumulated()).close()
    back = Accumulated()
    db.subscribe("reach(2, y)", back)
    assert back.rows() == {(3,)}
    db.insert("edge", [(3, 4)])
    assert back.rows() == {(3,), (4,)}


def test_symbols_and_queries_without_constants() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("label", [(1, "a"), (2, "b")])
    a, b, every = Accumulated(), Accumulated(), Accumulated()
    db.subscribe('label(n, "a")', a)
    db.subscribe('label(n, "b")', b)
    db.subscribe("label(n, s)", every)  # no constants: its own dataflow, as before
    assert a.rows() == {(1,)} and b.rows() == {(2,)}
    assert sorted(dataflow_names(db)) == ["label(n, s)", "tenant label(n, _p0)"]
    db.insert("label", [(3, "a")])
    assert a.rows() == {(1,), (3,)} and b.rows() == {(2,)}


def test_redefine_reaches_every_member() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    one, two = Accumulated(), Accumulated()
    db.subscribe("reach(1, y)", one)
    db.subscribe("reach(2, y)", two)
    db.redefine("reach", "reach(x, y) :- edge(x, y).")
    assert one.rows() == {(2,)} and two.rows() == {(3,)}
    db.insert("edge", [(1, 5)])
    assert one.rows() == {(2,), (5,)} and two.rows() == {(3,)}
    assert len(dataflow_names(db)) == 1


def test_durable_replay_reaches_the_same_epochs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with Database(tmp_path) as db:
        db.define(PROGRAM)
        db.insert("edge", [(1, 2)])
        db.subscribe("reach(1, y)", Accumulated())
        db.subscribe("reach(2, y)", Accumulated())
        db.insert("edge", [(2, 3)])
        epoch = db.epoch
    with Database(tmp_path) as again:
        assert again.epoch == epoch
        assert sorted(again.query("reach(1, y)")) == [(2,), (3,)]


def _tenant_id(db: Database) -> int:
    (tenant,) = db.queries.tenants.by_key.values()
    return int(tenant.relation.split("@")[1])
