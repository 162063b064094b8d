"""What a one-shot read holds, and when it lets go (ADR 0062).

A one-shot read's arrangements compact its rounds as they go: within a dataflow that
runs for one epoch, the times of an iteration scope are totally ordered, so an
arrangement advances the history it settles to the latest round and consolidates it
(`Tuning.compact_rounds`). The answers must be those of the arrangements that keep
every round apart (the reference tactic, off) and of the reference evaluator, for
generated programs (recursion, negation, aggregates) and for recursive aggregation
(subsumption retracts inside the scope, so a `distinct` stops growing and reads its
compacted input); and the arrangement of a closure's candidates must hold about one
entry per tuple, not one per derivation and round. The dataflow's operators are
freed before its answer is consolidated; a delta query's output holds one time and
one diff per part; fact files are parsed outside pyarrow's default pool."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from datalog import Database
from datalog.eval import reference
from datalog.io.sources.csv import input_files, read_facts
from datalog.lang.checks import check_program, check_query
from datalog.lang.parser import parse_program, parse_query
from differential.batch import Updates
from differential.dataflow import Scope, Stream
from differential.engine import Engine
from differential.graph import Dataflow
from differential.operators.arrange import ArrangeOp
from differential.operators.capture import Capture
from differential.operators.counted import CountedInput
from differential.tuning import TUNING, tuned
from joins.delta_query import DeltaQueryOp
from tests.budget import examples
from tests.datalog.programs import (
    Generated,
    fed,
    full_query,
    programs,
    reference_answers,
    streams,
)
from tests.datalog.test_least_growing import BASE, PROGRAMS

# Every deferred update settles at once (no rows wait), numpy kernels at every size: the
# compacting path runs on the few rows a generated program derives.
EAGER = {"deferred_rows": 0, "few": 0, "few_pairs": 0, "recent_rows": 0}


def one_shot_answers(
    db: Database, queries: list[str], compact: bool, counted: bool = True, **tuning: Any
) -> list[set[Any]]:
    with tuned(TUNING.but(compact_rounds=compact, counted_inputs=counted, **EAGER, **tuning)):
        return [set(db.query(q)) for q in queries]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_compacted_rounds_answer_as_rounds_kept_apart_and_the_reference(
    data: st.DataObject,
) -> None:
    generated: Generated = data.draw(programs())
    stream = data.draw(streams())
    note(generated.text)
    db, facts = fed(generated, stream)  # retractions leave history in the base relations
    queries = [full_query(r, generated.relations[r]) for r in generated.derived]
    compacted = one_shot_answers(db, queries, True)
    assert compacted == one_shot_answers(db, queries, False)
    assert compacted == one_shot_answers(db, queries, True, counted=False)  # (ADR 0067)
    # (ADR 0072: rows counted after the distinct's step, or every part as it arrives)
    assert compacted == one_shot_answers(db, queries, True, counted_arrivals=False)
    assert compacted == one_shot_answers(db, queries, True, arrival_share=0.0)
    expected = reference_answers(generated, facts, queries)
    for query, found, wanted in zip(queries, compacted, expected, strict=True):
        assert found == wanted, query


EDGES = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(1, 4)), max_size=30)


@settings(max_examples=examples(40), deadline=None)
@given(st.sampled_from(sorted(PROGRAMS)), EDGES)
def test_recursive_aggregation_compacted_answers_as_kept_apart(query: str, edges: list) -> None:
    """Subsumption retracts dominated tuples within the scope: the distinct reading
    them stops growing and reads its input history, compacted or kept apart."""
    db = Database()
    db.define(BASE + PROGRAMS[query])
    db.insert("source", [(0,)])
    db.insert("edge", edges)
    compacted = one_shot_answers(db, [query], True)
    assert compacted == one_shot_answers(db, [query], False)
    assert compacted == one_shot_answers(db, [query], True, counted=False)  # (ADR 0067)
    assert compacted == one_shot_answers(db, [query], True, counted_arrivals=False)  # (0072)
    assert compacted == one_shot_answers(db, [query], True, arrival_share=0.0)
    checked = check_program(parse_program(BASE + PROGRAMS[query]))
    facts = {"edge": sorted(set(edges)), "source": [(0,)]}
    expected = reference.answer(
        check_query(parse_query(query), checked.schema), reference.evaluate(checked, facts)
    )
    assert compacted[0] == expected


@contextmanager
def held_after_run() -> Iterator[list[list[tuple[int, str, int, int]]]]:
    """Every dataflow's arrangements (`Dataflow.traces`) just after it ran (its nested
    scopes not forgotten as they finish, `Tuning.retire_rounds`: what they held is what
    is measured)."""
    found: list[list[tuple[int, str, int, int]]] = []
    original = Dataflow.run

    def run(dataflow: Dataflow) -> None:
        original(dataflow)
        found.append(dataflow.traces())

    with mock.patch.object(Dataflow, "run", run), tuned(TUNING.but(retire_rounds=False)):
        yield found


CLOSURE = """
.decl e(x: number, y: number)
.decl tc(x: number, y: number)
tc(x, y) :- e(x, y).
tc(x, z) :- tc(x, y), e(y, z).
"""


def test_a_one_shot_closure_holds_about_one_entry_per_tuple() -> None:
    """In a dense graph (40 nodes, 8 edges out of each) every pair of the closure is
    derived up to 8 times a round over several rounds: the distinct's input kept
    every derivation; compacted, it holds at most the trace (twice what its last
    compaction left) and one round waiting (at most the trace's size): a small
    multiple of the pairs."""
    db = Database()
    db.define(CLOSURE)
    db.insert("e", [(i, (3 * i + k) % 40) for i in range(40) for k in range(1, 9)])
    held = {}
    for compact in (True, False):
        tuning = TUNING.but(compact_rounds=compact, deferred_rows=0)  # nothing waits
        with tuned(tuning), held_after_run() as found:
            assert len(db.query("tc(x, y)")) == 40 * 40
        held[compact] = max(n for _, _, n, _ in found[0])
    assert held[False] > 6 * 40 * 40, held  # what the test measures is there to cut
    assert held[True] <= 4 * 40 * 40 + TUNING.few, held


def test_a_growing_distincts_input_is_counted_in_its_key_set_not_arranged() -> None:
    """ADR 0067: while the closure's distinct grows, its input's rows are counted in its
    key set (`Tuning.counted_inputs`) and its arrangement keeps none of them; the
    reference settles them into its trace (at least one entry per pair)."""
    db = Database()
    db.define(CLOSURE)
    db.insert("e", [(i, (3 * i + k) % 40) for i in range(40) for k in range(1, 9)])
    held = {}
    for counted in (True, False):
        tuning = TUNING.but(counted_inputs=counted, deferred_rows=0)  # nothing waits
        with tuned(tuning), held_after_run() as found:
            assert len(db.query("tc(x, y)")) == 40 * 40
        inputs = [n for _, name, n, _ in found[0] if name == "arrange(key=2 of 2)"]
        assert len(inputs) == 1, found[0]
        held[counted] = inputs[0]
    # Both hold the last round's candidates (queued when the scope went quiet); the
    # reference holds every pair besides, settled into the trace.
    assert held[False] - held[True] >= 40 * 40, held


BODY3 = """
.decl a(x: number)
.decl b(x: number)
.decl c(y: number)
.decl d(y: number)
a(x) :- b(x), c(y), d(y).
b(x + 1) :- a(x), x < 3000.
b(0). c(1). c(2). d(2). d(3).
"""


def test_rows_fused_rounds_defer_before_their_keys_are_admitted_are_counted_later() -> None:
    """Fused rounds defer a run's input rows before the distinct admits the run's new
    keys: those rows wait in the arrangement and are counted at a later settle (ADR
    0067), the answers those of the reference tactic."""
    waited = []
    original = CountedInput.take

    def take(self: CountedInput, deferred: Any, latest: Any) -> Any:
        left = original(self, deferred, latest)
        waited.append(sum(len(part) for part, _ in left))
        return left

    def inputs_after(
        dataflow: Dataflow,
    ) -> None:  # what each distinct's input holds (kept: retire_rounds off)
        run(dataflow)
        for op in dataflow.root.all_operators():
            if isinstance(op, ArrangeOp) and op.key_arity == len(op.dtypes):
                counts: dict[tuple[object, ...], int] = {}
                for batch in op.settle().batches:  # (counted keys go into the trace)
                    part = batch.updates()
                    rows = zip(*(c.tolist() for c in part.columns), strict=True)
                    for row, diff in zip(rows, part.diffs.tolist(), strict=True):
                        counts[row] = counts.get(row, 0) + diff
                held.append({row: n for row, n in counts.items() if n})

    run = Dataflow.run
    answers, inputs = [], []
    for counted in (True, False):
        db, held = Database(), []
        db.define(BODY3)
        with (
            tuned(
                TUNING.but(
                    counted_inputs=counted, deferred_rows=0, handover=64, retire_rounds=False
                )
            ),
            mock.patch.object(CountedInput, "take", take),
            mock.patch.object(Dataflow, "run", inputs_after),
        ):
            answers.append(set(db.query("a(x)")))
        inputs.append(held)
    assert answers[0] == answers[1] == {(x,) for x in range(3001)}
    assert any(waited), waited  # the path under test was taken
    assert inputs[0] == inputs[1] and any(inputs[0]), inputs  # every row counted once


def test_only_a_one_shot_dataflow_and_its_first_scopes_are_totally_ordered() -> None:
    live, once = Engine().dataflow("live"), Engine().dataflow("once", one_epoch=True)
    assert not live.root.totally_ordered and once.root.totally_ordered
    inner = Scope(2, once.root)
    assert inner.totally_ordered and not Scope(2, live.root).totally_ordered
    assert not Scope(3, inner).totally_ordered  # (e, i, j): rounds of rounds are not


def test_a_one_shot_dataflow_frees_its_arrangements_before_consolidating_its_answer() -> None:
    """The answer of a one-shot read is consolidated after the run, when nothing reads
    the dataflow's arrangements again: they are gone by then, freed by reference
    counting (the cycle collector is off here), not kept until the dataflow retires."""
    db = Database()
    db.define(CLOSURE)
    db.insert("e", [(i, (3 * i + k) % 40) for i in range(40) for k in range(1, 9)])
    spines: list[weakref.ref[Any]] = []
    alive: list[int] = []
    run, drain = Dataflow.run, Capture.drain

    def watched_run(dataflow: Dataflow) -> None:
        run(dataflow)
        ops = dataflow.root.all_operators()
        spines.extend(weakref.ref(op.spine) for op in ops if isinstance(op, ArrangeOp))

    def watched_drain(capture: Capture) -> Any:
        alive.append(sum(ref() is not None for ref in spines))
        return drain(capture)

    gc.disable()
    try:
        with (
            mock.patch.object(Dataflow, "run", watched_run),
            mock.patch.object(Capture, "drain", watched_drain),
        ):
            for compact in (False, True):
                spines.clear()
                # (nested scopes not forgotten as they finish: `retire_rounds` would
                # free their arrangements before the run ends, ADR 0077)
                with tuned(TUNING.but(compact_rounds=compact, retire_rounds=False)):
                    assert len(db.query("tc(x, y)")) == 40 * 40
    finally:
        gc.enable()
    assert spines and alive[0] == len(spines)  # kept apart: alive until retired
    assert alive[1] == 0


def test_a_delta_querys_output_holds_one_time_and_one_diff_per_part() -> None:
    """A round's derivations all land at the round's time with diff one: what a delta
    query sends (and the next round's queue holds) keeps each as one repeated value,
    not a column per row, and answers as before."""
    db = Database()
    db.define(
        ".decl e(x: number, y: number)\n.decl tri(x: number, y: number, z: number)\n"
        "tri(x, y, z) :- e(x, y), e(y, z), e(x, z).\n"
    )
    n = 40
    db.insert("e", [(i, j) for i in range(n) for j in range(i + 1, n)])
    sent: list[Any] = []
    send = Stream.send

    def watched(stream: Stream, updates: Any) -> None:
        if isinstance(stream.producer, DeltaQueryOp):
            sent.append(updates)
        send(stream, updates)

    with mock.patch.object(Stream, "send", watched):
        assert len(db.query("tri(x, y, z)")) == n * (n - 1) * (n - 2) // 6
    big = [part for part in sent if len(part) >= TUNING.sorted_from]
    assert big and all(p.times.strides[1] == 0 and p.diffs.strides[0] == 0 for p in big)


def test_fact_files_are_parsed_into_the_c_librarys_malloc(tmp_path: Path) -> None:
    """pyarrow's default pool (mimalloc) keeps the pages of a parsed file after its
    columns are inserted and freed, which counted in every run's peak: the parsed
    table lives in the system pool instead."""
    (tmp_path / "e.facts").write_text("".join(f"{i}\t{i + 1}\n" for i in range(50_000)))
    db = Database()
    db.define(".decl e(x: number, y: number)\n.input e\n")
    default = pa.default_memory_pool().bytes_allocated()
    system = pa.system_memory_pool().bytes_allocated()
    table = read_facts(input_files(db, tmp_path)[0])
    assert table.num_rows == 50_000
    assert pa.default_memory_pool().bytes_allocated() == default
    assert pa.system_memory_pool().bytes_allocated() - system >= 50_000 * 16


def test_settling_only_empty_rounds_compacts_nothing_and_fails_nothing() -> None:
    """Rounds that deferred no rows (a generated program's relation that stays empty)
    settle to an empty trace: the share of rows kept is not asked of zero rows."""
    root = Engine().dataflow("once", one_epoch=True).root
    scope = Scope(2, root)
    op = ArrangeOp(Stream(scope, [np.dtype(np.int64)] * 2), 1)
    empty = Updates.empty(2, 2)
    for i in range(3):
        op.defer(empty, (0, i), (0, i))
        assert len(op.settle()) == 0
    assert op.compacting
