"""A growing distinct counts its input's rows as they arrive (ADR 0072).

In a one-shot dataflow a growing distinct counts the rows of its input in its key
set (ADR 0067); rows of keys it holds, inserted at the time the scope is processing,
are counted as they arrive (`CountedInput.arrive`), and only the rest wait in the
arrangement's queue. That is invisible only while the distinct alone reads the
arrangement: any other reader must still find every row of that time's changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any
from unittest import mock

from differential.engine import Engine
from differential.graph import Dataflow, Output
from differential.operators.arrange import ArrangeOp
from differential.operators.counted import CountedInput
from differential.operators.enter import EnterArranged
from differential.operators.iterate import Subscope, Variable
from differential.operators.join import JoinOp
from differential.operators.linear import concat, enter, leave
from differential.operators.reduce import ReduceOp, distinct
from differential.tuning import TUNING, tuned
from joins.delta_query import DeltaQueryOp, Pattern
from tests.differential.harness import I64, Accumulated, Row, collection, new_engine, requests

# Every round of a dense graph derives most nodes again: known keys arrive each round.
EDGES = [(a, (3 * a + k) % 30) for a in range(30) for k in range(1, 6)]


def _engine() -> Engine:
    eng = new_engine({"edge": 2, "root": 1, "p": 2})
    eng.commit({"edge": requests([(True, e) for e in EDGES], 2)})
    eng.commit({"root": requests([(True, (0,))], 1)})
    eng.commit({"p": requests([(True, row) for row in P], 2)})
    return eng


P = [(x, x % 7) for x in range(0, 30, 2)]


def _reach_and_a_delta_query_of_its_candidates(df: Dataflow) -> list[Output]:
    """Reach along `edge` from the roots' successors, and one more reader of the
    arrangement of the distinct's input (the candidates): `cand(x), p(x, y)`. The
    candidates first arrive in round 1 (the roots come back through a variable), when
    `p` has changed already (round 0): the delta query skipped that round (an empty
    binding) without reading the candidates' trace, and reads none after, so it
    sees every later candidate only among its round's changes."""
    edges = df.import_input("edge", [0, 1], 1)
    root = collection(df, "root", 1).output
    ps = [df.import_input("p", order, k) for order, k in PS]  # (the root's, before the scope)
    inner = Subscope(df.root).inner
    roots = Variable(inner, [I64], "roots")
    roots.set(ReduceOp(ArrangeOp(enter(root, inner), 1), distinct, [], "roots").output)
    var = Variable(inner, [I64], "reach")
    froms = ArrangeOp(concat([roots.output, var.output]), 1)
    candidates = ArrangeOp(JoinOp(froms, EnterArranged(inner, edges), [1]).output, 1)
    reach = ReduceOp(candidates, distinct, [], "distinct")
    var.set(reach.output)
    p = [EnterArranged(inner, arranged) for arranged in ps]
    pairs = DeltaQueryOp(
        inner, [Pattern("cand", ("x",), candidates), Pattern("p", ("x", "y"), *p)], [], "xy"
    )
    return [df.capture(leave(reach.output), "reach"), df.capture(leave(pairs.output), "pairs")]


PS = [([0, 1], 2), ([0, 1], 1), ([1, 0], 1)]  # p by both columns, by x, by y


Spied = list[tuple[int, int]]  # each `arrive`: rows that arrived, rows it left to queue


def _run(build: Callable[[Dataflow], Any], arrivals: bool) -> tuple[Dataflow, Any, Spied]:
    """Run `build`'s dataflow once, one shot, its operators kept (not `Engine.start`:
    it forgets them), its outputs delivered; what each `arrive` took and left."""
    eng, seen = _engine(), []
    original = CountedInput.arrive

    def arrive(self: CountedInput, updates: Any, arrangement: Any) -> Any:
        left = original(self, updates, arrangement)
        seen.append((len(updates), sum(len(part) for part in left)))
        return left

    df = eng.dataflow("once", one_epoch=True)
    outputs = build(df)
    found = [Accumulated(out) for out in outputs]
    with (
        # (the scope's operators kept after it ran, to be read: `retire_rounds` off)
        tuned(TUNING.but(counted_arrivals=arrivals, few=0, deferred_rows=0, retire_rounds=False)),
        mock.patch.object(CountedInput, "arrive", arrive),
    ):
        df.run()
    df.deliver(eng.epoch)
    return df, [f.rows() for f in found], seen


def test_an_arrangement_another_operator_reads_counts_nothing_on_arrival() -> None:
    """The candidates' arrangement feeds the distinct and a delta query: a row counted
    on arrival, or released after the distinct's step, would be missing from the
    delta query's view of its round's changes (each candidate's derivations times
    `p`'s rows lost), so none is; both outputs are those of counting after the
    distinct's step, and of the reference."""
    build = _reach_and_a_delta_query_of_its_candidates
    _, (reach, pairs), seen = _run(build, arrivals=True)
    assert [reach, pairs] == _run(build, arrivals=False)[1]
    assert reach == {(n,): 1 for n in range(30)}
    # The candidates over all rounds: each node once per edge into it from the root
    # and from each reached node; each pair of `p` as often as its candidate.
    candidates = Counter(y for x, y in EDGES if x == 0) + Counter(y for x, y in EDGES)
    assert pairs == {(x, y): candidates[x] for x, y in P}
    assert seen and all(left == arrived for arrived, left in seen)  # nothing counted


def _reach(df: Dataflow) -> list[Output]:
    edges = df.import_input("edge", [0, 1], 1)
    roots = collection(df, "root", 1).output
    inner = Subscope(df.root).inner
    var = Variable(inner, [I64], "reach")
    step = JoinOp(ArrangeOp(var.output, 1), EnterArranged(inner, edges), [1]).output
    reach = ReduceOp(ArrangeOp(concat([enter(roots, inner), step]), 1), distinct, [], "distinct")
    var.set(reach.output)
    return [df.capture(leave(reach.output), "reach")]


def _counted(df: Dataflow) -> Counter[Row]:
    """The rows of the distinct's input and their multiplicities, read through its
    trace (the counts go there at its first read)."""
    (inputs,) = [
        op for op in df.root.all_operators() if isinstance(op, ArrangeOp) and op.counted is not None
    ]
    counts: Counter[Row] = Counter()
    for batch in inputs.settle().batches:
        for row in batch.updates().rows():
            counts[tuple(row[:-2])] += row[-1]  # type: ignore[arg-type, operator]
    return +counts


def test_rows_of_known_keys_are_counted_as_they_arrive() -> None:
    """Where the distinct alone reads its input, rows of keys it holds are counted as
    they arrive and never queued; the answer and every count are those of counting
    them after the distinct's step."""
    df, (reach,), seen = _run(_reach, arrivals=True)
    df_off, (reach_off,), seen_off = _run(_reach, arrivals=False)
    assert reach == reach_off == {(n,): 1 for n in range(30)}
    counts = _counted(df)
    assert counts == _counted(df_off) and sum(counts.values()) > 2 * len(reach)
    assert sum(left for _, left in seen) < sum(arrived for arrived, _ in seen)  # counted
    assert all(left == arrived for arrived, left in seen_off)
