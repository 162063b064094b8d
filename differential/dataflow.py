"""Dataflow graphs, scopes and the scheduler.

Layer: differential. Imports numpy and the other differential modules.

Execution is synchronous and epoch at a time. A `Scope` owns operators whose
times have `depth` coordinates (root scope: `(epoch,)`; each iteration scope
adds one). `Scope.run(prefix)` repeatedly picks the lexicographically least
time, among the times with that prefix at which some stateful operator has
work, and steps every operator that has work at that time, in creation order
(which is a topological order: an operator is created after its inputs; the
only back edges are variable feedback, which always moves time forward).

Lexicographic order extends the product order, so when a time `t` is processed
every update at a time `<= t` has been processed: that is what lets reduce and
join produce final answers at `t`, for partially ordered times.

Stateless operators (map, filter, concat, negate, enter, leave, feedback) act
the moment updates reach them; only stateful ones (arrange, join, reduce,
import, nested scopes) are scheduled. Their inputs are `TimeQueue`s that bucket
updates by exact time.

Budgets (`differential.budget`, re-exported here): the scheduler checks the running
budget before every time and every operator step; operators whose one step can be
long (joins, reduces, delta queries, chains) check it between chunks too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from differential.batch import Updates, concat, uniform
from differential.budget import Interrupted as Interrupted
from differential.budget import check_budget as check_budget
from differential.budget import check_rows as check_rows
from differential.budget import remaining as remaining
from differential.budget import row_limit as row_limit
from differential.budget import unbudgeted as unbudgeted
from differential.time import Time, split_by_time
from differential.tuning import TUNING

Receiver = Callable[[Updates], None]


class TimeQueue:
    """Updates waiting for the scheduler, bucketed by their exact time."""

    def __init__(self) -> None:
        self.buckets: dict[Time, list[Updates]] = {}

    def __bool__(self) -> bool:
        return bool(self.buckets)

    def push(self, updates: Updates) -> None:
        if len(updates) == 0:
            return
        times = updates.times
        if len(updates) == 1 or uniform(times) or bool((times == times[:, :1]).all()):
            self.buckets.setdefault(tuple(times[:, 0].tolist()), []).append(updates)
            return
        for time, part in split_by_time(times):
            self.buckets.setdefault(time, []).append(updates.take(part))

    def times(self) -> Iterable[Time]:
        return self.buckets.keys()

    def has(self, time: Time) -> bool:
        return time in self.buckets

    def pop(self, time: Time) -> Updates | None:
        parts = self.buckets.pop(time, None)
        return concat(parts) if parts else None

    def pop_parts(self, time: Time) -> list[Updates]:
        """The updates at `time` as they were pushed, not concatenated (none: [])."""
        return self.buckets.pop(time, [])


class Stream:
    """An edge of the graph: updates of fixed arity and column types in one scope.

    Where it comes from is recorded for explaining, never read when running:
    `producer` is the stateful operator whose output it is, `upstream` the streams
    a stateless operator (map, concat, enter, leave, a variable's feedback) made
    it from.
    """

    def __init__(
        self,
        scope: Scope,
        dtypes: Sequence[np.dtype],
        name: str = "",
        upstream: Sequence[Stream] = (),
        producer: Operator | None = None,
    ) -> None:
        self.scope = scope
        self.relay: Relay = scope.relay
        self.dtypes = tuple(np.dtype(d) for d in dtypes)
        self.name = name
        self.receivers: list[Receiver] = []
        self.upstream: tuple[Stream, ...] = tuple(upstream)
        self.producer = producer

    @property
    def arity(self) -> int:
        return len(self.dtypes)

    def connect(self, receiver: Receiver) -> None:
        self.receivers.append(receiver)

    def send(self, updates: Updates) -> None:
        """Hand `updates` to every receiver now; past `TUNING.relay_depth` nested
        sends (a chain of thousands of maps), to the outermost send instead."""
        if not len(updates):
            return
        relay = self.relay
        if relay.depth >= TUNING.relay_depth:
            relay.waiting.extend((receive, updates) for receive in self.receivers)
            return
        relay.depth += 1
        try:
            for receive in self.receivers:
                receive(updates)
            if relay.depth == 1:
                while relay.waiting:
                    receive, waiting = relay.waiting.popleft()
                    receive(waiting)
        finally:
            relay.depth -= 1
            if not relay.depth:
                relay.waiting.clear()  # what a failure left is not delivered later

    def empty(self) -> Updates:
        return Updates.empty(self.arity, self.scope.depth, self.dtypes)


class Operator:
    """A stateful operator: the scheduler steps it at times where it has work."""

    name = "operator"
    holds_trace = False  # whether it owns an arrangement (`arranged_size` measures it)

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        scope.register(self)

    def pending(self, prefix: Time) -> Iterable[Time]:
        """Times extending `prefix` at which this operator has (or may have) work."""
        return ()

    def ready(self, time: Time) -> bool:
        """Whether stepping at `time` could do anything (checked just before stepping)."""
        return False

    def step(self, time: Time) -> None:
        """Process all work at exactly `time`."""

    def advance(self, epoch: int) -> None:
        """The root frontier moved to `(epoch,)`: compact what is now final."""

    def arranged_size(self) -> tuple[int, int]:
        """`(tuples, batches)` this operator holds in arrangements it owns."""
        return (0, 0)

    def forget(self) -> None:
        """Drop everything this operator holds, for good (its dataflow ran once and is
        done with it): freed now, by reference counting, not whenever the cycle
        collector next runs (operators and their streams refer to each other)."""
        vars(self).clear()

    def describe(self) -> str:
        return self.name

    def inputs(self) -> Sequence[Operator | Stream]:
        """What this operator reads: arrangements (operators) and streams (for explain)."""
        return ()


class Relay:
    """The sends in progress in one dataflow: how deep they nest, and what waits for
    the outermost one (`Stream.send`). Stateless operators deliver synchronously, so
    a long chain of them would otherwise recurse once per operator."""

    def __init__(self) -> None:
        self.depth = 0
        self.waiting: deque[tuple[Receiver, Updates]] = deque()


class Scope:
    """Operators sharing one time depth, run to quiescence by `run`."""

    def __init__(self, depth: int, parent: Scope | None = None, name: str = "root") -> None:
        self.depth = depth
        self.parent = parent
        self.relay: Relay = Relay() if parent is None else parent.relay
        self.name = name
        self.operators: list[Operator] = []
        self.steps = 0
        self.insert_at: int | None = None
        # Runs the rounds from a time in one go where it can (True), else None or
        # False: an iteration scope's fused rounds (`operators.chain`, ADR 0029).
        self.fused: Callable[[Time], bool] | None = None
        # A root scope that runs for one epoch only (a one-shot dataflow, dropped
        # after its first run; set before it runs): see `totally_ordered`.
        self.one_epoch = False
        # The time whose operators `run` is stepping (None before the first; not the
        # time of fused rounds): what arrives at it is that time's own output.
        self.now: Time | None = None
        # An iteration scope's variables' streams (`iterate.Variable`), from which
        # `operators.unread` follows what changes after the first round.
        self.variables: list[Stream] = []

    @property
    def totally_ordered(self) -> bool:
        """Whether every time this scope will ever process is comparable with every
        other, so that once `t` is being processed no reader asks about a time before
        `t` again: the root of a one-shot dataflow (one epoch) and an iteration scope
        directly inside it (`(epoch, round)`, one epoch). An arrangement here may then
        advance the history before the time being processed to that time and
        consolidate it (ADR 0062); a live dataflow's times `(e, i)` must stay apart
        for the epochs to come, and so must a deeper scope's rounds."""
        parent = self.parent
        if parent is None:
            return self.one_epoch
        return parent.parent is None and parent.one_epoch

    @property
    def compacts_rounds(self) -> bool:
        """Whether arrangements here advance and consolidate settled rounds as they go
        (`TUNING.compact_rounds` in a totally ordered scope; ADR 0062)."""
        return TUNING.compact_rounds and self.totally_ordered

    def register(self, op: Operator) -> None:
        """Add `op` at the end, or at the insertion point while one is set."""
        if self.insert_at is None:
            self.operators.append(op)
        else:
            self.operators.insert(self.insert_at, op)
            self.insert_at += 1

    @contextmanager
    def inserting_before(self, op: Operator) -> Iterator[None]:
        """Register new operators just before `op` for the duration of the block.

        Building a nested scope may create operators of this scope lazily (an
        arrangement an inner join needs); they feed the nested scope, so they
        must run before it.
        """
        saved = self.insert_at
        self.insert_at = self.operators.index(op)
        try:
            yield
        finally:
            self.insert_at = saved

    def next_time(self, prefix: Time) -> Time | None:
        best: Time | None = None
        for op in self.operators:
            for t in op.pending(prefix):
                if t[: len(prefix)] == prefix and (best is None or t < best):
                    best = t
        return best

    def run(self, prefix: Time = ()) -> None:
        """Process every pending time that extends `prefix`, in lexicographic order."""
        while (time := self.next_time(prefix)) is not None:
            check_budget()
            if self.fused is not None and self.fused(time):
                continue
            self.steps += 1
            self.now = time
            for op in self.operators:
                if op.ready(time):
                    check_budget()  # one step may run many heavy operators
                    op.step(time)

    def all_operators(self) -> list[Operator]:
        out: list[Operator] = []
        for op in self.operators:
            out.append(op)
            inner = getattr(op, "inner", None)
            if isinstance(inner, Scope):
                out.extend(inner.all_operators())
        return out

    def readers(self) -> dict[int, list[Operator]]:
        """The operators of this scope and the deeper ones reading each operator or
        stream (`Operator.inputs`), by its id."""
        found: dict[int, list[Operator]] = {}
        for op in self.all_operators():
            for read in op.inputs():
                found.setdefault(id(read), []).append(op)
        return found

    def describe(self, indent: str = "") -> list[str]:
        """Its operators, one per line, nested scopes' indented below theirs."""
        lines = []
        for op in self.operators:
            lines.append(indent + op.describe())
            inner = getattr(op, "inner", None)
            if isinstance(inner, Scope):
                lines += inner.describe(indent + "  ")
        return lines

    def forget(self, kept: set[int]) -> None:
        """Forget its operators (nested scopes' too) but those in `kept` (ids), and
        what each holds."""
        for op in self.operators:
            inner = getattr(op, "inner", None)
            if isinstance(inner, Scope):
                inner.forget(kept)
            if id(op) not in kept:
                op.forget()
        self.operators = []
