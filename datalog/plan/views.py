"""Views: derived relations computed once and shared by the queries that read them.

Layer: datalog (planner). Imports the datalog language and `differential.engine`.

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
Relations that depend on a late input (`deltalog.*`) are not shared, nor are
mutually recursive ones (a stratum of several relations is computed as one
whole: a reader of one of them would compute the stratum again around the view).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from datalog.lang.strata import reads
from datalog.plan.closures import Closures

if TYPE_CHECKING:
    from datalog.eval.functors import FunctorBinding
    from datalog.lang.checks import CheckedProgram
    from differential.dataflow import Stream
    from differential.engine import Dataflow, Engine, View

# "create": read derived relations from views, making one where another live query
# computes the relation itself (live queries and their views); "reuse": read the
# views that exist, compute the rest (one-shot queries); "off": none (specialized).
Share = Literal["create", "reuse", "off"]


class Planning(Protocol):
    """What `Views` reads of the planner that owns it (`datalog.plan.build.Planner`):
    a protocol, so that the planner imports this module and not the reverse."""

    @property
    def engine(self) -> Engine: ...

    @property
    def original(self) -> CheckedProgram: ...

    @property
    def program(self) -> CheckedProgram: ...

    @property
    def share(self) -> Share: ...

    @property
    def others(self) -> Collection[Hashable]: ...

    @property
    def join_plan(self) -> str: ...

    @property
    def functors(self) -> Mapping[str, FunctorBinding]: ...

    @property
    def notes(self) -> list[str]: ...

    def view_planner(self) -> Planning: ...

    def build_view(self, relation: str, dataflow: Dataflow) -> Stream: ...


class Views:
    """Which derived relations a dataflow reads from views, for one planner."""

    def __init__(self, planner: Planning) -> None:
        self.planner = planner
        self.engine = planner.engine
        self.program = planner.original
        self.notes: dict[str, Sequence[str]] = {}  # view name -> how it was planned
        self._closures: Closures | None = None

    def read(self, relations: Iterable[str]) -> dict[str, str]:
        """Relation -> view input for the shared derived relations reached from
        `relations` through relations computed here (creating views if asked)."""
        if not self.engine.views and not (self.planner.share == "create" and self.planner.others):
            return {}  # nothing to read or to share (the usual case: no key computed)
        graph = reads(self.program.rules)
        found: dict[str, str] = {}
        seen: set[str] = set()
        pending = sorted(relations)
        while pending:
            relation = pending.pop()
            if relation in seen:
                continue
            seen.add(relation)
            view = self._view(relation) if self._shareable(relation) else None
            if view is None:
                pending.extend(sorted(graph.get(relation, ())))
            else:
                found[relation] = view
        return found

    def inlined(self, relations: Iterable[str], views: dict[str, str]) -> set[str]:
        """`relations` and what they read, transitively, except through `views`: what
        this dataflow computes itself."""
        graph = reads(self.planner.program.rules)
        found: set[str] = set()
        pending = list(relations)
        while pending:
            relation = pending.pop()
            if relation not in found and relation not in views:
                found.add(relation)
                pending.extend(graph.get(relation, ()))
        return found

    def keys(self, relations: Iterable[str]) -> set[Hashable]:
        """The view keys of the shareable derived relations among `relations`."""
        return {self.key(r) for r in relations if self._shareable(r)}

    def _shareable(self, relation: str) -> bool:
        closures = self.closures()
        stratum = closures.stratum_of.get(relation)
        if stratum is None:
            return False  # a base relation: already shared by the engine
        if len(stratum.relations) > 1:
            return False  # mutual recursion: its stratum is computed as one whole
        return not closures.late(relation, self._late())

    def closures(self) -> Closures:
        """The program's closures, summarized on first use (one pass over its rules)."""
        if self._closures is None:
            self._closures = Closures(self.program, self._late())
        return self._closures

    def _late(self) -> set[str]:
        return {name for name, found in self.engine.inputs.items() if found.late}

    def _view(self, relation: str) -> str | None:
        key = self.key(relation)
        found = self.engine.view(key)
        if found is None and self.planner.share == "create" and key in self.planner.others:
            found = self._create(relation, key)
        if found is None:
            return None
        self.notes[found.input.name] = found.notes
        return found.input.name

    def _create(self, relation: str, key: Hashable) -> View:
        name = self._name(relation)
        dataflow = self.engine.dataflow(name)
        try:
            planner = self.planner.view_planner()
            stream = planner.build_view(relation, dataflow)
            notes = [*planner.notes, "dataflow:", *(f"  {op}" for op in dataflow.describe())]
            output = dataflow.capture(stream, name)
            self.engine.create_view(key, name, dataflow, output, notes)
        except BaseException:
            self.engine.retire(dataflow)  # releases what it imported, and unread views
            raise
        found = self.engine.view(key)
        assert found is not None
        return found

    def _name(self, relation: str) -> str:
        plan = self.planner.join_plan
        base = f"{relation} [view]" if plan == "auto" else f"{relation} [view, plan={plan}]"
        name, n = base, 1
        while name in self.engine.inputs:
            n += 1
            name = f"{base} {n}"
        return name

    def key(self, relation: str) -> Hashable:
        """What decides the view of `relation` (module docstring): the relation, the
        join plan, the digest of its closure and the functions bound to the functors
        that closure calls (`datalog.plan.closures`)."""
        closures = self.closures()
        called = closures.functors(relation)
        bound = sorted((n, f) for n, f in self.planner.functors.items() if n in called)
        return (relation, self.planner.join_plan, closures.digest(relation), tuple(bound))
