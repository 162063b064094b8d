"""The `deltalog.*` relations: the database's own state, queried and subscribed.

Checked against independent accounts: a Python model of each relation's stored
facts under its semantics, the subscriptions the test made, and the database's
own arrangements measured afresh; subscriptions accumulate to the one-shot answer
of an equivalent query after every step, and epochs only increase.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog import Change, Database, Subscription
from datalog.lang.errors import DatalogError, DatalogSemanticError, FunctorError, TransactionError
from tests.budget import examples
from tests.datalog.answers import Accumulated

PROGRAM = """
.decl edge(x: number, y: number)
.decl tag(x: number) multiset
.decl owner(thing: number, who: symbol) last_write_wins
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""
USER_QUERIES = ("reach(1, y)", "reach(x, y)", "edge(x, y), !tag(x)", "owner(t, w)")
# each deltalog relation, subscribed as written and queried under other names
MONITORS = {
    "deltalog.relation(n, t)": "deltalog.relation(a, b)",
    "deltalog.arrangement(n, t, b, r)": "deltalog.arrangement(a, b, c, d)",
    "deltalog.dataflow(q, o, s)": "deltalog.dataflow(a, b, c)",
}


class Stored:
    """What each base relation stores, by its semantics (the model)."""

    def __init__(self) -> None:
        self.edge: set[tuple[int, int]] = set()
        self.tag: Counter[int] = Counter()
        self.owner: dict[int, str] = {}
        self.reach: set[tuple[int, int]] = set()

    def apply(self, relation: str, row: tuple[Any, ...], inserting: bool) -> None:
        if relation == "tag":
            if inserting or self.tag[row[0]] > 0:
                self.tag[row[0]] += 1 if inserting else -1
        elif relation == "owner":
            thing, who = row
            if inserting:
                self.owner[thing] = who
            elif self.owner.get(thing) == who:
                del self.owner[thing]
        else:
            rows: set[Any] = getattr(self, relation)
            (rows.add if inserting else rows.discard)(row)

    def sizes(self) -> set[tuple[str, int]]:
        tags = sum(1 for n in self.tag.values() if n > 0)
        return {("edge", len(self.edge)), ("tag", tags), ("owner", len(self.owner)),
                ("reach", len(self.reach))}  # fmt: skip


Step = tuple[str, Any]
_row = {
    "edge": st.tuples(st.integers(1, 4), st.integers(1, 4)),
    "reach": st.tuples(st.integers(1, 4), st.integers(1, 4)),
    "tag": st.tuples(st.integers(1, 2)),
    "owner": st.tuples(st.integers(1, 3), st.sampled_from(["ann", "bob"])),
}
_change = st.sampled_from(sorted(_row)).flatmap(
    lambda rel: st.tuples(st.just(rel), _row[rel], st.booleans())
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.lists(_change, min_size=1, max_size=4)),
        st.tuples(st.just("subscribe"), st.sampled_from(USER_QUERIES)),
        st.tuples(st.just("unsubscribe"), st.integers(0, 5)),
    ),
    max_size=12,
)


class Monitored:
    """A database, its subscriptions to the deltalog relations and the model."""

    def __init__(self) -> None:
        self.db = Database()
        self.db.define(PROGRAM)
        self.stored = Stored()
        self.epochs: dict[str, list[int]] = {text: [] for text in MONITORS}
        self.monitors: dict[str, Accumulated] = {}
        for text in MONITORS:
            self.monitors[text] = Accumulated()
            self.db.subscribe(text, self._watch(self.monitors[text], self.epochs[text]))
        self.subs: list[Subscription] = []

    @staticmethod
    def _watch(into: Accumulated, epochs: list[int]) -> Any:
        def watch(change: Change) -> None:
            if not change.snapshot:
                epochs.append(change.epoch)
            into(change)

        return watch

    def run(self, step: Step) -> None:
        """Subscribing and unsubscribing take no epoch (ADR 0041): the deltalog
        relations live queries read show them with the next commit, so every step
        ends with one (a commit that changes no fact still publishes)."""
        kind, arg = step
        self.step(kind, arg)
        if kind != "commit":
            with self.db.transaction() as tx:
                tx.insert("tag", [(9,)])
                tx.retract("tag", [(9,)])

    def step(self, kind: str, arg: Any) -> None:
        if kind == "commit":
            with self.db.transaction() as tx:
                for relation, row, inserting in arg:
                    (tx.insert if inserting else tx.retract)(relation, [row])
            for relation, row, inserting in arg:
                self.stored.apply(relation, row, inserting)
        elif kind == "subscribe":
            self.subs.append(self.db.subscribe(arg, lambda change: None))
        elif self.subs:
            self.subs.pop(arg % len(self.subs)).close()

    def check(self) -> None:
        db = self.db
        for text, other in MONITORS.items():
            assert self.monitors[text].rows() == set(db.query(other)), text
        assert set(db.query("deltalog.relation(n, t)")) == self.stored.sizes()
        for name in ("edge", "tag", "owner"):  # base relations: the size of their answer
            arity = len(db.checked.schema.types(name))
            answer = db.query(f"{name}({', '.join(f'v{i}' for i in range(arity))})")
            assert (name, len(answer)) in self.stored.sizes()
        subscribed = Counter(sub.query for sub in self.subs)
        dataflows = {(q, s) for q, _, s in db.query("deltalog.dataflow(q, o, s)")}
        assert dataflows == set(subscribed.items())
        measured = db.introspection.measure()["deltalog.arrangement"]
        arrangements = db.query("deltalog.arrangement(n, _, _, r)")
        assert set(arrangements) == {(row[0], row[3]) for row in measured}
        for epochs in self.epochs.values():
            assert epochs == sorted(set(epochs)), "epochs strictly increase"


@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_deltalog_relations_describe_the_database_after_every_step(run: list[Step]) -> None:
    monitored = Monitored()
    monitored.check()
    for step in run:
        note(repr(step))
        monitored.run(step)
        monitored.check()


def test_a_one_shot_query_counts_without_any_live_reader() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    db.insert("tag", [(1,), (1,), (2,)])
    db.retract("tag", [(2,)])
    assert db.engine.reads_late is False
    assert set(db.query("deltalog.relation(n, t)")) == {
        ("edge", 2), ("tag", 1), ("owner", 0), ("reach", 0)
    }  # fmt: skip
    db.insert("edge", [(3, 4)])  # nothing keeps them current: the next query refreshes
    assert ("edge", 3) in db.query("deltalog.relation(n, t)")
    with db.subscribe("reach(x, y)", lambda change: None):
        queries = db.query("deltalog.dataflow(q, o, s)")
        assert [(q, s) for q, _, s in queries] == [("reach(x, y)", 1)]
        names = {n for (n,) in db.query("deltalog.arrangement(n, _, _, _)")}
        assert {"edge/state", "edge[0, 1]/1"} <= names
        assert any(n.startswith("reach(x, y) #") for n in names)
    assert db.query("deltalog.dataflow(q, o, s)") == []


def test_the_issue_example_warns_when_an_index_grows_large() -> None:
    db = Database()
    db.define(PROGRAM)
    large: list[tuple[int, list[tuple[Any, ...]]]] = []
    db.subscribe(
        "deltalog.arrangement(n, t, _, _), t > 5",
        lambda change: large.append(
            (change.epoch, sorted(zip(change.rows, change.diffs, strict=True)))
        ),
    )
    db.insert("edge", [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6)])
    assert large[1:] == []  # five tuples: not large yet
    epoch = db.insert("edge", [(6, 7)])
    assert large[1:] == [(epoch, [(("edge/state", 6), 1)])]


def test_queries_and_rules_read_deltalog_relations() -> None:
    db = Database()
    db.define(PROGRAM + """
        .decl stored(n: symbol)
        stored(n) :- deltalog.relation(n, t), t > 0.
    """)  # fmt: skip
    assert db.query("stored(n)") == []
    db.insert("edge", [(1, 2)])
    assert db.query("stored(n)") == [("edge",)]
    seen = Accumulated()
    db.subscribe("stored(n)", seen)
    db.insert("tag", [(1,)])
    assert seen.rows() == {("edge",), ("tag",)} == set(db.query("stored(m)"))
    db.retract("edge", [(1, 2)])
    assert seen.rows() == {("tag",)}


def test_commits_ask_for_nothing_while_no_live_query_reads_deltalog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = Database()
    db.define(PROGRAM)
    asked: list[int] = []
    measure = db.introspection.measure
    monkeypatch.setattr(
        db.introspection, "measure", lambda *names: asked.append(1) or measure(*names)
    )
    with db.subscribe("reach(x, y)", lambda change: None):
        for i in range(5):
            db.insert("edge", [(i, i + 1)])
    db.query("reach(1, y)")
    assert asked == []
    with db.subscribe("deltalog.relation(n, t)", lambda change: None):
        before = len(asked)
        db.insert("edge", [(9, 10)])
        assert len(asked) == before + 1  # one measurement per commit
    db.insert("edge", [(10, 11)])
    assert len(asked) == before + 1


def test_subscribing_while_monitored_takes_no_epoch_and_shows_at_the_next_commit() -> None:
    """Reads never write (ADR 0041): a subscription or an unsubscription takes no
    epoch; a monitor of `deltalog.dataflow` sees it with the next commit."""
    db = Database()
    db.define(PROGRAM)
    changes: list[Change] = []
    db.subscribe("deltalog.dataflow(q, o, s)", changes.append)
    start = db.epoch
    sub = db.subscribe("reach(x, y)", lambda change: None)
    assert db.epoch == start and changes[1:] == []
    db.insert("tag", [(1,)])
    assert [(c.epoch, [r[::2] for r in c.rows], c.diffs) for c in changes[1:]] == [
        (start + 1, [("reach(x, y)", 1)], [1])
    ]
    sub.close()
    assert db.epoch == start + 1
    db.insert("tag", [(2,)])
    assert db.epoch == start + 2 and changes[-1].diffs == [-1]
    db.subscribe("deltalog.relation(n, t)", lambda change: None)  # reports no dataflow
    assert db.epoch == start + 2


def test_a_new_tenant_constant_while_monitored_shows_at_the_next_commit() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3)])
    changes: list[Change] = []
    db.subscribe("deltalog.dataflow(q, o, s)", changes.append)
    for k, answer in ((1, [(2,), (3,)]), (2, [(3,)])):
        start, seen = db.epoch, len(changes)
        sub = db.subscribe(f"reach({k}, y)", lambda change: None)
        assert db.epoch == start and sub.rows() == answer
        db.insert("tag", [(k,)])
        assert sub.rows() == answer
        assert [(c.epoch, [r[::2] for r in c.rows], c.diffs) for c in changes[seen:]] == [
            (start + 1, [(f"reach({k}, y)", 1)], [1])
        ]
    start = db.epoch
    db.subscribe("reach(2, y)", lambda change: None)  # an existing constant: count only
    assert db.epoch == start
    db.insert("tag", [(3,)])
    last = changes[-1]
    assert sorted((r[::2], d) for r, d in zip(last.rows, last.diffs, strict=True)) == [
        (("reach(2, y)", 1), -1), (("reach(2, y)", 2), 1)
    ]  # fmt: skip


def test_an_unsubscription_inside_a_callback_is_published_with_the_next_commit() -> None:
    db = Database()
    db.define(PROGRAM)
    monitor = Accumulated()
    db.subscribe("deltalog.dataflow(q, _, s)", monitor)
    epochs: list[int] = []
    subs: list[Subscription] = []

    def close_on_change(change: Change) -> None:
        if not change.snapshot:
            subs[0].close()

    subs.append(db.subscribe("edge(x, y)", close_on_change))
    db.subscribe("deltalog.dataflow(q, o, s)", lambda change: epochs.append(change.epoch))
    before = db.epoch
    db.insert("tag", [(1,)])  # publishes the subscription
    assert monitor.rows() == {("edge(x, y)", 1)}
    db.insert("edge", [(1, 2)])  # the callback unsubscribes during its delivery
    assert db.epoch == before + 2 and monitor.rows() == {("edge(x, y)", 1)}
    db.insert("tag", [(2,)])
    assert db.epoch == before + 3
    assert monitor.rows() == set() == set(db.query("deltalog.dataflow(a, _, b)"))
    assert epochs == sorted(set(epochs))


def test_a_failed_commit_changes_no_deltalog_relation() -> None:
    def fragile(x: int) -> int:
        if x == 13:
            raise ValueError("unlucky")
        return x

    db = Database(functors={"fragile": fragile})
    db.define(PROGRAM + """
        .functor fragile(x: number): number
        .decl safe(x: number)
        safe(@fragile(x)) :- edge(x, _).
    """)  # fmt: skip
    monitors = {text: Accumulated() for text in MONITORS}
    for text, monitor in monitors.items():
        db.subscribe(text, monitor)
    db.subscribe("safe(x)", lambda change: None)
    db.insert("edge", [(1, 2)])
    before = {text: set(db.query(other)) for text, other in MONITORS.items()}
    with pytest.raises(FunctorError):
        db.insert("edge", [(13, 2)])
    for text, other in MONITORS.items():
        assert monitors[text].rows() == set(db.query(other)) == before[text]
    db.insert("edge", [(2, 3)])
    assert ("edge", 2) in monitors["deltalog.relation(n, t)"].rows()


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        (".decl deltalog.relation(name: symbol, tuples: number)", 1, 1),
        (".decl ok(x: number)\n.decl deltalog.mine(x: number)", 2, 1),
        ('deltalog.relation("edge", 7).', 1, 1),
        ('.decl e(x: number)\ndeltalog.dataflow("q", x, x) :- e(x).', 2, 1),
        (".input deltalog.relation", 1, 1),
    ],
)
def test_defining_a_deltalog_relation_is_refused_and_changes_nothing(
    text: str, line: int, column: int
) -> None:
    db = Database()
    db.define(PROGRAM)
    epoch, definitions = db.epoch, list(db.definitions)
    with pytest.raises(DatalogError) as caught:
        db.define(text)
    errors = getattr(caught.value, "errors", [caught.value])
    assert len(errors) == 1 and isinstance(errors[0], DatalogSemanticError)
    assert "is reserved" in errors[0].message
    assert (errors[0].line, errors[0].column) == (line, column)
    assert (db.epoch, db.definitions) == (epoch, definitions)
    assert set(db.query("deltalog.relation(n, 0)")) == {("edge",), ("tag",), ("owner",), ("reach",)}


def test_writing_a_deltalog_relation_is_refused_and_changes_nothing() -> None:
    db = Database()
    db.define(PROGRAM)
    seen = Accumulated()
    db.subscribe("deltalog.relation(n, t)", seen)
    epoch = db.epoch
    with pytest.raises(TransactionError, match=r"`deltalog\.relation` is reserved"):
        db.insert("deltalog.relation", [("edge", 100)])
    with pytest.raises(TransactionError, match="is reserved"), db.transaction() as tx:
        tx.insert("edge", [(1, 2)])
        tx.retract("deltalog.dataflow", [("q", 1, 1)])
    assert db.epoch == epoch and ("edge", 0) in seen.rows()


def test_deltalog_epochs_survive_a_restart(tmp_path: Path) -> None:
    db = Database(tmp_path)
    db.define(PROGRAM)
    db.subscribe("deltalog.dataflow(q, o, s)", lambda change: None)
    db.insert("edge", [(1, 2)])
    sub = db.subscribe("reach(1, y)", lambda change: None)  # no epoch (ADR 0041)
    db.define(".decl extra(x: number)")  # a new relation: no epoch either
    sub.close()
    db.insert("edge", [(2, 3)])
    epoch = db.epoch
    db.checkpoint()
    db.insert("tag", [(1,)])
    db.subscribe("reach(x, y)", lambda change: None)
    db.close()
    again = Database(tmp_path)
    assert again.epoch == epoch + 1
    assert set(again.query("deltalog.relation(n, t)")) == {
        ("edge", 2), ("tag", 1), ("owner", 0), ("reach", 0), ("extra", 0)
    }  # fmt: skip
    assert again.query("deltalog.dataflow(q, o, s)") == []
    again.close()


def test_stats_count_facts_as_the_relation_does() -> None:
    db = Database()
    db.define(PROGRAM)
    db.insert("tag", [(1,), (1,), (2,)])
    db.insert("edge", [(1, 2)])
    db.retract("edge", [(1, 2)])
    inputs: Any = db.stats()["inputs"]
    assert inputs["tag"]["tuples"] == 2 and inputs["edge"]["tuples"] == 0
    assert inputs["edge"]["updates"] >= 0
    counts = dict(db.query("deltalog.relation(n, t)"))
    assert {name: inputs[name]["tuples"] for name in counts} == counts


def test_only_the_relations_live_queries_read_are_kept_current() -> None:
    db = Database()
    db.define(PROGRAM)
    counts = Accumulated()
    db.subscribe("deltalog.relation(n, t)", counts)
    epoch = db.epoch
    with db.subscribe("reach(x, y)", lambda change: None):  # changes no relation count
        assert db.epoch == epoch  # so no epoch of its own
        [(query, operators, subscribers)] = db.query("deltalog.dataflow(q, o, s)")
        assert (query, subscribers) == ("reach(x, y)", 1)
        fact = f'deltalog.dataflow("reach(x, y)", {operators}, 1)'
        assert str(db.why(fact)) == f"{fact}  (base fact)"
    assert db.query("deltalog.dataflow(q, o, s)") == [] and db.epoch == epoch
    db.insert("edge", [(1, 2)])
    assert ("edge", 1) in counts.rows()
