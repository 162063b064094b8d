"""A database's explanations: `why`, `why_not`, `subscribe_why` and `explain`, behind
the `Database` methods of the same names.

Layer: datalog.db. Imports the live queries, the planner's explain printers and
(in functions) `datalog.db.provenance`, `datalog.db.whynot` and `datalog.db.whywatch`.

Each entry takes the database's lock (`Database` passes its parts in); reads never
write: nothing here advances the epoch or touches the log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from datalog.db.pacing import Clock, Pacing
from datalog.db.queries import LiveQueries
from datalog.eval.functors import FunctorBinding
from datalog.lang.ast import Pragma
from datalog.lang.checks import CheckedQuery, check_query, dependencies
from datalog.lang.errors import UnsupportedError
from datalog.plan.plan import JoinPlan
from differential.batch import Updates
from differential.budget import WorkLock
from differential.graph import Dataflow, Output
from differential.inputs import Requests
from differential.tuning import TUNING

if TYPE_CHECKING:
    from datalog.db.history import Past
    from datalog.db.provenance import Derivation
    from datalog.db.states import Looked, Reading
    from datalog.db.whynot import WhyNot
    from datalog.db.whywatch import WhyCallback, WhySubscription

# A query's answer (and its checked query), now or as of an epoch: `Database._answer`.
Answer = Callable[[str, JoinPlan, "int | None"], tuple[Updates, Any]]


# An explanation, the relations it depends on, and a why-not's lookups (`explanation`).
Explained = tuple["Derivation | WhyNot", frozenset[str], "Looked | None"]


class Explanations:
    """The explanations of one database, over its parts."""

    def __init__(
        self,
        lock: WorkLock,
        queries: LiveQueries,
        functors: Mapping[str, FunctorBinding],
        past: Callable[[], Past],
        answer: Answer,
        read_only: Callable[[str], AbstractContextManager[None]],
    ) -> None:
        self.lock, self.queries, self.functors = lock, queries, functors
        self.past, self.answer, self.read_only = past, answer, read_only

    def explain(
        self,
        key: str,
        checked: CheckedQuery,
        join_plan: JoinPlan,
        format: str,
        passes: bool,
        pragmas: Sequence[Pragma],
    ) -> str:
        """`Database.explain`: the plan of a query, built and dropped unstarted, printed."""
        from datalog.plan.dot import explain_graph
        from datalog.plan.explain import explain_passes, explain_text

        if passes and format != "text":
            raise UnsupportedError("explain(passes=True) prints text: use format='text'")
        built = self.queries.plan(checked, key, join_plan)
        try:
            plan = built.explained(graph=format != "text")
        finally:
            self.queries.engine.retire(built.dataflow)
        if format != "text":  # a Graphviz digraph, or an error naming the formats
            return explain_graph(format, plan)
        live = self.queries.by_key.get(key)
        served = self.queries.tenants.note(live) if live is not None else []
        served += self.queries.adaptive.note(live)
        if passes:
            return explain_passes((*built.stages[:-1], plan), served, pragmas)
        return explain_text(plan, served, pragmas)

    def why(self, fact: str, as_of: int | None) -> Derivation:
        from datalog.db.provenance import why

        with self.lock, self.read_only(fact):
            return why(self.past(), self.reading(as_of), fact, as_of)

    def why_not(self, fact: str, as_of: int | None, depth: int, size: int) -> WhyNot:
        from datalog.db.whynot import why_not

        with self.lock, self.read_only(fact):
            return why_not(self.reading(as_of), self.functors, fact, depth, size)

    def subscribe_why(
        self,
        fact: str,
        callback: WhyCallback,
        granularity: dict[str, float] | None,
        budget: float | None,
        clock: Clock,
    ) -> WhySubscription:
        from datalog.db.whywatch import WhySubscription, WhyWatch, wake_later

        with self.lock:
            self.queries.refuse_in_callback("subscribe")
            engine = self.queries.engine
            pacing = Pacing.of(granularity, engine.epoch, clock.now)
            sub = WhySubscription(fact, callback)
            watch = WhyWatch(sub, lambda: self.explanation(fact, follow=True), self.queries.calling,
                             lambda: self.lock.budget.limit(budget), pacing,
                             partial(self.unchanged, fact))  # fmt: skip
            first = watch.start(engine.epoch)
            if pacing is not None:
                pacing.wake = wake_later(clock, self.lock, lambda: engine.epoch, watch)
            sub.unsubscribe, sub.latest = self.unsubscribe_why, first
            self.queries.watches.append(watch)
            try:
                with self.queries.calling():
                    callback(first)
            except BaseException:  # no orphan: the caller never got a handle to it
                self.unsubscribe_why(sub)
                raise
            return sub

    def unsubscribe_why(self, sub: WhySubscription) -> None:
        with self.lock:
            sub.active = False
            from datalog.db.whywatch import WhyWatch

            watches = self.queries.watches
            for watch in watches:
                if isinstance(watch, WhyWatch) and watch.sub is sub:
                    watch.stop()
            watches[:] = [w for w in watches if getattr(w, "sub", None) is not sub]

    def explanation(self, fact: str, follow: bool = False) -> Explained:
        """`fact`'s explanation now (a proof, or why not), the relations it depends on,
        and for a why-not the lookups it made (`States`; a proof reads them whole).
        `follow`: a why-not reads each derived relation through a live dataflow it
        keeps (`datalog.db.follows`), so that later epochs are checked by their changes."""
        from datalog.db.follows import Follows
        from datalog.db.provenance import target, why
        from datalog.db.states import Looked
        from datalog.db.whynot import explained
        from datalog.lang.errors import FactHoldsError

        follow = follow and TUNING.why_follow
        follows = Follows(self.queries.engine, self.follow) if follow else None
        with self.read_only(fact):
            reading = self.reading(None)
            relation, _ = target(reading.checked, fact, "subscribe_why")
            reads = frozenset(dependencies(reading.checked, [relation]))
            read = reading if follows is None else replace(reading, answer=follows.answer)
            try:
                absent, states = explained(read, self.functors, fact)
                return absent, reads, Looked(states, dict(self.functors), follows)
            except FactHoldsError:
                if follows is not None:
                    follows.close()
                return why(self.past(), reading, fact), reads, None
            except BaseException:
                if follows is not None:
                    follows.close()
                raise

    def follow(self, text: str) -> tuple[Dataflow, Output, Updates]:
        """A live dataflow answering query `text` (reading views, making none), started
        outside every live query: the dataflow, its output and its first answer."""
        from datalog.lang.parser import parse_query

        checked = check_query(parse_query(text), self.queries.program.checked.schema)
        built = self.queries.plan(checked, text, "auto")
        first = built.start(self.queries.engine)  # (dropped if it fails)
        return built.dataflow, built.output, first

    def unchanged(self, fact: str, looked: Looked, requests: Mapping[str, Requests]) -> bool | None:
        """Whether the lookups of `fact`'s last why-not find what they found, now that
        an epoch wrote `requests`, with the same functors (`datalog.db.states.unchanged`)."""
        from datalog.db.states import unchanged

        bound = looked.functors
        if bound.keys() != self.functors.keys() or any(
            self.functors[name] is not binding for name, binding in bound.items()
        ):
            return False
        with self.read_only(fact):
            return unchanged(looked.states, self.reading(None), requests, looked.follows)

    def reading(self, as_of: int | None) -> Reading:
        """How explanations read the relations at the end of epoch `as_of` (now: None)."""
        from datalog.db.states import Reading

        view = self.past().view(as_of)
        return Reading(
            view.epoch,
            view.checked,
            lambda text: self.answer(text, "auto", as_of)[0],
            view.state,
            self.queries.symbols,
        )
