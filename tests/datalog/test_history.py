"""Time travel: `as_of=E` answers as the database answered at the end of epoch E.

The property test records, after every commit of a random program and stream
(with some of the rules defined midway, so epochs differ in their rules too),
each query's answer (checked against the reference evaluator) and a proof from
`why`; at the end, `query(q, as_of=E)`, `query_columns(q, as_of=E)` and
`why(fact, as_of=E)` must give back what was recorded for every epoch the
history keeps (also once the base relations' traces are merged, which compacts
them as far as the history allows), and a clear error naming the oldest readable
epoch for the others.
The examples check the limits, the errors, compaction and durable reopening.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog.db.database import Database
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.errors import (
    DatalogError,
    EpochError,
    FactNotFoundError,
    HistoryCompactedError,
    UnknownNameError,
)
from datalog.lang.parser import parse_program, parse_query
from datalog.plan.wcoj import JoinPlan
from differential.tuning import TUNING
from tests.budget import examples
from tests.datalog.programs import (
    BASE,
    Generated,
    Row,
    apply,
    constant_query,
    format_stream,
    full_query,
    literal_text,
    programs,
    streams,
)

pytestmark = pytest.mark.usefixtures("small_path")

TC = """
.decl edge(x: number, y: number)
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""

PLANS: st.SearchStrategy[JoinPlan] = st.sampled_from(("auto", "wcoj", "binary"))
HISTORIES = st.sampled_from((None, 0, 1, 2, 3, 5, 1000))


# --- the property ------------------------------------------------------------------------


class Recorder:
    """What the database answered at the end of each epoch."""

    def __init__(self, db: Database, generated: Generated, queries: list[str]) -> None:
        self.db, self.generated, self.queries = db, generated, queries
        self.program = ""  # the text defined so far
        self.answers: dict[int, dict[str, set[Row]]] = {}
        self.proofs: dict[int, dict[str, str]] = {}

    def define(self, text: str) -> None:
        self.db.define(text)
        self.program += text + "\n"

    def record(self, facts: dict[str, set[Row]]) -> None:
        checked = check_program(parse_program(self.program))
        relations = reference.evaluate(checked, facts)
        answers = {}
        for text in self.queries:
            answers[text] = set(self.db.query(text))
            expected = reference.answer(check_query(parse_query(text), checked.schema), relations)
            assert answers[text] == expected, f"epoch {self.db.epoch}: `{text}`"
        self.answers[self.db.epoch] = answers
        self.proofs[self.db.epoch] = {
            fact: str(self.db.why(fact)) for fact in self.facts_to_prove(answers)
        }

    def facts_to_prove(self, answers: dict[str, set[Row]]) -> list[str]:
        """The first tuple of each derived relation, if any."""
        found = []
        for relation in self.generated.derived:
            text = full_query(relation, self.generated.relations[relation])
            rows = sorted(answers.get(text, ()), key=repr)
            if rows and self.generated.relations[relation]:
                found.append(f"{relation}({', '.join(literal_text(v) for v in rows[0])})")
        return found


def writable(generated: Generated, data: st.DataObject) -> dict[str, tuple[str, ...]]:
    """The base relations and, sometimes, a derived one (facts go into it too)."""
    out = dict(BASE)
    candidates = [r for r in generated.derived if generated.relations[r]]
    if candidates and data.draw(st.integers(0, 3), label="write derived?") == 0:
        chosen = data.draw(st.sampled_from(candidates), label="derived written")
        out[chosen] = generated.relations[chosen]
    return out


def split(text: str) -> tuple[str, list[str]]:
    """A generated program's declarations, and its rules one by one."""
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(x for x in lines if x.startswith(".")), [
        x for x in lines if not x.startswith(".")
    ]


@settings(
    max_examples=examples(40),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_as_of_equals_the_answer_and_proof_recorded_at_every_kept_epoch(
    data: st.DataObject,
) -> None:
    generated = data.draw(programs(), label="program")
    decls, rules = split(generated.text)
    first = data.draw(st.integers(0, len(rules)), label="rules defined at first")
    stream = data.draw(streams(writable(generated, data)), label="stream")
    later = data.draw(st.integers(0, len(stream)), label="the other rules before transaction")
    history = data.draw(HISTORIES, label="history")
    plan = data.draw(PLANS, label="plan")
    merged = data.draw(st.booleans(), label="merge the traces before reading the past")
    queries = [full_query(r, generated.relations[r]) for r in generated.derived]
    queries = list(dict.fromkeys([*queries, data.draw(constant_query(generated))]))
    note(f"program:\n{generated.text}\nstream:\n{format_stream(stream)}")

    db = Database(history=history)
    recorder = Recorder(db, generated, queries)
    recorder.define("\n".join([decls, *rules[:first]]))
    facts: dict[str, set[Row]] = {}
    recorder.record(facts)
    for n, tx in enumerate([*stream, None]):
        if n == later and first < len(rules):
            recorder.define("\n".join(rules[first:]))  # an epoch of its own
            recorder.record(facts)
        if tx is not None:
            with db.transaction() as t:
                for op, relation, row in tx:
                    (t.insert if op == "insert" else t.retract)(relation, [row])
            apply(facts, tx)
            recorder.record(facts)
    if merged:  # physical compaction as far as the history allows: the past stays exact
        for source in db.engine.inputs.values():
            source.presence.spine.compact()
    check_every_epoch(db, recorder, history, plan)


def check_every_epoch(
    db: Database, recorder: Recorder, history: int | None, plan: JoinPlan
) -> None:
    oldest = db.engine.oldest_readable()
    kept = 1 if history is None else db.epoch - max(history, 1) + 1
    assert oldest == max(kept, 1)
    for epoch, answers in recorder.answers.items():
        if epoch < oldest:
            with pytest.raises(HistoryCompactedError) as caught:
                db.query(recorder.queries[0], as_of=epoch)
            assert caught.value.oldest == oldest and f"epoch is {oldest}" in str(caught.value)
            continue
        for text, rows in answers.items():
            assert set(db.query(text, plan, as_of=epoch)) == rows, f"`{text}` as of {epoch}"
            columns = db.query_columns(text, as_of=epoch)
            assert set(zip(*columns.values(), strict=True)) == (rows if columns else set())
        for fact, proof in recorder.proofs[epoch].items():
            assert str(db.why(fact, as_of=epoch)) == proof, f"why {fact} as of {epoch}"


# --- examples ----------------------------------------------------------------------------


def tc(history: int | None = 1000) -> Database:
    db = Database(history=history)
    db.define(TC)
    return db


def test_as_of_answers_a_recursive_query_as_each_epoch_ended() -> None:
    db = tc()
    a = db.insert("edge", [(1, 2), (2, 3)])
    b = db.insert("edge", [(3, 4)])
    c = db.retract("edge", [(2, 3)])
    assert sorted(db.query("reach(1, y)", as_of=a)) == [(2,), (3,)]
    assert sorted(db.query("reach(1, y)", as_of=b)) == [(2,), (3,), (4,)]
    assert sorted(db.query("reach(1, y)", as_of=c)) == [(2,)] == sorted(db.query("reach(1, y)"))
    assert db.query_arrow("reach(1, y)", as_of=b).column("y").to_pylist() == [2, 3, 4]


def test_why_as_of_explains_a_fact_that_held_then() -> None:
    db = tc()
    then = db.insert("edge", [(1, 2), (2, 3)])
    db.retract("edge", [(2, 3)])
    proof = db.why("reach(1, 3)", as_of=then)
    assert proof.height == 2 and "edge(2, 3)  (base fact)" in str(proof)
    with pytest.raises(FactNotFoundError, match="not in `reach` now"):
        db.why("reach(1, 3)")
    with pytest.raises(FactNotFoundError, match=f"at epoch {then - 1}"):
        db.why("reach(1, 3)", as_of=then - 1)


def test_an_epoch_older_than_the_history_names_the_oldest_readable_one() -> None:
    db = tc(history=3)
    for n in range(10):
        db.insert("edge", [(n, n + 1)])
    assert db.engine.oldest_readable() == db.epoch - 2
    assert db.query("reach(0, 9)", as_of=db.epoch - 2) == []
    assert db.query("reach(0, 9)", as_of=db.epoch - 1) == [()]
    with pytest.raises(HistoryCompactedError) as caught:
        db.query("reach(0, y)", as_of=db.epoch - 3)
    error = caught.value
    assert error.oldest == db.epoch - 2 and error.category == "not_found"
    assert f"the oldest readable epoch is {db.epoch - 2}" in error.message
    assert "Database(history=3) keeps the last 3 epochs" in error.message
    assert error.to_dict()["oldest_epoch"] == db.epoch - 2
    with pytest.raises(HistoryCompactedError):
        db.why("reach(0, 1)", as_of=db.epoch - 3)


@pytest.mark.parametrize("history", [0, 1])
def test_history_zero_or_one_keeps_only_the_current_epoch(history: int) -> None:
    db = tc(history=history)
    db.insert("edge", [(1, 2)])
    now = db.insert("edge", [(2, 3)])
    assert db.query("reach(1, y)", as_of=now) == db.query("reach(1, y)")
    with pytest.raises(HistoryCompactedError, match="keeps only the current epoch"):
        db.query("reach(1, y)", as_of=now - 1)


def test_history_none_keeps_every_epoch() -> None:
    db = tc(history=None)
    epochs = [db.insert("edge", [(0, n + 1)]) for n in range(50)]
    db.define(".decl other(x: number)")
    assert db.engine.oldest_readable() == 1
    for n, epoch in enumerate(epochs):
        assert len(db.query("reach(0, y)", as_of=epoch)) == n + 1


@pytest.mark.parametrize(
    ("as_of", "message"),
    [
        (-1, "must be an epoch >= 0"),
        (99, "epoch 99 has not happened yet: the current epoch is"),
        ("3", "must be an epoch number"),
        (2.0, "must be an epoch number"),
        (True, "must be an epoch number"),
        (0, "before the database's first commit"),
    ],
)
def test_a_bad_epoch_is_a_clear_error_and_changes_nothing(as_of: Any, message: str) -> None:
    db = tc()
    db.insert("edge", [(1, 2)])
    symbols, dataflows, epoch = len(db.symbols), len(db.engine.dataflows), db.epoch
    for call in (
        lambda: db.query("reach(1, y)", as_of=as_of),
        lambda: db.why("reach(1, 2)", as_of=as_of),
    ):
        with pytest.raises(EpochError, match=message):
            call()
    assert (len(db.symbols), len(db.engine.dataflows), db.epoch) == (symbols, dataflows, epoch)


@pytest.mark.parametrize("history", [-1, "10", 1.5, True])
def test_a_bad_history_setting_is_refused(history: Any) -> None:
    with pytest.raises(EpochError, match="`history` must be a number of epochs"):
        Database(history=history)


def test_as_of_uses_the_rules_in_force_at_that_epoch() -> None:
    db = Database()
    db.define(".decl edge(x: number, y: number)\n.decl reach(x: number, y: number)\n"
              "reach(x, y) :- edge(x, y).")  # fmt: skip
    before = db.insert("edge", [(1, 2), (2, 3)])
    db.define("reach(x, z) :- reach(x, y), edge(y, z).")
    assert sorted(db.query("reach(1, y)")) == [(2,), (3,)]
    assert db.query("reach(1, y)", as_of=before) == [(2,)]
    assert db.query("reach(1, y)", as_of=db.epoch) == sorted(db.query("reach(1, y)"))
    db.define(".decl late(x: number)")
    with pytest.raises(UnknownNameError, match=r"at epoch \d+ \(it was declared later\)"):
        db.query("late(x)", as_of=before)


def test_as_of_reads_multiset_and_last_write_wins_relations() -> None:
    db = Database()
    db.define(
        ".decl tag(e: number, t: symbol) multiset\n"
        ".decl status(e: number, v: symbol) last_write_wins\n"
        ".decl tagged(e: number)\ntagged(e) :- tag(e, _)."
    )
    a = db.insert("tag", [(1, "x"), (1, "x")])
    db.insert("status", [(1, "new")])
    b = db.insert("status", [(1, "done")])
    c = db.retract("tag", [(1, "x")])
    d = db.retract("tag", [(1, "x")])
    assert db.query("status(1, v)", as_of=b - 1) == [("new",)]
    assert db.query("status(1, v)", as_of=b) == [("done",)]
    assert [db.query("tagged(e)", as_of=e) for e in (a, c, d)] == [[(1,)], [(1,)], []]


def test_as_of_runs_subsumption_and_aggregates_of_the_past() -> None:
    db = Database()
    db.define(
        ".decl edge(x: number, y: number, w: number)\n.decl dist(x: number, d: number)\n"
        ".decl far(n: number)\n"
        "dist(1, 0).\ndist(y, d + w) :- dist(x, d), edge(x, y, w).\n"
        "dist(x, d1) <= dist(x, d2) :- d2 <= d1.\n"
        "far(n) :- n = max d : { dist(_, d) }."
    )
    a = db.insert("edge", [(1, 2, 5), (2, 3, 5)])
    b = db.insert("edge", [(1, 3, 2)])
    db.retract("edge", [(2, 3, 5)])
    assert sorted(db.query("dist(x, d)", as_of=a)) == [(1, 0), (2, 5), (3, 10)]
    assert sorted(db.query("dist(x, d)", as_of=b)) == [(1, 0), (2, 5), (3, 2)]
    assert db.query("far(n)", as_of=a) == [(10,)] and db.query("far(n)", as_of=b) == [(5,)]


def test_as_of_leaves_no_dataflow_symbol_or_live_state_behind() -> None:
    db = tc()
    answers: list[tuple[int, ...]] = []
    db.subscribe("reach(x, y)", lambda change: answers.extend(change.rows))
    then = db.insert("edge", [(1, 2)])
    db.insert("edge", [(2, 3)])
    symbols, dataflows = len(db.symbols), list(db.engine.dataflows)
    assert db.query("reach(x, y)", as_of=then) == [(1, 2)]
    assert db.query("reach(x, y), x != 7", as_of=then) == [(1, 2)]
    assert (len(db.symbols), db.engine.dataflows) == (symbols, dataflows)
    assert len(db.query("reach(x, y)")) == 3  # the live answer, untouched


def test_compaction_drops_history_older_than_kept() -> None:
    """One edge toggled 600 times: the base relation's state trace stays small with a
    short history and holds every change with `history=None`; the arrangements the
    live dataflow reads never hold history."""
    sizes = {}
    for history in (10, None):
        db = tc(history=history)
        db.insert("edge", [(n, n + 1) for n in range(20)])
        db.subscribe("reach(0, y)", lambda change: None)
        for _ in range(300):
            db.retract("edge", [(18, 19)])
            db.insert("edge", [(18, 19)])
        edge = db.engine.inputs["edge"]
        sizes[history] = len(edge.presence)
        # 600 changes, but at most a bounded tail of recent ones waits unmerged (and
        # uncompacted) in a live arrangement: it holds no history
        bound = 100 + TUNING.recent_rows
        assert all(len(a) <= bound for a in edge.arrangements.values()), history
        assert db.query("reach(0, y)", as_of=db.epoch - 8) == db.query("reach(0, y)")
        assert len(db.query("reach(0, y)", as_of=db.epoch - 9)) == 18  # (18, 19) retracted
    assert sizes[10] <= 100 + TUNING.recent_rows and sizes[None] >= 600, sizes


def test_a_reopened_database_reads_back_to_its_snapshot(tmp_path: Path) -> None:
    db = Database(tmp_path, history=None)
    db.define(TC)
    recorded = {db.insert("edge", [(1, n)]): n for n in range(2, 6)}
    db.checkpoint()
    snapshot = db.epoch
    recorded |= {db.retract("edge", [(1, n)]): n for n in range(2, 4)}
    answers = {e: sorted(db.query("reach(1, y)", as_of=e)) for e in recorded}
    db.close()
    again = Database(tmp_path, history=None)
    assert again.engine.oldest_readable() == snapshot
    for epoch, answer in answers.items():
        if epoch >= snapshot:
            assert sorted(again.query("reach(1, y)", as_of=epoch)) == answer
        else:
            with pytest.raises(HistoryCompactedError, match=f"snapshot, taken at epoch {snapshot}"):
                again.query("reach(1, y)", as_of=epoch)
    again.close()


def test_a_reopened_database_without_snapshot_replays_its_whole_history(tmp_path: Path) -> None:
    db = Database(tmp_path)
    db.define(TC)
    epochs = [db.insert("edge", [(1, n)]) for n in range(2, 6)]
    answers = [sorted(db.query("reach(1, y)", as_of=e)) for e in epochs]
    db.close()
    with Database(tmp_path) as again:
        assert [sorted(again.query("reach(1, y)", as_of=e)) for e in epochs] == answers


def test_errors_are_datalog_errors() -> None:
    assert issubclass(HistoryCompactedError, EpochError)
    assert issubclass(EpochError, DatalogError)
