"""Lower a plan to operators: the one module that builds a query's dataflow.

Layer: datalog.plan. Imports `differential`, the planner's body compiler and the plan.

Lazy synthesis (DESIGN §6): nothing runs at `define`. The passes
(`datalog.plan.passes`) decided what to compute: `Lowering` builds the strata of
`Plan.strata` in evaluation order, each relation as the distinct union of the
facts transactions inserted into it and what its rules derive, reading the
relations of `Plan.views` from their shared views (docs/adr/0026). A recursive
stratum becomes one iteration scope with a variable per relation (mutual
recursion); everything else lives in the root scope. The answer is the distinct
projection of the query's bodies onto its answer variables. Each body is built as
the join passes ordered its steps (`BodyPlan.order`, docs/adr/0058), and the steps
as built (with a delta query's pipelines) are recorded in the plan it returns
(docs/adr/0051).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from datalog.eval.expressions import DTYPES
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import Atom, ColumnType, Comparison, Const, Literal, Negation, Rule, Var
from datalog.lang.checks import CheckedProgram, CheckedQuery
from datalog.plan.binding import Binding
from datalog.plan.body import BodyCompiler
from datalog.plan.dot import graph_of
from datalog.plan.plan import (
    BodyPlan,
    Plan,
    RelationPlan,
    SetJoin,
    Step,
    StratumPlan,
    ViewRead,
)
from datalog.plan.sources import Sources
from datalog.plan.subsume import subsume
from differential.batch import Updates
from differential.batch import concat as concat_updates
from differential.dataflow import Stream
from differential.engine import Engine
from differential.graph import Dataflow, Output
from differential.operators.iterate import Subscope, Variable
from differential.operators.linear import concat, leave, project


@dataclass
class QueryPlan:
    """A built (not yet started) dataflow answering one query, and its plan after
    each pass (the last one lowered)."""

    dataflow: Dataflow
    output: Output
    stages: tuple[Plan, ...]

    @property
    def plan(self) -> Plan:
        return self.stages[-1]

    @property
    def answer_vars(self) -> tuple[str, ...]:
        return self.plan.answer_vars

    @property
    def inlined(self) -> frozenset[Hashable]:
        """The view keys of the shareable derived relations it computes itself."""
        return self.plan.inlined

    def explained(self, graph: bool = False) -> Plan:
        """The lowered plan with the dataflow's operators as `explain` prints them
        (and their `graph`, for `format="dot"`): read from the built dataflow on
        demand only."""
        operators = tuple(self.dataflow.describe())
        drawn = graph_of(self.dataflow) if graph else None
        return replace(self.plan, operators=operators, graph=drawn)

    def start(self, engine: Engine) -> Updates:
        """Start the dataflow over the current state and return what its output sent
        then (the answer so far); the listeners added later see every epoch after.
        If starting fails, the dataflow is dropped (it holds back no compaction)."""
        settle = not self.plan.options.one_shot  # a live one's first commit must not catch up
        return start_outputs(engine, self.dataflow, [self.output], settle)[0]


@dataclass
class QueriesPlan:
    """A built (not yet started) dataflow answering several queries, one output
    each, over the strata they read built once (`Planner.build_many`)."""

    dataflow: Dataflow
    outputs: list[Output]
    stages: tuple[Plan, ...]

    def start(self, engine: Engine) -> list[Updates]:
        """Start the dataflow; each output's answer, in order (as `QueryPlan.start`)."""
        return start_outputs(engine, self.dataflow, self.outputs)


def start_outputs(
    engine: Engine, dataflow: Dataflow, outputs: Sequence[Output], settle: bool = False
) -> list[Updates]:
    """Start `dataflow` (and `settle` it: arrange what it deferred, ADR 0057) and
    return what each of `outputs` sent then; if starting fails, the dataflow is
    dropped (it holds back no compaction)."""
    captured: list[list[Updates]] = [[] for _ in outputs]
    for output, into in zip(outputs, captured, strict=True):
        output.listeners.append(_appender(into))
    try:
        engine.start(dataflow)
        if settle:
            dataflow.settle()
    except BaseException:
        engine.retire(dataflow)
        raise
    finally:
        for output in outputs:
            output.listeners.clear()
    answers = []
    for output, sent in zip(outputs, captured, strict=True):
        dtypes = output.capture.stream.dtypes
        answers.append(concat_updates([Updates.empty(len(dtypes), 1, dtypes), *sent]))
    return answers


def _appender(into: list[Updates]) -> Callable[[Updates, int], None]:
    return lambda updates, _epoch: into.append(updates)


Resolve = Callable[[ViewRead], ViewRead]  # a view read, its view found or made


class Lowering:
    """Builds the operators of one plan (the passes all run) into a dataflow."""

    def __init__(self, engine: Engine, symbols: SymbolTable, plan: Plan, resolve: Resolve) -> None:
        self.engine = engine
        self.symbols = symbols
        self.plan = plan
        self.program: CheckedProgram = plan.program
        self.one_shot = plan.options.one_shot
        self.inputs = plan.specialized.inputs if plan.specialized is not None else {}
        self.resolve = resolve

    def query(self, dataflow: Dataflow) -> tuple[Output, Plan]:
        """The query's answer, captured in `dataflow`, and the lowered plan."""
        query = self.plan.query
        assert query is not None
        root, plan = self._lower_strata(dataflow)
        output, bodies = self._answer(root, query, plan.bodies, plan.name)
        lowered = replace(plan, bodies=tuple(bodies), shared=tuple(root.shared))
        return output, ran_lowering(lowered)

    def queries(
        self, dataflow: Dataflow, parts: Sequence[CheckedQuery]
    ) -> tuple[list[Output], Plan]:
        """Each of `parts`' answers captured in `dataflow` over strata built once: the
        plan's query is their bodies in order (`Planner.build_many`)."""
        query = self.plan.query
        assert query is not None
        root, plan = self._lower_strata(dataflow)
        outputs: list[Output] = []
        bodies: list[BodyPlan] = []
        start = 0
        for part in parts:  # the bodies as the passes left them (functors bound)
            end = start + len(part.bodies)
            bound = replace(part, bodies=query.bodies[start:end])
            name = f"{plan.name}[{len(outputs)}]"
            output, done = self._answer(root, bound, plan.bodies[start:end], name)
            outputs.append(output)
            bodies.extend(done)
            start = end
        lowered = replace(plan, bodies=tuple(bodies), shared=tuple(root.shared))
        return outputs, ran_lowering(lowered)

    def _answer(
        self, root: Sources, query: CheckedQuery, planned: Sequence[BodyPlan], name: str
    ) -> tuple[Output, list[BodyPlan]]:
        """The distinct projection of `query`'s bodies (as `planned`) onto its answer
        variables, captured as `name`, and the bodies as lowered."""
        answers, bodies = [], []
        for body in planned:
            binding, done = self._body(root, body)
            picked = Binding(
                project(binding.stream, [binding.index(v) for v in query.answer_vars]),
                query.answer_vars,
            )
            answers.append(picked)
            bodies.append(done)
        if len(answers) == 1 and self._is_set_join(query.bodies[0], query.answer_vars):
            result = answers[0]  # already a set: distinct would only cost an arrangement
        else:
            union = Binding(concat([a.stream for a in answers]), query.answer_vars)
            result = BodyCompiler(root, {}, self.symbols, []).distinct(union)
        return root.dataflow.capture(result.stream, name), bodies

    def view(self, dataflow: Dataflow) -> tuple[dict[str, Stream], Plan]:
        """What computes the view's relation, in `dataflow`, with the relations of its
        stratum (one whole, when mutually recursive), and the lowered plan."""
        root, plan = self._lower_strata(dataflow)
        lowered = replace(plan, shared=tuple(root.shared))
        (stratum,) = [s for s in plan.strata if plan.relation in s.relations]
        return {r: root.streams[r] for r in stratum.relations}, ran_lowering(lowered)

    def _lower_strata(self, dataflow: Dataflow) -> tuple[Sources, Plan]:
        """The root scope with the plan's views read and its strata built."""
        root = Sources(dataflow, dataflow.root, self.program.schema)
        views = tuple(self.resolve(read) for read in self.plan.views)
        root.views = {read.relation: read.view for read in views}
        strata = tuple(self._stratum(root, stratum) for stratum in self.plan.strata)
        return root, replace(self.plan, views=views, strata=strata)

    def _is_set_join(self, body: tuple[Literal, ...], answer: Collection[str]) -> bool:
        """Atoms of set relations over variables and constants, filtered by
        negations and comparisons, whose every variable is in the answer (a
        query's answer variables, or those a rule's head keeps).

        Each answer row is then one assignment of the body's variables with
        multiplicity one (a product of ones): already a set, so a distinct
        would only cost an arrangement of the whole answer.
        """
        atoms = [lit for lit in body if isinstance(lit, Atom)]
        filters = all(isinstance(lit, Atom | Negation | Comparison) for lit in body)
        simple = all(isinstance(a, Var | Const) for atom in atoms for a in atom.args)
        sets = all(self.program.schema[a.name].semantics != "multiset" for a in atoms)
        bound = {a.name for atom in atoms for a in atom.args if isinstance(a, Var)}
        return bool(atoms) and filters and simple and sets and bound <= set(answer)

    def _stratum(self, root: Sources, stratum: StratumPlan) -> StratumPlan:
        relations = stratum.relations
        lowered: list[RelationPlan] = []
        if not stratum.recursive:
            for rel in relations:
                stream, done = self._relation(root, rel, stratum)
                root.define(rel, stream)
                lowered.append(done)
            return StratumPlan(relations, False, stratum.rules, tuple(lowered))
        scope = Subscope(root.scope, f"iterate{list(relations)}")
        inner = Sources(root.dataflow, scope.inner, root.schema, root)
        variables = {rel: Variable(scope.inner, self._dtypes(rel), rel) for rel in relations}
        for rel, var in variables.items():
            inner.define(rel, var.output)
        results = {}
        # With subsumption the stratum is inflationary, as Soufflé's: each round
        # also sees the tuples of the last one (the variables), and only
        # subsumption removes any (ADR 0017).
        inflationary = bool(set(relations) & self.program.dominances.keys())
        with root.scope.inserting_before(scope):
            for rel, var in variables.items():
                own = var.output if inflationary else None
                results[rel], done = self._relation(inner, rel, stratum, own)
                lowered.append(done)
                var.set(results[rel])
        for rel, result in results.items():
            root.define(rel, leave(result))
        return StratumPlan(relations, True, stratum.rules, tuple(lowered))

    def _relation(
        self, sources: Sources, rel: str, stratum: StratumPlan, own: Stream | None = None
    ) -> tuple[Stream, RelationPlan]:
        """The distinct union of `rel`'s inserted facts and its rules' heads (and of
        `own`, its variable, if given); its undominated tuples if it is subsumed."""
        kinds = self.program.schema.types(rel)
        parts: list[Stream] = [] if own is None else [own]
        source = self.inputs.get(rel, rel)
        if source in self.engine.inputs and not (self.one_shot and sources.size(source) == 0):
            inserted = sources.input_collection(source)  # magic relations have no input
            # a nullary relation's input has one constant column; the relation has none
            parts.append(inserted if kinds else project(inserted, []))
        (planned,) = [r for r in stratum.lowered if r.relation == rel]
        rules = [_rule(body) for body in planned.rules]
        bodies = []
        for body, rule in zip(planned.rules, rules, strict=True):
            binding, done = self._body(sources, body)
            compiler = BodyCompiler(sources, body.types, self.symbols, [])
            parts.append(compiler.head(binding, rule.head.args, kinds))
            bodies.append(done)
        lowered = tuple(bodies)
        dominances = self.program.dominances.get(rel)
        if dominances and kinds:
            finish: list[Step] = []
            subsumed = subsume(concat(parts), dominances, self.symbols, finish)
            return subsumed, RelationPlan(rel, lowered, tuple(finish))
        if len(parts) == 1 and self._derives_set(rules, kinds, stratum):
            return parts[0], RelationPlan(rel, lowered, (SetJoin(rel),))
        union = Binding(concat(parts), tuple(f"_c{i}" for i in range(len(kinds))))
        distinct = BodyCompiler(sources, {}, self.symbols, []).distinct(union)
        return distinct.stream, RelationPlan(rel, lowered)

    def _body(self, sources: Sources, body: BodyPlan) -> tuple[Binding, BodyPlan]:
        """The body's binding, built as `order_joins` ordered it, and its steps."""
        steps: list[Step] = []
        binding = BodyCompiler(sources, body.types, self.symbols, steps).compile(body.order)
        return binding, replace(body, steps=tuple(steps))

    def _derives_set(
        self, rules: Sequence[Rule], kinds: Sequence[ColumnType], stratum: StratumPlan
    ) -> bool:
        """One non-recursive rule whose body is a set join its head keeps whole."""
        if len(rules) != 1 or stratum.recursive:
            return False
        return self._is_set_join(rules[0].body, _kept_vars(rules[0], kinds, self.program))

    def _dtypes(self, rel: str) -> Sequence[np.dtype]:
        """The relation's column types (none for a nullary relation)."""
        return [np.dtype(DTYPES[t]) for t in self.program.schema.types(rel)]


def _kept_vars(rule: Rule, kinds: Sequence[ColumnType], program: CheckedProgram) -> set[str]:
    """The variables a rule's head keeps as they are (not computed on, not cast)."""
    types = program.types_of(rule)
    args = zip(rule.head.args, kinds, strict=True)
    return {a.name for a, k in args if isinstance(a, Var) and types.get(a.name) == k}


def _rule(body: BodyPlan) -> Rule:
    assert isinstance(body.source, Rule)
    return body.source


def ran_lowering(plan: Plan) -> Plan:
    return replace(plan, passes=(*plan.passes, "lowering"))
