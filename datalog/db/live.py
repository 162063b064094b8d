"""Live queries and their subscribers: what a subscriber receives, and when.

Layer: datalog (API). Imports the planner's types, `datalog.db.pacing` and `differential`.

A `LiveQuery` owns one live query's life: the dataflow that keeps its answer (its
own `QueryPlan`, or a seat in a shared multi-tenant one, `datalog.db.tenants`), the
answer its subscribers hold (`state`), the subscribers themselves with their
pacing, and what a repair needs to know. `deliver` hands subscribers an epoch's
changes: a change held back by a definition (`held`) joins the delivery of its
epoch, so each subscriber gets one `Change` per epoch, in increasing epochs.

Repair invariant. Between two deliveries, `state` is exactly what every subscriber
holds (accumulated snapshot and changes). A delivery records how far it got
(`stage`): if it stops before any subscriber was told (a `MemoryError` converting
rows, say), `state` is still what they hold; if it stops after all were told and
before `state` took the change (an interrupt inside the trace insert), they hold
the new answer and `state` is suspect. `datalog.db.queries.LiveQueries.repair` reads
`stage` to hand each subscriber exactly what it is missing, never twice.

A `Watch` is what else the live queries keep current every epoch (a why-not watch,
`datalog.db.whywatch`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from datalog.db.change import Callback, Change
from datalog.db.pacing import Pacing
from datalog.eval.expressions import DTYPES
from datalog.eval.rows import to_rows
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import ColumnType
from datalog.lang.checks import CheckedProgram
from datalog.plan.plan import JoinPlan
from differential.batch import Updates, concat, consolidate
from differential.graph import Dataflow
from differential.inputs import Requests
from differential.time import column
from differential.trace.spine import Spine

if TYPE_CHECKING:  # the planner's lowering is loaded when a query is first planned
    from datalog.plan.build import QueryPlan

_log = logging.getLogger("deltalog")
KEPT_ERRORS = 10  # a subscription keeps its last few errors (and counts them all)
MAX_HTML_ROWS = 50  # rows a notebook shows of an answer

# Where a delivery stopped (see the module docstring): "idle" between deliveries,
# "telling" while subscribers are being told, "told" once all were, before `state`
# took the change.
Stage = Literal["idle", "telling", "told"]


class Shared(Protocol):
    """A shared dataflow a live query has a seat in (`datalog.db.tenants.Tenant`)."""

    built_for: CheckedProgram | None  # the program its dataflow was built from


@dataclass(eq=False)
class Subscription:
    query: str
    columns: tuple[str, ...]
    callback: Callback
    live: LiveQuery | None = None
    active: bool = True
    errors: deque[Exception] = field(default_factory=lambda: deque(maxlen=KEPT_ERRORS))
    error_count: int = 0  # every error the callback raised, kept or not
    unsubscribe: Callable[[Subscription], None] | None = field(default=None, repr=False)
    symbols: SymbolTable | None = field(default=None, repr=False)
    pacing: Pacing | None = None  # None: every epoch's change at once

    def __repr__(self) -> str:
        state = "active" if self.active else "closed"
        return f"<Subscription {self.query!r} ({state}, {self.error_count} errors)>"

    def _repr_html_(self) -> str:
        """The current answer as an HTML table (Jupyter shows it live on re-display)."""
        import html  # only for notebooks: not loaded with `datalog`

        rows = self.rows()
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
            for row in rows[:MAX_HTML_ROWS]
        )
        more = (
            f"<p>… {len(rows) - MAX_HTML_ROWS:,} more rows</p>" if len(rows) > MAX_HTML_ROWS else ""
        )
        caption = f"<caption>{html.escape(self.query)}: {len(rows):,} rows</caption>"
        return f"<table>{caption}<tr>{head}</tr>{body}</table>{more}"

    def rows(self) -> list[tuple[object, ...]]:
        """The answer this subscription holds now, sorted."""
        if self.live is None or not self.active or self.symbols is None:
            return []
        return sorted(self.live.rows(self.symbols))

    def close(self) -> None:
        """Unsubscribe (the dataflow goes with its last subscriber)."""
        if self.active and self.unsubscribe is not None:
            self.unsubscribe(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(eq=False)
class LiveQuery:
    """A live query: its dataflow, the answer its subscribers hold, the subscribers."""

    key: str
    types: tuple[ColumnType, ...]
    columns: tuple[str, ...]  # the answer variables
    join_plan: JoinPlan
    state: Spine
    plan: QueryPlan | None = None  # the dataflow that keeps it (a tenant's, if seated)
    tenant: Shared | None = field(default=None, repr=False)  # shared dataflow, if any
    param: tuple[Any, ...] = ()  # and its parameter tuple there
    subscribers: list[Subscription] = field(default_factory=list)
    held: Updates | None = None  # a definition's change, delivered with its epoch
    stage: Stage = "idle"
    telling: Updates | None = None  # the epoch's changes while subscribers are told
    built_for: CheckedProgram | None = field(default=None, repr=False)  # its own dataflow's

    @classmethod
    def empty(
        cls, key: str, types: tuple[ColumnType, ...], columns: tuple[str, ...], plan: JoinPlan
    ) -> LiveQuery:
        dtypes = [np.dtype(DTYPES[t]) for t in types]
        return cls(key, types, columns, plan, Spine(len(dtypes), dtypes, 1))

    @property
    def query_text(self) -> str:
        return self.key.split(" [plan=")[0]

    @property
    def sound(self) -> bool:
        """Whether `state` is what its subscribers hold (no delivery stopped half-way)."""
        return self.stage == "idle"

    def answer(self) -> Updates:
        """The answer now: while subscribers are told an epoch's changes, `state` with
        them (a callback that reads the query sees the epoch it is told about)."""
        state = self.state.accumulate(None)
        if self.telling is None:
            return state
        pending = self.telling.with_times(self.telling.times * 0)
        return consolidate(concat([state, pending]))

    def rows(self, symbols: SymbolTable) -> list[tuple[Any, ...]]:
        state = self.answer()
        return to_rows(state.columns, self.types, symbols, len(state))

    def reset(self, answer: Updates) -> None:
        """Make `answer` the state (subscribers hold it already: nothing is delivered)."""
        state = Spine(self.state.key_arity, self.state.dtypes, 1)
        _insert(state, answer)
        self.state, self.stage = state, "idle"

    def deliver(self, updates: Updates, epoch: int, symbols: SymbolTable) -> None:
        """Hand an epoch's changes to every subscriber, then take them into `state`.

        A subscriber's exception is kept in its subscription (`notify`); its
        `BaseException` (KeyboardInterrupt) is raised once every subscriber was told."""
        if self.held is not None:
            updates = consolidate(concat([_at(self.held, epoch), _at(updates, epoch)]))
        if len(updates) == 0:
            self.held = None
            return
        self.stage = "telling"
        rows = to_rows(updates.columns, self.types, symbols, len(updates))
        change = Change(rows, updates.diffs.tolist(), epoch)
        self.held = None
        self.telling = updates
        try:
            failure = self._tell(change)
        finally:
            self.telling = None
        self.stage = "told"
        _insert(self.state, updates)
        self.stage = "idle"
        if failure is not None:
            raise failure

    def _tell(self, change: Change) -> BaseException | None:
        failure: BaseException | None = None
        for sub in list(self.subscribers):
            try:
                if sub.active and sub.pacing is None:
                    notify(sub, change)
                elif sub.active and sub.pacing is not None:
                    sub.pacing.hold(change.rows, change.diffs)
            except BaseException as error:
                failure = failure or error
        return failure

    def tick(self, epoch: int, woken: bool = False) -> BaseException | None:
        """After a commit (or a wake-up): paced subscribers get what is due; the first
        `BaseException` a callback raised is returned, to be raised last."""
        failure: BaseException | None = None
        for sub in list(self.subscribers):
            pacing = sub.pacing
            if not sub.active or pacing is None:
                continue
            due = pacing.woken(epoch) if woken else pacing.due(epoch)
            try:
                if due is not None:
                    notify(sub, Change(due[0], due[1], epoch))
            except BaseException as error:
                failure = failure or error
        return failure


def _insert(state: Spine, updates: Updates) -> None:
    since = state.default_since
    state.insert(updates.with_times(updates.times * 0), since, since)


def _at(updates: Updates, epoch: int) -> Updates:
    return updates.with_times(column((epoch,), len(updates)))


def notify(sub: Subscription, change: Change) -> None:
    """Call a subscriber; its exception is logged and kept, never raised into a commit.

    The commit has already happened: other subscribers must still hear of it.
    """
    try:
        sub.callback(change if change.columns else replace(change, columns=sub.columns))
    except Exception as exc:  # a subscriber's bug must not undo or hide an epoch
        sub.errors.append(exc)
        sub.error_count += 1
        _log.exception("subscriber of %s failed at epoch %d", sub.query, change.epoch)


Asked = Mapping[str, Requests] | None  # the rows an epoch asked to write (None: not known)


class Watch(Protocol):
    """Something kept current at every epoch after the live queries (an explanation,
    `datalog.db.whywatch`), told which relations the epoch wrote or gave new rules,
    and the rows it asked to write (by relation; None: not known)."""

    def at_epoch(self, epoch: int, touched: frozenset[str], requests: Asked) -> None: ...

    def before(self, requests: Mapping[str, Requests]) -> Sequence[Dataflow]: ...
