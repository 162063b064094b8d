"""A live query's first evaluation leaves nothing for its first commit to catch up on
(ADR 0057).

Single-edge WCC commits measured their p99 on the first commit after subscribing:
it arranged every update the first evaluation had deferred (the inputs of
distincts, the recursive relation's side of its joins) and, through the first
`np.unique` of the process, imported `numpy.ma` (about 30 ms). A live dataflow now
settles what it deferred when it starts, and the reduce's per-commit paths sort
their distinct values themselves.
"""

from __future__ import annotations

import subprocess
import sys

from datalog import Database
from differential.operators.arrange import ArrangeOp
from differential.operators.reduce import ReduceOp
from differential.tuning import TUNING, tuned

WCC = """
    .decl edge(x: number, y: number)
    .decl label(x: number, l: number) btree_delete
    label(x, x) :- edge(x, _) ; edge(_, x).
    label(y, l) :- label(x, l), edge(x, y).
    label(y, l) :- label(x, l), edge(y, x).
    label(x, l1) <= label(x, l2) :- l2 <= l1."""


def unsettled(db: Database) -> list[str]:
    """The operators of live dataflows holding updates nobody arranged yet."""
    found = []
    for dataflow in db.engine.dataflows:
        for op in dataflow.root.all_operators():
            if isinstance(op, ArrangeOp) and (op.deferred or op.pending_updates is not None):
                found.append(op.describe())
            growing = op.growing_distinct if isinstance(op, ReduceOp) else None
            if growing is not None and growing.unbuilt_size():
                found.append(op.describe())
    return found


def test_a_subscription_starts_with_every_arrangement_settled() -> None:
    db = Database()
    db.define(WCC)
    db.insert("edge", [(i, i + 1) for i in range(40)] + [(50, 51)])
    seen: list[int] = []
    db.subscribe("label(x, l)", lambda change: seen.append(len(change.rows)))
    assert seen and unsettled(db) == []
    db.retract("edge", [(20, 21)])
    assert sorted(db.query("label(x, l)"))[21] == (21, 21)


def test_single_edge_commits_of_a_live_wcc_do_not_import_numpy_ma() -> None:
    """In a fresh interpreter: nothing of the subscription or its commits calls the
    `np.unique` whose first call imports `numpy.ma`."""
    script = "\n".join(
        [
            "import sys",
            "from datalog import Database",
            "db = Database()",
            f"db.define({WCC!r})",
            "db.insert('edge', [(i, i + 1) for i in range(50)])",
            "db.subscribe('label(x, l)', lambda change: None)",
            "db.retract('edge', [(20, 21)])",
            "db.insert('edge', [(20, 21)])",
            "print('numpy.ma' in sys.modules)",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"


def output_traces(held: bool) -> list[tuple[int, int, int]]:
    """(entries, batches, merges in progress) of each reduce's output trace after
    subscribing to WCC on a chain, its least read from the tactic's table or not."""
    with tuned(TUNING.but(least_held=held, merge_fuel=64, few=0)):
        db = Database()
        db.define(WCC)
        db.insert("edge", [(i, i + 1) for i in range(300, 0, -1)])
        db.subscribe("label(x, l)", lambda change: None)
        return [
            (len(op.trace), op.trace.held_batches, op.trace.merges_in_progress)
            for dataflow in db.engine.dataflows
            for op in dataflow.root.all_operators()
            if isinstance(op, ReduceOp)
        ]


def test_a_least_read_from_the_table_leaves_the_output_trace_merged_as_reads_would() -> None:
    """The growing step that reads its table, not the trace, still has the trace
    merged each round (ADR 0063): else the first commit after subscribing merged
    what every round of the first evaluation had appended (14 ms on WCC at 1M)."""
    assert output_traces(True) == output_traces(False)
