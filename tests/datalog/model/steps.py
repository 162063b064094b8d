"""The machinery of the model test's steps: running an operation under a fault,
judging what happened, checking answers, and drawing what to do next.

`Steps` is a mixin of `DatabaseModel` (`tests/datalog/test_model.py`), which owns
the database (`db`, `path`), the model (`model`), the live subscriptions
(`watches`) and the fault injector (`faults`). See ADR 0037.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import event
from hypothesis import strategies as st

from datalog import Database, DatalogError, parse_query
from datalog.lang.checks import check_query
from tests.datalog.model import pool
from tests.datalog.model.faults import ERRORS, Faults, engine_hooks
from tests.datalog.model.measures import live_counts, log_bytes, snapshots
from tests.datalog.model.outcomes import Fault, is_injected, must_commit
from tests.datalog.model.rows import FORMS, encode
from tests.datalog.model.state import ModelState, Op, Row, checked
from tests.datalog.model.subscribers import Watch, WhyWatched
from tests.datalog.programs import programs, rows

WRITABLE_DERIVED = ("seed", "tc")  # relations with rules that also take facts


class Steps:
    """What every step of `DatabaseModel` does (see the module docstring)."""

    db: Database | None
    path: Path | None
    model: ModelState
    watches: list[Watch]
    why_watches: list[WhyWatched]
    faults: Faults
    baseline: set[str]

    @property
    def database(self) -> Database:
        assert self.db is not None
        return self.db

    def check_answers(self) -> None:
        """Every relation's one-shot answer equals the reference (after a failure)."""
        for relation, kinds in self.model.relations.items():
            query = pool.full_query(relation, kinds)
            got = as_rows(self.database.query(query))
            assert got == sorted_rows(self.model.current.answer(query)), f"`{query}`: {got}"

    def no_orphans(self) -> None:
        """One live query per distinct query and plan, one dataflow per live query (its
        multi-tenant members share one), and nothing left when nobody subscribes."""
        dataflows, views, subscribers, queries = live_counts(self.database)
        expected = Counter(_live_key(w) for w in self.watches)
        assert queries == dict(expected), f"live queries {queries}, subscriptions {expected}"
        assert subscribers == len(self.watches)
        shared = {_tenant_shape(w) or _live_key(w) for w in self.watches}
        # (a why-not watch keeps a dataflow for each derived relation it read)
        many = dataflows >= len(shared) if self.why_watches else dataflows == len(shared)
        assert many, f"{dataflows} dataflows for {sorted(shared)}"
        engine = self.database.engine  # and every claim on a shared arrangement is a
        flows = [*engine.dataflows, *(v.dataflow for v in engine.views)]  # live reader's
        held = {id(op.handle) for df in flows for op in df.imports}
        for source in engine.inputs.values():
            for arrangement in source.arrangements.values():
                claims = [h for h in arrangement.spine.handles if id(h) not in held]
                assert not claims, f"{arrangement.name} is claimed by no live dataflow"
        if not self.watches:
            assert views == 0, "a view outlived every subscription"
            inputs = set(self.database.stats()["inputs"])  # type: ignore[arg-type]
            left = inputs - self.baseline - set(self.model.relations)
            assert not left, f"inputs outlived every subscription: {left}"

    def write(
        self,
        action: Callable[[], None],
        after: ModelState,
        advances: bool,
        fault: Fault | None,
        define: bool = False,
    ) -> None:
        """Run a write that the model accepts; decide what happened if it raised."""
        before = self.before()
        marks = snapshots(self.path)
        try:
            with self.injected(fault if advances else None):
                action()
        except BaseException as error:
            self.expect(is_injected(error, fault, self.faults), error)
            assert fault is not None
            committed = self.database.epoch != before[0]
            required = must_commit(fault, explained=bool(self.why_watches))
            assert required is None or committed == required, (
                f"{fault}: committed={committed}, but the API says {required}"
            )
            self.outcome("write", fault, "committed, then raised" if committed else "undone")
            if committed:
                self.commit(after, advances)
                for why in self.why_watches:  # cut short explaining again, maybe: it
                    why.interrupted()  # explains again at the next epoch
            else:
                self.unchanged(before, f"a write failed by {fault}", marks)
            self.check_answers()
            return
        self.outcome("write", fault if advances else None, "committed")
        self.commit(after, advances)

    def rejected(
        self, action: Callable[[], None], errors: tuple[type[BaseException], ...] = ()
    ) -> None:
        """A write the model rejects: it raises a DatalogError (or `errors`), changes nothing."""
        before = self.before()
        marks = snapshots(self.path)
        with raises((DatalogError, *errors)):
            action()
        self.unchanged(before, "a rejected write", marks)

    def commit(self, after: ModelState, advances: bool, ticked: bool = True) -> None:
        """The database did the write: the model follows, and the subscribers' expected
        changes grow by the new epoch's (paced ones only if it `ticked` them)."""
        if not advances:
            self.model = after.restamped()
            return
        self.model = after.advanced()
        current = self.model.current
        for watch in self.watches:
            if ticked or watch.pace is None:
                probe = None if watch.probe is None else sorted_rows(current.answer(watch.probe))
                watch.epoch(self.model.epoch, current.answer(watch.query), probe)
        for watch in [w for w in self.watches if w.closed]:  # they unsubscribed themselves
            watch.check()
            assert watch.handle is not None and not watch.handle.active
            self.watches.remove(watch)

    def read(
        self, action: Callable[[], list[Row]], expected: frozenset[Row], fault: Fault | None
    ) -> None:
        with self.reading():
            try:
                with self.injected(fault):
                    got = action()
            except BaseException as error:
                self.expect(is_injected(error, fault, self.faults), error)
                self.outcome("read", fault, "raised")
                return
        self.outcome("read", fault, "answered")
        if got is not None:
            assert got == sorted_rows(expected), (
                f"got {got}, the reference says {sorted_rows(expected)}"
            )

    def ask(self, how: str, query: str, plan: str, as_of: int | None) -> Any:
        """The answer through one of the read APIs, as sorted rows (None: explain)."""
        db = self.database
        if how == "query":
            return as_rows(db.query(query, plan, as_of=as_of))  # type: ignore[arg-type]
        if how == "explain":
            assert isinstance(db.explain(query, plan), str)  # type: ignore[arg-type]
            return None
        ground = not _answer_vars(self.model.current.text, query)
        if how == "columns" and ground:  # no columns: the answer is whether the fact holds
            assert db.query_columns(query, plan, as_of=as_of) == {}  # type: ignore[arg-type]
            return as_rows(db.query(query, plan, as_of=as_of))  # type: ignore[arg-type]
        if how == "columns":
            columns = db.query_columns(query, plan, as_of=as_of)  # type: ignore[arg-type]
            return as_rows(zip(*(c.tolist() for c in columns.values()), strict=True))
        table = db.query_arrow(query, plan, as_of=as_of)  # type: ignore[arg-type]
        assert isinstance(table, pa.Table)
        return as_rows(tuple(r.values()) for r in table.to_pylist())

    def before(self) -> tuple[int, int]:
        return self.database.epoch, log_bytes(self.path)

    def unchanged(
        self, before: tuple[int, int], what: str, marks: frozenset[str] | None = None
    ) -> None:
        epoch, log = before
        assert self.database.epoch == epoch, f"{what} advanced the epoch"
        if marks is not None and snapshots(self.path) != marks:
            return  # a checkpoint came first (a write checkpoints when the log is due)
        assert log_bytes(self.path) == log, f"{what} changed the log"

    @contextmanager
    def reading(self) -> Iterator[None]:
        before = self.before()
        yield
        self.unchanged(before, "a read")

    @contextmanager
    def injected(self, fault: Fault | None) -> Iterator[None]:
        with ExitStack() as stack:
            if fault is not None and fault.kind == "budget":
                stack.enter_context(self.database.budget(0.0))
            elif fault is not None:
                self.faults.arm(fault.kind, _error(fault), fault.nth)
                if fault.kind.startswith("engine"):
                    stack.enter_context(engine_hooks(self.faults))
            try:
                yield
            finally:
                self.faults.disarm()

    def outcome(self, what: str, fault: Fault | None, outcome: str) -> None:
        """Counted in `--hypothesis-show-statistics`: which faults fired, what followed."""
        if fault is None:
            kind = "no fault"
        elif fault.kind == "budget":
            kind = "a budget"
        else:
            kind = f"{fault.kind} {fault.error}" + ("" if self.faults.fired else " (not reached)")
        event(f"{what} under {kind}: {outcome}")

    def expect(self, injected: bool, error: BaseException) -> None:
        if not injected:
            raise AssertionError(f"unexpected {type(error).__name__}: {error}") from error

    def fragments(self) -> st.SearchStrategy[pool.Fragment]:
        """A fragment of the pool whose relations are new (most often), a program that
        must be rejected, or (at most twice per run) one drawn by `programs()`."""
        declared = set(self.model.relations)
        offered = [
            f
            for f in pool.FRAGMENTS
            if f.repeatable or (f.needs <= declared and not f.declares & declared)
        ]
        bad = st.sampled_from(pool.BAD_DEFINES).map(lambda b: pool.fragment(b[1], b[0]))
        choices = [st.sampled_from(offered)] * 3 + [bad]
        if self.model.generated < 2:
            tag = self.model.generated
            choices.append(programs(max_groups=2).map(lambda g: pool.generated_fragment(g, tag)))
        return st.one_of(*choices)

    def queries(self) -> st.SearchStrategy[str]:
        relations = self.model.relations
        makers = [
            (r, m) for r, kinds in sorted(relations.items()) for m in pool.query_shapes(r, kinds)
        ]

        @st.composite
        def draw(draw_: st.DrawFn) -> str:
            _, maker = draw_(st.sampled_from(makers))
            return maker(lambda options: draw_(st.sampled_from(list(options))))

        return draw()

    def ops(self, max_ops: int) -> st.SearchStrategy[list[Op]]:
        relations = self.model.relations
        writable = sorted(r for r in (*pool.BASE, *WRITABLE_DERIVED) if r in relations)

        @st.composite
        def draw(draw_: st.DrawFn) -> list[Op]:
            out: list[Op] = []
            for _ in range(draw_(st.integers(1, max_ops))):
                relation = draw_(st.sampled_from(writable))
                present = sorted(self.model.facts().get(relation, ()), key=repr)
                fresh = rows(relations[relation])
                pick = st.one_of(fresh, st.sampled_from(present)) if present else fresh
                chosen = draw_(st.lists(pick, max_size=3))
                out.append((draw_(st.booleans()), relation, tuple(chosen)))
            return out

        return draw()

    def apply_ops(self, tx: Any, ops: list[Op], data: st.DataObject) -> None:
        for inserting, relation, rows_ in ops:
            form = data.draw(st.sampled_from(FORMS), label="form")
            encoded = encode(form, self.model.relations[relation], rows_)
            (tx.insert if inserting else tx.retract)(relation, encoded)


def _error(fault: Fault) -> type[BaseException]:
    return ERRORS[fault.error]


@contextmanager
def raises(errors: type[BaseException] | tuple[type[BaseException], ...]) -> Iterator[None]:
    try:
        yield
    except errors:
        return
    raise AssertionError(f"expected {errors} to be raised")


def as_rows(rows_: Any) -> list[Row]:
    return sorted((tuple(r) for r in rows_), key=repr)


def sorted_rows(rows_: frozenset[Row]) -> list[Row]:
    return sorted(rows_, key=repr)


def valid_query(text: str, query: str) -> bool:
    try:
        _answer_vars(text, query)
    except DatalogError:
        return False
    return True


def _answer_vars(text: str, query: str) -> tuple[str, ...]:
    return tuple(check_query(parse_query(query), checked(text).schema).answer_vars)


_ATOM = re.compile(r"(?<![!\w])(\w+)\(([^()]*)\)")  # a positive atom of a query
_VARIABLE = re.compile(r"^[A-Za-z_]\w*$")


def has_constants(query: str) -> bool:
    """Whether a positive atom of `query` has a constant (a multi-tenant member)."""
    return any(
        not _VARIABLE.match(a.strip()) for _, args in _ATOM.findall(query) for a in args.split(",")
    )


def _tenant_shape(watch: Watch) -> str | None:
    """The shared dataflow of a query with constants: the query, constants blanked."""
    if not has_constants(watch.query):
        return None

    def blank(match: re.Match[str]) -> str:
        args = [a if _VARIABLE.match(a.strip()) else " ?" for a in match.group(2).split(",")]
        return f"{match.group(1)}({','.join(args)})"

    return f"tenant {_ATOM.sub(blank, watch.query)} [{watch.plan}]"


def _live_key(watch: Watch) -> str:
    return watch.query if watch.plan == "auto" else f"{watch.query} [plan={watch.plan}]"
