"""The stateful model test of the whole database (ADR 0037; issue 23, item 2).

A hypothesis `RuleBasedStateMachine` drives random interleavings of every operation
of the public API on an in-memory or a durable database: define (a pool of
programs with recursion, negation, aggregates, a functor, facts; and programs
drawn by `tests.datalog.programs`), redefine, transactions of several inserts and
retractions with rows as tuples, numpy arrays, Arrow tables and pandas frames
(some failing half-way), subscribe and unsubscribe (with and without constants,
paced or not), one-shot queries, `as_of`, `why`, `explain`, checkpoint, close and
reopen, budgets, and injected KeyboardInterrupt / MemoryError (from subscriber
callbacks, from the Python functor, from engine steps). The model
(`tests.datalog.model.state`) holds the program, the base facts, the epoch and
the readable past; answers come from the reference evaluator. After every step
the invariants of ADR 0037 are checked.

The rules (what a step does) are here; how a step runs under a fault and is judged
is `tests.datalog.model.steps`. Every defect it found is fixed and kept, minimized,
as a regression test in `tests/datalog/test_model_findings.py`: the model steps
around nothing.

Profiles: the `ci` / `dev` hypothesis profile (`tests/conftest.py`) runs 25 examples
of up to 40 steps; `DELTALOG_SOAK=1` 400 of up to 80 (`DELTALOG_SOAK_EXAMPLES`,
`DELTALOG_SOAK_STEPS` tune it; `make soak` runs 300, randomized, under `dev`).
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from contextlib import ExitStack, nullcontext
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from datalog import (
    Database,
    DatalogError,
    FactNotFoundError,
    HistoryCompactedError,
)
from datalog.eval import reference
from differential.tuning import TUNING, tuned
from tests.datalog.model import pool
from tests.datalog.model.faults import Faults
from tests.datalog.model.measures import eager_compaction, live_counts, stored_parts
from tests.datalog.model.outcomes import fault_strategy, is_injected
from tests.datalog.model.rows import FORMS, encode
from tests.datalog.model.state import ModelState, Row, Snapshot, checked
from tests.datalog.model.steps import (
    Steps,
    as_rows,
    raises,
    sorted_rows,
    valid_query,
)
from tests.datalog.model.subscribers import Received, Watch, WhyWatched
from tests.datalog.programs import literal_text, rows
from tests.datalog.test_provenance import check_proof, levels

SOAK = os.environ.get("DELTALOG_SOAK", "").strip() not in ("", "0")
EXAMPLES = int(os.environ.get("DELTALOG_SOAK_EXAMPLES", "400")) if SOAK else 25
STEPS = int(os.environ.get("DELTALOG_SOAK_STEPS", "80")) if SOAK else 40
MAX_WATCHES = 8
PLANS = st.sampled_from(("auto", "auto", "auto", "wcoj", "binary"))


class DatabaseModel(Steps, RuleBasedStateMachine):
    """The database against its model, step by step (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.faults = Faults()
        self.stack = ExitStack()
        self.db: Database | None = None
        self.path: Path | None = None
        self.model = ModelState()
        self.watches: list[Watch] = []
        self.why_watches: list[WhyWatched] = []
        self.checkpointed = 1  # the epoch of the last explicit checkpoint

    # -- set-up -------------------------------------------------------------------------

    @initialize(
        durable=st.booleans(),
        every=st.sampled_from((1000, 1000, 3)),
        history=st.sampled_from((1, 2, 5, None)),
        vectorize=st.booleans(),
        first=st.sets(st.sampled_from(range(len(pool.FRAGMENTS))), max_size=6),
        data=st.data(),
    )
    def start(
        self,
        durable: bool,
        every: int,
        history: int | None,
        vectorize: bool,
        first: set[int],
        data: st.DataObject,
    ) -> None:
        """A new database; most runs define a few of the pool's programs and subscribe
        a few queries first (fault-free), so that later steps meet live dataflows."""
        if durable:
            tmp = self.stack.enter_context(tempfile.TemporaryDirectory(prefix="deltalog-model-"))
            self.path = Path(tmp) / "db"
        self.history, self.every = history, every  # every: checkpoint_every
        self.functors = pool.functors(vectorize, self.faults.hook("functor"))
        self.db = self.open()
        self.baseline = set(self.db.stats()["inputs"])  # type: ignore[arg-type]
        self.db.define("\n".join(pool.BASE_DECLS))  # declarations only: no epoch
        self.model = ModelState(history=history)
        for fragment in (pool.FRAGMENTS[i] for i in sorted(first)):  # needs come first
            outcome = self.model.defined(fragment)
            if outcome is not None:
                self.write(lambda f=fragment: self.database.define(f.text), *outcome, None)
        for _ in range(data.draw(st.integers(0, 4), label="first subscriptions")):
            self.subscribe_one(data, faults=False)

    def open(self) -> Database:
        return Database(
            self.path,
            sync=False,
            checkpoint_every=self.every,
            functors=self.functors,
            history=self.history,
        )

    def teardown(self) -> None:
        if self.db is not None:
            self.db.close()
        self.stack.close()

    # -- writes ---------------------------------------------------------------------------

    @rule(data=st.data())
    def define(self, data: st.DataObject) -> None:
        fragment = data.draw(self.fragments(), label="program")
        outcome = self.model.defined(fragment)
        fault = data.draw(
            fault_strategy("budget", "callback", "functor", "engine"),
            label="fault",
        )
        note(f"define {fragment.name!r} under {fault}:\n{fragment.text}")
        if outcome is None:
            self.rejected(lambda: self.database.define(fragment.text))
            return
        after, advances = outcome
        self.write(lambda: self.database.define(fragment.text), after, advances, fault, define=True)

    @rule(data=st.data())
    def redefine(self, data: st.DataObject) -> None:
        change = data.draw(st.sampled_from(pool.REDEFINITIONS), label="redefinition")
        ops = data.draw(self.ops(max_ops=2), label="with rows") if data.draw(st.booleans()) else []
        fault = data.draw(
            fault_strategy("budget", "callback", "functor", "engine"),
            label="fault",
        )
        note(f"redefine {change.relation}: {change.text!r} with {ops} under {fault}")
        after = self.model.redefined(change, ops)

        def action() -> None:
            if not ops:
                self.database.redefine(change.relation, change.text)
                return
            with self.database.transaction() as tx:
                tx.redefine(change.relation, change.text)
                self.apply_ops(tx, ops, data)

        if after is None:
            self.rejected(action)
            return
        self.write(action, after, True, fault)

    @rule(data=st.data())
    def transact(self, data: st.DataObject) -> None:
        ops = data.draw(self.ops(max_ops=4), label="ops")
        fault = data.draw(fault_strategy("budget", "callback", "functor", "engine"), label="fault")
        single = len(ops) == 1 and data.draw(st.booleans(), label="db.insert/db.retract")
        explicit = data.draw(st.booleans(), label="tx.commit()")
        # Adaptive commits (docs/adr/0053): every live dataflow it reaches recomputed.
        recomputed = data.draw(st.booleans(), label="recomputed")
        note(f"transaction {ops} under {fault}{' (tx.commit())' if explicit else ''}"
             f"{' (recomputed)' if recomputed else ''}")  # fmt: skip

        def action() -> None:
            with tuned(TUNING.but(**RECOMPUTED)) if recomputed else nullcontext():
                commit()

        def commit() -> None:
            if single:
                inserting, relation, rows_ = ops[0]
                form = data.draw(st.sampled_from(FORMS), label="form")
                encoded = encode(form, self.model.relations[relation], rows_)
                (self.database.insert if inserting else self.database.retract)(relation, encoded)
                return
            with self.database.transaction() as tx:
                self.apply_ops(tx, ops, data)
                if explicit:  # documented as also done on leaving the block: once
                    tx.commit()

        self.write(action, self.model.written(ops), bool(ops), fault)

    @rule(data=st.data())
    def failing_transaction(self, data: st.DataObject) -> None:
        """Valid changes, then one that is refused (or the block raises): nothing stays."""
        ops = data.draw(self.ops(max_ops=3), label="ops before the failure")
        how = data.draw(st.sampled_from(("type", "arity", "unknown", "raise")), label="failure")
        note(f"transaction {ops} then a failure: {how}")

        def action() -> None:
            with self.database.transaction() as tx:
                self.apply_ops(tx, ops, data)
                if how == "type":
                    tx.insert("e", [(1, "one")])
                elif how == "arity":
                    tx.insert("e", [(1, 2, 3)])
                elif how == "unknown":
                    tx.insert("edge", [(1, 2)])
                else:
                    raise _UserError("the block raised")

        self.rejected(action, (_UserError,) if how == "raise" else ())

    @rule(data=st.data())
    def toggle(self, data: st.DataObject) -> None:
        """Stored updates stay bounded: a fact toggled many times, ending where it
        began, peaks no higher over its last n toggles of 4n than over toggles n..2n
        (with the spine merging eagerly, so that the steady size comes within a few
        commits; with `history=None` the base relations keep every epoch, by design).
        Peaks, not single samples: between merges the stored size is a sawtooth (it
        grows a few updates a toggle and drops when a merge compacts them, every few
        dozen toggles), and two samples at its low and high phases once read as growth
        (a soak found 68 -> 166 on a size that stayed within 52..170 for 200 toggles)."""
        relation = data.draw(st.sampled_from(sorted(pool.BASE)), label="relation")
        row = data.draw(rows(pool.BASE[relation]), label="row")
        window = 2 * (self.history or 2) + 8
        with eager_compaction():
            self.toggled(relation, row, window)
            first = self.toggled(relation, row, window, sampled=window)
            self.toggled(relation, row, window)
            last = self.toggled(relation, row, window, sampled=window)
        note(f"toggled {relation}{row}: {dict(first)} then {dict(last)} stored updates")
        if self.history is None:
            return
        for part, size in first.items():  # each input, view and dataflow (a why-not
            grown = last[part]  # watch may follow one more relation by the end)
            assert grown <= 1.5 * size + 50, f"stored updates of {part} grew: {size} -> {grown}"

    def toggled(self, relation: str, row: Row, times: int, sampled: int = 0) -> Counter[str]:
        """Toggles `row` `times` times; the peak stored updates of each part over the
        last `sampled` toggles (none sampled: an empty count)."""
        peaks: Counter[str] = Counter()
        for toggle in range(times):
            present = row in self.model.facts().get(relation, frozenset())
            (self.database.retract if present else self.database.insert)(relation, [row])
            self.commit(self.model.written([(not present, relation, (row,))]), True)
            if toggle >= times - sampled:
                for part, size in stored_parts(self.database.stats()).items():
                    peaks[part] = max(peaks[part], size)
        return peaks

    # -- live queries -----------------------------------------------------------------

    @precondition(lambda self: len(self.watches) < MAX_WATCHES)
    @rule(data=st.data())
    def subscribe(self, data: st.DataObject) -> None:
        self.subscribe_one(data, faults=True)

    def subscribe_one(self, data: st.DataObject, faults: bool) -> None:
        query = data.draw(self.queries(), label="query")
        plan = data.draw(PLANS, label="plan")
        pace = data.draw(st.one_of(st.none(), st.none(), st.integers(1, 3)), label="pace")
        kinds = ("budget", "callback", "functor", "engine") if faults else ()
        fault = data.draw(fault_strategy(*kinds), label="fault")
        probe = data.draw(st.one_of(st.none(), st.none(), self.queries()), label="probe")
        closes = data.draw(st.one_of(st.none(), st.none(), st.integers(2, 4)), label="closes")
        note(f"subscribe {query!r} plan {plan} pace {pace} probe {probe!r} closes after {closes}")
        note(f"  under {fault}")
        reader = None if probe is None else (lambda p=probe: as_rows(self.database.query(p)))
        received = Received(self.faults.hook("callback"), reader, closes)
        watch = Watch(query, plan, pace, received, probe=probe)
        granularity = None if pace is None else {"epochs": pace}
        before = self.before()
        try:
            with self.injected(fault):
                watch.handle = self.database.subscribe(query, watch.received, plan, granularity)
        except BaseException as error:
            self.expect(is_injected(error, fault, self.faults), error)
            self.outcome("subscribe", fault, "raised")
            self.subscription_epoch(before)
            return
        self.outcome("subscribe", fault, "subscribed")
        self.subscription_epoch(before)
        watch.started(self.model.epoch, self.model.current.answer(query))
        received.handle = watch.handle
        self.watches.append(watch)

    def subscription_epoch(self, before: tuple[int, int]) -> None:
        """A subscription is a read: no epoch, no log record."""
        self.unchanged(before, "a subscription")

    @precondition(lambda self: self.watches)
    @rule(data=st.data(), twice=st.booleans())
    def unsubscribe(self, data: st.DataObject, twice: bool) -> None:
        """Unsubscribing is a read too; interrupted, it is done or not, never half."""
        watch = data.draw(st.sampled_from(self.watches), label="subscription")
        fault = data.draw(fault_strategy("engine"), label="fault")
        note(f"unsubscribe {watch.query!r} under {fault}")
        handle = watch.handle
        assert handle is not None
        before = self.before()
        try:
            with self.injected(fault):
                for _ in range(2 if twice else 1):  # a second close does nothing
                    handle.close()
        except BaseException as error:
            self.expect(is_injected(error, fault, self.faults), error)
            self.outcome("unsubscribe", fault, "raised, " + ("kept" if handle.active else "gone"))
            if not handle.active:
                self.watches.remove(watch)
            self.unchanged(before, "an interrupted unsubscription")
            return
        self.outcome("unsubscribe", fault, "gone")
        assert not handle.active
        self.watches.remove(watch)
        self.unchanged(before, "an unsubscription")

    @precondition(lambda self: self.watches)
    @rule()
    def unsubscribe_all(self) -> None:
        before = self.before()
        for watch in self.watches:
            assert watch.handle is not None
            self.database.unsubscribe(watch.handle)
        self.watches = []
        for why in self.why_watches:  # their followed relations' dataflows go with them
            why.handle.close()
        self.why_watches = []
        self.unchanged(before, "unsubscribing")
        dataflows, views, _, _ = live_counts(self.database)
        assert (dataflows, views) == (0, 0), "dataflows or views outlived every subscription"

    # -- reads ----------------------------------------------------------------------------

    @rule(data=st.data())
    def query(self, data: st.DataObject) -> None:
        query = data.draw(self.queries(), label="query")
        how = data.draw(st.sampled_from(("query", "columns", "arrow", "explain")), label="api")
        plan = data.draw(PLANS, label="plan")
        fault = data.draw(fault_strategy("budget", "functor", "engine"), label="fault")
        note(f"{how} {query!r} plan {plan} under {fault}")
        self.read(lambda: self.ask(how, query, plan, None), self.model.current.answer(query), fault)

    @rule(data=st.data())
    def bad_read(self, data: st.DataObject) -> None:
        """A query that does not check, a bad granularity, an epoch not yet happened or
        not a number: a `DatalogError` (for a query, with its position), and nothing
        changes (no orphan live query, no epoch)."""
        query = data.draw(st.sampled_from(pool.BAD_QUERIES), label="bad query")
        how = data.draw(st.sampled_from(("query", "subscribe", "as_of", "pace")), label="how")
        note(f"{how} of the bad {query!r}")
        with self.reading(), raises(DatalogError):
            if how == "query":
                self.database.query(query)
            elif how == "subscribe":
                self.database.subscribe(query, Received(lambda: None))
            elif how == "as_of":
                self.database.query("e(x, y)", as_of=data.draw(pool.BAD_EPOCHS(self.model.epoch)))
            else:
                self.database.subscribe(
                    "e(x, y)", Received(lambda: None), granularity={"epochs": 0}
                )

    @rule(data=st.data())
    def as_of(self, data: st.DataObject) -> None:
        model = self.model
        epoch = data.draw(st.integers(max(0, model.oldest - 2), model.epoch), label="epoch")
        query = data.draw(self.queries(), label="query")
        how = data.draw(st.sampled_from(("query", "columns", "arrow")), label="api")
        plan = data.draw(PLANS, label="plan")
        fault = data.draw(fault_strategy("budget", "functor", "engine"), label="fault")
        note(f"{how} {query!r} plan {plan} as of {epoch} (oldest {model.oldest}) under {fault}")
        if epoch < model.oldest:
            with self.reading(), raises(HistoryCompactedError):
                self.ask(how, query, plan, epoch)
            return
        snapshot = model.at(epoch)
        if not valid_query(snapshot.text, query):  # declared after `epoch`
            with self.reading(), raises(DatalogError):
                self.ask(how, query, plan, epoch)
            return
        self.read(lambda: self.ask(how, query, plan, epoch), snapshot.answer(query), fault)

    def fact(self, data: st.DataObject, snapshot: Snapshot) -> tuple[str, Row, str] | None:
        """A derived relation of `snapshot`, one of its rows or one it cannot hold, and
        the fact's text (None: no derived relation)."""
        derived = [r for r in self.model.derived() if r in snapshot.relations()]
        if not derived:
            return None
        relation = data.draw(st.sampled_from(derived), label="relation")
        present = sorted(snapshot.holds(relation), key=repr)
        kinds = snapshot.relations()[relation]
        if present and data.draw(st.booleans(), label="present?"):
            row = data.draw(st.sampled_from(present), label="row")
        else:
            row = tuple(pool.OUTSIDE[k] for k in kinds)
        return relation, row, f"{relation}({', '.join(literal_text(v) for v in row)})"

    @rule(data=st.data())
    def why(self, data: st.DataObject) -> None:
        model = self.model
        epoch = data.draw(
            st.one_of(st.none(), st.integers(model.oldest, model.epoch)), label="as_of"
        )
        snapshot = model.current if epoch is None else model.at(epoch)
        drawn = self.fact(data, snapshot)
        if drawn is None:
            return
        relation, row, text = drawn
        fault = data.draw(fault_strategy("budget", "functor"), label="fault")
        note(f"why {text} as of {epoch} under {fault}")
        if row not in snapshot.holds(relation):
            with self.reading(), raises(FactNotFoundError):
                self.database.why(text, as_of=epoch)
            return
        with self.reading():
            try:
                with self.injected(fault):
                    proof = self.database.why(text, as_of=epoch)
            except BaseException as error:
                self.expect(is_injected(error, fault, self.faults), error)
                return
        program = checked(snapshot.text)
        facts = {name: set(rows_) for name, rows_ in snapshot.facts}
        full = reference.evaluate(replace(program, facts=()), facts)
        check_proof(proof, program, full, levels(program, facts, full))

    @precondition(lambda self: len(self.why_watches) < 3)
    @rule(data=st.data())
    def watch_why(self, data: st.DataObject) -> None:
        """A fact's explanation kept live (`subscribe_why`, docs/adr/0045, 0071): after
        every later step, whatever it was, it says whether the fact holds (`agrees`)."""
        drawn = self.fact(data, self.model.current)
        if drawn is None:
            return
        relation, row, text = drawn
        note(f"subscribe_why {text}")
        with self.reading():
            handle = self.database.subscribe_why(text, lambda change: None)
        self.why_watches.append(WhyWatched(relation, row, handle))

    @rule(data=st.data())
    def what_if(self, data: st.DataObject) -> None:
        """A hypothetical transaction answers what committing it would deliver (the
        reference's answer after minus before) and changes nothing: no epoch, no log,
        no subscriber told, every later step as if it never ran (docs/adr/0047)."""
        ops = data.draw(self.ops(max_ops=3), label="ops")
        query = data.draw(self.queries(), label="query")
        note(f"what_if {ops} for {query!r}")
        with self.reading(), self.database.hypothetical([query]) as tx:
            self.apply_ops(tx, ops, data)
        before = self.model.current.answer(query)
        after = self.model.written(ops).current.answer(query)
        change = tx.changes[query]
        got = as_rows(zip(change.rows, change.diffs, strict=True))
        assert got == as_rows(
            [*((r, 1) for r in after - before), *((r, -1) for r in before - after)]
        )

    # -- durability -------------------------------------------------------------------------

    @rule()
    def checkpoint(self) -> None:
        before = self.before()
        if self.path is None:
            with raises(DatalogError):
                self.database.checkpoint()
            self.unchanged(before, "a refused checkpoint")
            return
        self.database.checkpoint()
        assert self.database.epoch == before[0], "a checkpoint advanced the epoch"
        self.checkpointed = self.model.epoch

    @precondition(lambda self: self.path is not None)
    @rule()
    def reopen(self) -> None:
        """Close and open again: every acknowledged commit is there (subscriptions end)."""
        self.database.close()
        self.db = None
        self.watches, self.why_watches = [], []
        self.db = self.open()
        oldest = self.database.stats()["history"]["oldest_readable"]  # type: ignore[index]
        low = max(self.model.oldest, min(self.checkpointed, self.model.epoch))
        assert low <= oldest <= self.model.epoch, (low, oldest, self.model.epoch)
        self.model = self.model.reopened(oldest)
        assert self.database.epoch == self.model.epoch
        self.check_answers()

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def agrees(self) -> None:
        if self.db is None:
            return
        db, model = self.db, self.model
        assert db.epoch == model.epoch, f"epoch {db.epoch}, the model is at {model.epoch}"
        history = db.stats()["history"]
        assert history["oldest_readable"] == model.oldest, (history, model.oldest)  # type: ignore[index]
        for watch in self.watches:
            watch.check()
            assert watch.handle is not None
            assert as_rows(watch.handle.rows()) == sorted_rows(model.current.answer(watch.query))
        relations = model.current.relations()
        for why in self.why_watches:
            defined = why.relation in relations
            why.check(why.row in model.current.holds(why.relation) if defined else None)
        self.no_orphans()


# Every dataflow a commit reaches is recomputed from the new base (docs/adr/0053).
RECOMPUTED = {"recompute": "always", "recompute_min_rows": 1}


class _UserError(Exception):
    """The user's own exception inside a transaction block."""


DatabaseModel.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
TestDatabaseModel = DatabaseModel.TestCase
