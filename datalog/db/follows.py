"""The derived relations a watched why-not read, kept current by dataflows of their
own, so that an epoch is checked against what changed in them, not by reading them
again (docs/adr/0071).

Layer: datalog (API). Imports `datalog.db.states` and `differential`; a why-not watch
(`datalog.db.whywatch`, through `datalog.db.explanations`) reads every derived
relation through `Follows.answer` and keeps the `Follows` with its lookups.

A why-not reads a derived relation once, as one query (`reach(0, x1)`: the asked
tuple's invariant columns bound, `datalog.db.states.States`). Read through
`Follows.answer`, that query is started as a live dataflow, not evaluated once: its
first answer is what the explanation reads, and from then on each epoch's changes
of it are collected. After an epoch, the rows that changed are checked against the
lookups the explanation made in the relation (`Stored.touched_by`, as the rows an
epoch writes in a base relation are): none touched, and the relation would answer
every lookup as before, without being read. The dataflows run with the live queries
(their work is the change's, not the relation's), and go when the watch explains
again, is closed, or can no longer vouch for them: a dataflow a failed commit
dropped missed an epoch (`touched` then answers None, and the watch reads the
relations again). A commit that asks to change at least `Tuning.recompute_min_rows`
rows of the relations the watch depends on, and at least `Tuning.recompute_ratio`
times what they hold, drops them first (`before`): run through a dataflow, a change
that large costs more than reading the relations once again (the prior of
docs/adr/0053). A commit that asks to change none of them cannot reach them: they
rest through it, out of the engine's dataflows (`rest`, `wake`), so that an epoch
that changes nothing the fact depends on costs the watch nothing but the check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from datalog.db.states import States, Stored
from differential.batch import Updates, concat, consolidate
from differential.engine import Engine
from differential.graph import Dataflow, Output
from differential.inputs import Requests
from differential.tuning import TUNING

__all__ = ["Follows", "Start"]

# Starts a live dataflow answering a query: the dataflow, its output, its first answer.
Start = Callable[[str], tuple[Dataflow, Output, Updates]]


@dataclass(eq=False)
class Follow:
    """One query of a derived relation, kept current: the changes since last drained."""

    dataflow: Dataflow
    changes: list[Updates] = field(default_factory=list)

    def take(self, updates: Updates, epoch: int) -> None:
        if len(updates):
            self.changes.append(updates)


class Follows:
    """The derived relations one why-not read, each kept by a dataflow (module
    docstring). `start` starts one; nothing is started until the explanation reads."""

    def __init__(self, engine: Engine, start: Start) -> None:
        self.engine, self.start = engine, start
        self.by_text: dict[str, Follow] = {}

    def answer(self, text: str) -> Updates:
        """The answer of query `text` now (consolidated), its dataflow kept running."""
        dataflow, output, first = self.start(text)
        follow = Follow(dataflow)
        output.listeners.append(follow.take)
        self.by_text[text] = follow
        return consolidate(first)

    def touched(self, states: States) -> bool | None:
        """Whether the changes collected since the last `drain` touch a lookup the
        explanation made in a derived relation it read through here; None when that
        cannot be told (a relation not read here, or a dataflow that missed an epoch)."""
        running = set(map(id, self.engine.dataflows))
        for relation, stored in states.read.items():
            if relation not in states.computed:
                continue
            follow = self.by_text.get(states.texts.get(relation, ""))
            if follow is None or id(follow.dataflow) not in running:
                return None
            if not follow.changes:
                continue
            columns = _full(stored, concat(follow.changes))
            if columns is None or stored.touched_by(columns):
                return True
        return False

    def drain(self) -> None:
        """Forget the changes collected so far (an epoch was checked or explained)."""
        for follow in self.by_text.values():
            follow.changes.clear()

    def before(self, requests: Mapping[str, Requests], reads: Iterable[str]) -> list[Dataflow]:
        """Before an epoch that asks `requests` (`reads`: every relation the followed
        ones depend on): drop the dataflows if it asks to change at least
        `Tuning.recompute_min_rows` rows of `reads` and `Tuning.recompute_ratio` times
        the rows they hold (the prior of adaptive commits); if it asks to change none,
        they may rest through the epoch, which cannot reach them (the ones returned:
        the live queries take them out of the engine and back, `before_epoch`)."""
        names = frozenset(reads)
        if not self.by_text or any(name.startswith("deltalog.") for name in names):
            return []  # (the engine's own relations change unasked)
        asked = sum(len(requests[name]) for name in names if name in requests)
        big = asked >= TUNING.recompute_min_rows
        if big and asked >= TUNING.recompute_ratio * self._base(names):
            self.close()
        return [] if asked else [follow.dataflow for follow in self.by_text.values()]

    def _base(self, names: Iterable[str]) -> int:
        inputs = self.engine.inputs
        return sum(inputs[name].size for name in names if name in inputs)

    def close(self) -> None:
        """Drop every dataflow (the watch reads the relations again next time)."""
        follows, self.by_text = list(self.by_text.values()), {}
        self.engine.retire(*(follow.dataflow for follow in follows))


def _full(stored: Stored, changes: Updates) -> list[np.ndarray] | None:
    """The columns of a relation's changed rows, as `touched_by` takes them: the
    query's columns where it left them free, its constants where it bound them (None
    if a constant has no stored value)."""
    n, free, columns = len(changes), iter(changes.columns), []
    for position in range(len(stored.types)):
        if position not in stored.fixed:
            columns.append(next(free))
            continue
        value = stored.encoded(position)
        if value is None:
            return None
        columns.append(np.full(n, value))
    return columns
