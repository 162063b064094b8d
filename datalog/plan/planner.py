"""The planner: the one way to plan a query (or a view) and lower it to operators.

Layer: datalog.plan. Imports the passes, the lowering and the views, each when it
is first used: a database makes its planner when it opens, and `import datalog`
should not load the whole planner before a query is planned (ADR 0066).

A `Planner` knows where it plans (the engine, the symbol table and the bound user
functors); everything a caller may choose is an `Options` value passed per query:
the join plan, to what magic sets specialize (a query's constants, a multi-tenant
dataflow's parameter relation, or nothing), sharing through views, one-shot
evaluation. Live queries, one-shot queries, `explain`, tenants, views and reads of
the past all plan through `build`; none changes the planner or the plan after the
fact (docs/adr/0051).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from datalog.plan.plan import Options, Plan

if TYPE_CHECKING:
    from datalog.eval.functors import FunctorBinding
    from datalog.eval.symbols import SymbolTable
    from datalog.lang.checks import CheckedProgram, CheckedQuery
    from datalog.plan.build import Lowering, QueriesPlan, QueryPlan
    from datalog.plan.magic import Specializations
    from datalog.plan.passes import Pass
    from datalog.plan.views import Views
    from differential.dataflow import Stream
    from differential.engine import Engine
    from differential.graph import Dataflow

# The passes' names, in order; lowering follows (`QueryPlan.stages`).
PASSES = ("magic sets", "normalize", "sharing", "strata", "choose join", "order joins")


class Planner:
    """Plans queries over one engine, symbol table and set of bound functors."""

    def __init__(
        self,
        engine: Engine,
        symbols: SymbolTable,
        functors: Mapping[str, FunctorBinding] | None = None,
    ) -> None:
        self.engine = engine
        self.symbols = symbols
        self.functors = functors if functors is not None else {}  # bound later too
        self.specializations: Specializations | None = None  # made when first planned

    def build(
        self,
        program: CheckedProgram,
        query: CheckedQuery,
        name: str,
        options: Options | None = None,
    ) -> QueryPlan:
        """The (not yet started) dataflow answering `query` over `program`."""
        from datalog.plan.build import QueryPlan

        start = Plan(name, program, query, options or Options())
        views = self._views(program)
        stages = self._passes(start, views)
        dataflow = self.engine.dataflow(name, start.options.one_shot)
        with self._retired_on_failure(dataflow):
            output, lowered = self._lowering(stages[-1], views).query(dataflow)
        return QueryPlan(dataflow, output, (*stages, lowered))

    def build_many(
        self,
        program: CheckedProgram,
        queries: Sequence[CheckedQuery],
        name: str,
        options: Options | None = None,
    ) -> QueriesPlan:
        """One (not yet started) dataflow answering each of `queries` over `program`,
        one output each: the strata they read are built once (a program's outputs,
        ADR 0061). Planned as one query of all their bodies, never specialized by
        magic sets (one query's constants would not restrict another's)."""
        from datalog.plan.build import QueriesPlan

        merged = replace(
            queries[0],
            bodies=tuple(b for q in queries for b in q.bodies),
            variable_types=tuple(t for q in queries for t in q.variable_types),
        )
        start = Plan(name, program, merged, replace(options or Options(), magic="off"))
        views = self._views(program)
        stages = self._passes(start, views)
        dataflow = self.engine.dataflow(name, start.options.one_shot)
        with self._retired_on_failure(dataflow):
            outputs, lowered = self._lowering(stages[-1], views).queries(dataflow, queries)
        return QueriesPlan(dataflow, outputs, (*stages, lowered))

    @contextmanager
    def _retired_on_failure(self, dataflow: Dataflow) -> Iterator[None]:
        """Lowering into `dataflow` imports shared arrangements as it goes: if it raises
        (an interrupt, a budget), the half-built dataflow is retired, releasing them,
        or its claims would hold their compaction back for good."""
        try:
            yield
        except BaseException:
            self.engine.retire(dataflow)
            raise

    def build_view(
        self, program: CheckedProgram, relation: str, options: Options, dataflow: Dataflow
    ) -> tuple[dict[str, Stream], Plan]:
        """Build into `dataflow` what computes derived `relation` (for a view), with
        the relations of its stratum: the streams by relation."""
        start = Plan(dataflow.name, program, None, options, relation=relation)
        views = self._views(program)
        stages = self._passes(start, views)
        return self._lowering(stages[-1], views).view(dataflow)

    def _passes(self, plan: Plan, views: Views) -> list[Plan]:
        """`plan` after each pass, in order (`PASSES`)."""
        from datalog.plan.passes import (
            choose_join,
            magic_sets,
            normalize,
            order_joins,
            sharing,
            strata,
        )

        if self.specializations is None:
            from datalog.plan.magic import Specializations

            self.specializations = Specializations()
        chain: list[Pass] = [
            magic_sets(self.specializations),
            normalize(self.functors),
            sharing(views),
            strata,
            choose_join(self.symbols),
            order_joins,
        ]
        stages = []
        for run in chain:
            plan = run(plan)
            stages.append(plan)
        return stages

    def _views(self, original: CheckedProgram) -> Views:
        from datalog.plan.views import Views

        def build(
            relation: str, options: Options, dataflow: Dataflow
        ) -> tuple[dict[str, Stream], Plan]:
            return self.build_view(original, relation, options, dataflow)

        return Views(self.engine, original, self.functors, build)

    def _lowering(self, plan: Plan, views: Views) -> Lowering:
        from datalog.plan.build import Lowering

        options = plan.options
        return Lowering(self.engine, self.symbols, plan, lambda read: views.resolve(read, options))
