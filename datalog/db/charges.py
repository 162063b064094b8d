"""What a live dataflow is charged for its work: its own seconds and its share of the
views it reads (docs/adr/0071).

Layer: datalog (API). Imports `differential.engine` only; the adaptive commits'
model (`datalog.db.adaptive`) measures each live dataflow through it.

A view (a derived relation computed once and shared, docs/adr/0026) runs every
epoch before its readers, in a dataflow of its own, so the seconds a reader spends
(`Dataflow.spent`) do not hold the view's work. A reader is charged its share of
each view it reads: the seconds the view's dataflow spent, divided among the
dataflows that read it (live ones and other views' alike), and through a view that
reads another view, that view's share of the other, so that a view's work is
counted once across all its readers. A view built with its reader (a recomputation
that dropped the view it alone read, and made it again) counts all it spent, its
build, in the reader's share.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field

from differential.engine import Engine
from differential.graph import Dataflow

__all__ = ["Sharing", "Spent", "charged", "spent"]


@dataclass
class Spent:
    """What one dataflow and the views it reads had spent at some point: its own
    seconds, and each view dataflow's (held weakly), by identity."""

    own: float
    views: dict[int, tuple[weakref.ref[Dataflow], float]] = field(default_factory=dict)

    def before(self, flow: Dataflow) -> float | None:
        """What view dataflow `flow` had spent then, or None if it was not read then."""
        found = self.views.get(id(flow))
        return found[1] if found is not None and found[0]() is flow else None


class Sharing:
    """Which view dataflow owns each shared arrangement and how many dataflows read
    each view, at one state of the engine: read once for all the dataflows a commit
    weighs (`spent`, `charged`), not once per dataflow, which was quadratic in the
    live dataflows. Read at first use; a holder makes a new one when the engine's
    dataflows or views change (`Adaptive.adapt` after a retire)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._maps: tuple[dict[int, Dataflow], dict[int, int]] | None = None

    def shares(self, df: Dataflow) -> dict[int, tuple[Dataflow, float]]:
        """The view dataflows `df` reads, directly or through other views, each with
        the fraction of its work charged to `df` (module docstring). Empty without
        views."""
        if not self.engine.views:
            return {}
        owner, readers = self._read()
        found: dict[int, tuple[Dataflow, float]] = {}
        waiting = [(df, 1.0)]
        while waiting:
            flow, fraction = waiting.pop()
            for view in _views_read(flow, owner):
                share = fraction / max(readers.get(id(view), 1), 1)
                had = found.get(id(view), (view, 0.0))[1]
                found[id(view)] = (view, had + share)
                waiting.append((view, share))
        return found

    def _read(self) -> tuple[dict[int, Dataflow], dict[int, int]]:
        if self._maps is None:
            engine = self.engine
            owner = {
                id(arrangement): view.dataflow
                for view in engine.views
                for arrangement in view.input.arrangements.values()
            }
            readers: dict[int, int] = {}
            for flow in [*engine.dataflows, *engine.view_flows()]:
                for read in _views_read(flow, owner):
                    readers[id(read)] = readers.get(id(read), 0) + 1
            self._maps = owner, readers
        return self._maps


def _views_read(flow: Dataflow, owner: dict[int, Dataflow]) -> Iterable[Dataflow]:
    """The view dataflows `flow` imports an arrangement of, each once (not itself)."""
    flows = [owner[id(op.shared)] for op in flow.imports if id(op.shared) in owner]
    seen = {id(view): view for view in flows}
    seen.pop(id(flow), None)
    return seen.values()


def spent(sharing: Sharing, df: Dataflow) -> Spent:
    """What `df` and the views it reads have spent so far."""
    views = {key: (weakref.ref(view), view.spent) for key, (view, _) in sharing.shares(df).items()}
    return Spent(df.spent, views)


def charged(sharing: Sharing, df: Dataflow, since: Spent | None) -> float:
    """The seconds charged to `df` since `since` (None: since it was built; for a
    rebuild, what the dataflow it replaced had spent with `own` 0): what it spent
    itself, and its share of what each view it reads spent since then (all of it for
    a view made with `df` or after it, nothing for an older view not read then)."""
    own = df.spent if since is None else df.spent - since.own
    total = max(own, 0.0)
    for view, share in sharing.shares(df).values():
        before = None if since is None else since.before(view)
        if before is not None:
            total += share * max(view.spent - before, 0.0)
        elif view.start >= df.start:
            total += share * view.spent
    return total
