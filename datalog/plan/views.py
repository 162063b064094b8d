"""Views: derived relations computed once and shared by the queries that read them.

Layer: datalog.plan. Imports the language, `closures`, `explain` and the plan values; it
builds a view through the planner's `build_view` (a callback: the planner imports this).

A view is an engine input that one dataflow computes (`Engine.create_view`) and
every reader imports through shared arrangements, as it imports a base relation.
A query reads a derived relation from its view when there is one. A live query
makes one when another live query computes the same relation itself (the
database then rebuilds that one to read the view too): a relation only one query
reads costs no view. A view's dataflow computes the relation's stratum and reads
the relations below it the same way. (What a view computes itself is not offered
to later queries: a relation computed inside a view and by a query is computed
twice.)

A view is keyed by everything that decides its contents and how they are
computed: the relation, the rules and subsumptive clauses of every relation it
depends on, their column types and input semantics, the join plan and the
functions bound to the functors those rules call. Queries whose plans agree on a
relation therefore share its view; a definition that changes its rules makes new
views for the queries built after it, and the old view goes with its last reader.
Relations that depend on a late input (`deltalog.*`) are not shared. A mutually
recursive stratum is computed as one whole, so its relations are shared as one
group: the view of one is made with a view of each other (one dataflow computes
them, `Engine.create_view`), and a reader finds each of them in a view.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from datalog.lang.strata import reads
from datalog.plan.closures import Closures
from datalog.plan.explain import plan_notes
from datalog.plan.plan import Options, Plan, Share, ViewRead

if TYPE_CHECKING:
    from datalog.eval.functors import FunctorBinding
    from datalog.lang.checks import CheckedProgram
    from differential.dataflow import Stream
    from differential.engine import Engine
    from differential.graph import Dataflow, View

__all__ = ["BuildView", "Share", "Views"]

# Builds into the dataflow what computes the relation and the others of its stratum
# (`Planner.build_view`): their streams by relation.
BuildView = Callable[[str, Options, "Dataflow"], tuple[dict[str, "Stream"], Plan]]


class Views:
    """Which derived relations a dataflow reads from views, for one plan: decided by
    the sharing pass (`read`), found or made by lowering (`resolve`)."""

    def __init__(
        self,
        engine: Engine,
        program: CheckedProgram,
        functors: Mapping[str, FunctorBinding],
        build: BuildView,
    ) -> None:
        self.engine = engine
        self.program = program  # before specialization and binding: what views are of
        self.functors = functors
        self.build = build
        self._closures: Closures | None = None

    def read(self, relations: Iterable[str], options: Options) -> dict[str, ViewRead]:
        """Relation -> view read for the shared derived relations reached from
        `relations` through relations computed here: the views that exist, and (to
        be made by `resolve`) those another live query computes itself, if asked."""
        share, others = options.share, options.others
        if share == "off" or (not self.engine.views and not (share == "create" and others)):
            return {}  # nothing to read or to share (the usual case: no key computed)
        graph = reads(self.program.rules)
        found: dict[str, ViewRead] = {}
        seen: set[str] = set()
        pending = sorted(relations)
        while pending:
            relation = pending.pop()
            if relation in seen:
                continue
            seen.add(relation)
            view = self._view(relation, options) if self._shareable(relation) else None
            if view is None:
                pending.extend(sorted(graph.get(relation, ())))
            else:
                found[relation] = view
        return found

    def inlined(
        self, program: CheckedProgram, relations: Iterable[str], views: Iterable[str]
    ) -> set[str]:
        """`relations` and what they read in `program`, transitively, except through
        `views`: what this dataflow computes itself."""
        graph = reads(program.rules)
        views = set(views)
        found: set[str] = set()
        pending = list(relations)
        while pending:
            relation = pending.pop()
            if relation not in found and relation not in views:
                found.add(relation)
                pending.extend(graph.get(relation, ()))
        return found

    def keys(self, relations: Iterable[str], join_plan: str) -> set[Hashable]:
        """The view keys of the shareable derived relations among `relations`."""
        return {self.key(r, join_plan) for r in relations if self._shareable(r)}

    def _shareable(self, relation: str) -> bool:
        closures = self.closures()
        stratum = closures.stratum_of.get(relation)
        if stratum is None:
            return False  # a base relation: already shared by the engine
        return not closures.late(relation, self._late())

    def closures(self) -> Closures:
        """The program's closures, summarized on first use (one pass over its rules)."""
        if self._closures is None:
            self._closures = Closures(self.program, self._late())
        return self._closures

    def _late(self) -> set[str]:
        return {name for name, found in self.engine.inputs.items() if found.late}

    def _view(self, relation: str, options: Options) -> ViewRead | None:
        key = self.key(relation, options.join_plan)
        found = self.engine.view(key)
        if found is not None:
            return ViewRead(relation, key, found.input.name, tuple(found.notes))
        if options.share == "create" and key in options.others:
            return ViewRead(relation, key)  # made by `resolve`
        return None

    def resolve(self, read: ViewRead, options: Options) -> ViewRead:
        """`read` with its view's input and notes: the view, made if it is not yet."""
        found = self.engine.view(read.key) or self._create(read.relation, read.key, options)
        return replace(read, view=found.input.name, notes=tuple(found.notes))

    def _create(self, relation: str, key: Hashable, options: Options) -> View:
        """The view of `relation`, made with a view of each other relation of its
        stratum (one group: a mutually recursive stratum is computed as one whole)."""
        dataflow = self.engine.dataflow(self._name(relation, options.join_plan))
        try:
            options = replace(options, magic="off")  # a view is never specialized
            streams, plan = self.build(relation, options, dataflow)
            notes = [*plan_notes(plan), "dataflow:", *(f"  {op}" for op in dataflow.describe())]
            names = {r: self._name(r, options.join_plan) for r in sorted(streams)}
            parts = [
                (self.key(r, options.join_plan), names[r], dataflow.capture(streams[r], names[r]))
                for r in names
            ]
            self.engine.create_view(dataflow, parts, notes)
        except BaseException:
            self.engine.retire(dataflow)  # releases what it imported, and unread views
            raise
        found = self.engine.view(key)
        assert found is not None
        return found

    def _name(self, relation: str, plan: str) -> str:
        base = f"{relation} [view]" if plan == "auto" else f"{relation} [view, plan={plan}]"
        name, n = base, 1
        while name in self.engine.inputs:
            n += 1
            name = f"{base} {n}"
        return name

    def key(self, relation: str, join_plan: str) -> Hashable:
        """What decides the view of `relation` (module docstring): the relation, the
        join plan, the digest of its closure and the functions bound to the functors
        that closure calls (`datalog.plan.closures`)."""
        closures = self.closures()
        called = closures.functors(relation)
        bound = sorted((n, f) for n, f in self.functors.items() if n in called)
        return (relation, join_plan, closures.digest(relation), tuple(bound))
