"""Live queries keep bounded state (issue 23, ADR 0040).

One edge of a chain is retracted and inserted again, one commit each, many times:
the answer comes back after every second commit, so what the database stores
(`stats()`: every input's state trace and arrangements, every dataflow's and
view's arrangements) must not grow with the number of commits, whether the query
has a constant or not (multi-tenant dataflows, magic sets with tenancy off),
recursive or not, with aggregates and negation, or read through a view. Each
trace may hold up to twice its compacted contents plus `TUNING.few`; the bound
checked is twice what the database stores right after subscribing, plus `FEW` per
trace, which a linear growth passes within a few dozen commits. Answers are
checked against the reference evaluator after every commit.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import pytest

from datalog import Change, Database
from datalog.eval import reference
from datalog.lang.checks import check_query
from datalog.lang.parser import parse_query
from differential.trace.spine import Spine
from differential.tuning import TUNING

PROGRAM = """
.decl edge(x: number, y: number)
.decl tc(x: number, y: number)
.decl hop2(x: number, z: number)
.decl node(x: number)
.decl reachn(x: number, n: number)
.decl unreached(x: number, y: number)
tc(x, y) :- edge(x, y).
tc(x, y) :- tc(x, z), edge(z, y).
hop2(x, z) :- edge(x, y), edge(y, z).
node(x) :- edge(x, _).
node(y) :- edge(_, y).
reachn(x, n) :- node(x), n = count : { tc(x, _) }.
unreached(x, y) :- node(x), node(y), !tc(x, y).
"""
CHAIN = [(i, i + 1) for i in range(10)]
TOGGLED = (5, 6)
TOGGLES = 200
Row = tuple[object, ...]


@dataclass(frozen=True)
class Case:
    queries: tuple[str, ...]
    tenants: bool = True  # False: queries with constants get dataflows of their own
    shown: str = ""  # what `explain` of the first query says of its live plan


TENANT = "multi-tenant dataflow"
MAGIC = "(magic sets)"
AGGNEG = "reachn(3, n), unreached(3, y)"
CASES = {
    "plain recursive": Case(("tc(x, y)",)),
    "tenant recursive": Case(("tc(3, y)",), shown=TENANT),
    "magic recursive": Case(("tc(3, y)",), tenants=False, shown=MAGIC),
    "plain non-recursive": Case(("hop2(x, z)",)),
    "tenant non-recursive": Case(("hop2(4, z)",), shown=TENANT),
    "magic non-recursive": Case(("hop2(4, z)",), tenants=False, shown=MAGIC),
    "tenant aggregate and negation": Case((AGGNEG,), shown=TENANT),
    "untenanted aggregate and negation": Case((AGGNEG,), tenants=False),
    "view": Case(("tc(x, y)", "tc(x, y), x < y"), shown="[view]"),
}


class Accumulated:
    """A subscriber's answer: its snapshot plus every change since."""

    def __init__(self) -> None:
        self.counts: Counter[Row] = Counter()

    def __call__(self, change: Change) -> None:
        for row, diff in zip(change.rows, change.diffs, strict=True):
            self.counts[row] += diff

    def rows(self) -> set[Row]:
        assert all(n in (0, 1) for n in self.counts.values()), self.counts
        return {row for row, n in self.counts.items() if n}


def traces(db: Database) -> dict[str, int]:
    """Updates held by every trace `stats()` counts, by a name of the trace."""
    stats = db.stats()
    held: dict[str, int] = {}
    for name, inp in stats["inputs"].items():  # type: ignore[attr-defined]
        held[f"{name}/state"] = inp["updates"]
        for arrangement, found in inp["arrangements"].items():
            held[arrangement] = found["tuples"]
    flows = [*db.engine.dataflows, *(view.dataflow for view in db.engine.views)]
    for df in flows:
        for i, _, updates, _ in df.traces():
            held[f"{df.name}#{i}"] = updates
    return held


def expected(db: Database, text: str, edges: set[tuple[int, int]]) -> set[Row]:
    relations = reference.evaluate(db.checked, {"edge": edges})
    return reference.answer(check_query(parse_query(text), db.checked.schema), relations)


def database(case: Case, monkeypatch: pytest.MonkeyPatch, history: int | None) -> Database:
    db = Database(history=history)
    db.define(PROGRAM)
    if not case.tenants:  # every query with a constant builds a dataflow of its own
        monkeypatch.setattr(db.queries.tenants, "enabled", False)
    db.insert("edge", CHAIN)
    return db


def toggle(db: Database, n: int) -> set[tuple[int, int]]:
    """Retract the toggled edge at even `n`, insert it at odd `n`; the edges now."""
    (db.retract if n % 2 == 0 else db.insert)("edge", [TOGGLED])
    return set(CHAIN) - ({TOGGLED} if n % 2 == 0 else set())


@pytest.mark.parametrize("name", list(CASES))
def test_toggling_an_edge_keeps_stored_updates_flat(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    db = database(case, monkeypatch, history=1)
    subscribers = [Accumulated() for _ in case.queries]
    subs = [db.subscribe(q, s) for q, s in zip(case.queries, subscribers, strict=True)]
    explained = db.explain(case.queries[0])
    assert case.shown in explained and (case.tenants or TENANT not in explained)
    start = sum(traces(db).values())
    seen: set[str] = set()
    answers: dict[bool, list[set[Row]]] = {}
    for n in range(TOGGLES):
        edges = toggle(db, n)
        held = traces(db)
        seen |= {trace for trace, updates in held.items() if updates}
        bound = 2 * start + TUNING.few * len(seen)
        assert sum(held.values()) <= bound, f"toggle {n}: {held}"
        if n < 2:  # the answers of the two states the database alternates between
            answers[n % 2 == 0] = [expected(db, q, edges) for q in case.queries]
        want = answers[n % 2 == 0]
        assert [s.rows() for s in subscribers] == want, f"toggle {n}"
    assert [set(sub.rows()) for sub in subs] == want
    assert [set(db.query(q)) for q in case.queries] == want


def test_history_is_kept_for_base_relations_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every epoch kept for `as_of`, the base relation's state trace holds every
    change (and `as_of` reads them all back), while the view's and the parameter
    relation's state traces, which nothing reads in the past, stay bounded, though
    parameters come and go with the subscriptions."""
    db = database(CASES["view"], monkeypatch, history=None)
    for query in ("tc(x, y)", "tc(x, y), x < y", "tc(3, y)"):
        db.subscribe(query, lambda change: None)
    [view] = db.engine.views
    [tenant] = db.queries.tenants.by_key.values()
    parameters = db.engine.inputs[tenant.relation]
    closure = len(expected(db, "tc(x, y)", set(CHAIN)))
    first = db.epoch
    edges_at = {first: set(CHAIN)}
    for n in range(TOGGLES // 2):
        sub = db.subscribe("tc(4, y)", lambda change: None)  # no epoch (ADR 0041)
        edges = toggle(db, 2 * n)  # the parameter 4 joins
        edges_at[db.epoch] = edges
        sub.close()
        edges = toggle(db, 2 * n + 1)  # and is retracted
        edges_at[db.epoch] = edges
        assert len(view.input.presence) <= 2 * closure + TUNING.few, f"toggle {n}"
        assert len(parameters.presence) <= 2 * 2 + TUNING.few, f"toggle {n}"
    assert len(db.engine.inputs["edge"].presence) >= TOGGLES // 2
    for epoch in random.Random(7).sample(sorted(edges_at), 20):
        want = expected(db, "tc(3, y)", edges_at[epoch])
        assert set(db.query("tc(3, y)", as_of=epoch)) == want, f"as of {epoch}"


def test_compaction_under_random_changes_keeps_every_answer_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Random edges toggled on a small graph with cycles, under every kind of live
    query at once: after every commit each subscriber holds the reference answer,
    while traces compact many times over (counted: the test means nothing otherwise)."""
    compactions = Counter[str]()
    compact = Spine.compact

    def counted(spine: Spine) -> None:
        compactions["all"] += 1
        compact(spine)

    monkeypatch.setattr(Spine, "compact", counted)
    rng = random.Random(23)
    db = Database(history=1)
    db.define(PROGRAM)
    edges = {(rng.randrange(6), rng.randrange(6)) for _ in range(10)}
    db.insert("edge", sorted(edges))
    queries = [q for case in CASES.values() for q in case.queries]
    subscribers = {q: Accumulated() for q in dict.fromkeys(queries)}
    for query, subscriber in subscribers.items():
        db.subscribe(query, subscriber)
    for commit in range(150):
        changed = {(rng.randrange(6), rng.randrange(6)) for _ in range(rng.randrange(1, 3))}
        inserts = sorted(changed - edges)
        retracts = sorted(changed & edges)
        with db.transaction() as tx:
            tx.insert("edge", inserts)
            tx.retract("edge", retracts)
        edges = (edges | set(inserts)) - set(retracts)
        relations = reference.evaluate(db.checked, {"edge": edges})
        for query, subscriber in subscribers.items():
            want = reference.answer(check_query(parse_query(query), db.checked.schema), relations)
            assert subscriber.rows() == want, f"commit {commit}: {query}"
    assert compactions["all"] > 100, compactions
