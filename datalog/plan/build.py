"""Synthesize the dataflow of one query from the strata it depends on.

Layer: datalog (planner). Imports `differential` and the datalog language.

Lazy synthesis (DESIGN §6): nothing runs at `define`. For a query, the
relations it reads are closed under dependency; their strata are built in
evaluation order, each relation as the distinct union of the facts
transactions inserted into it and what its rules derive. A recursive stratum
becomes one iteration scope with a variable per relation (mutual recursion);
everything else lives in the root scope. The answer is the distinct
projection of the query's bodies onto its answer variables.

Shared derived relations (`share`, docs/adr/0026): a query reads a derived
relation from a view (an engine input that one dataflow computes and every
reader imports through shared arrangements, as a base relation's;
`datalog.plan.views`) when one exists, and a live query makes one when another
live query computes the same relation itself. Specialized (magic-set) plans are
query-specific and share nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count as counter

import numpy as np

from datalog.eval.expressions import DTYPES
from datalog.eval.functors import FunctorBinding, bind_program, bind_query
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import Atom, ColumnType, Comparison, Const, Literal, Negation, Rule, Var
from datalog.lang.checks import CheckedProgram, CheckedQuery
from datalog.lang.passes.variables import nodes
from datalog.lang.pretty import format_body, format_rule
from datalog.lang.strata import Stratum, reads
from datalog.plan.binding import Binding
from datalog.plan.body import BodyCompiler
from datalog.plan.magic import specialize
from datalog.plan.sources import Sources
from datalog.plan.subsume import subsume
from datalog.plan.views import Share, Views
from datalog.plan.wcoj import JoinPlan
from differential.batch import Updates
from differential.batch import concat as concat_updates
from differential.dataflow import Stream
from differential.engine import Dataflow, Engine, Output
from differential.operators.iterate import Subscope, Variable
from differential.operators.linear import concat, leave, project


@dataclass
class QueryPlan:
    """A built (not yet started) dataflow answering one query."""

    dataflow: Dataflow
    output: Output
    answer_vars: tuple[str, ...]
    notes: list[str] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)
    # The view keys of the shareable derived relations it computes itself.
    inlined: frozenset[Hashable] = frozenset()

    def start(self, engine: Engine) -> Updates:
        """Start the dataflow over the current state and return what its output sent
        then (the answer so far); the listeners added later see every epoch after.
        If starting fails, the dataflow is dropped (it holds back no compaction)."""
        captured: list[Updates] = []
        self.output.listeners.append(lambda u, _e: captured.append(u))
        try:
            engine.start(self.dataflow)
        except BaseException:
            engine.retire(self.dataflow)
            raise
        finally:
            self.output.listeners.clear()
        dtypes = self.output.capture.stream.dtypes
        return concat_updates([Updates.empty(len(dtypes), 1, dtypes), *captured])


class Planner:
    """Builds the dataflow for one query over one checked program."""

    def __init__(
        self,
        engine: Engine,
        program: CheckedProgram,
        symbols: SymbolTable,
        join_plan: JoinPlan = "auto",
        specialize: bool = True,
        functors: Mapping[str, FunctorBinding] | None = None,
        share: Share = "off",
        others: Collection[Hashable] = (),
        one_shot: bool = False,
    ) -> None:
        self.join_plan: JoinPlan = join_plan
        self.share: Share = share
        self.others = others  # view keys other live dataflows compute themselves
        self.inlined: set[Hashable] = set()
        self.original = program  # before specialization and binding: what views are of
        # The dataflow runs once over the inputs as they are now and is dropped:
        # an input empty now contributes nothing, ever (ADR 0028).
        self.one_shot = one_shot
        self.functors = functors or {}
        self.specialize = specialize
        self.inputs: dict[str, str] = {}  # adorned copy -> the relation whose facts it reads
        self.engine = engine
        self.program = program
        self.symbols = symbols
        self.fresh = counter()
        self.notes: list[str] = []

    def build(self, query: CheckedQuery, name: str) -> QueryPlan:
        specialized = specialize(self.program, query) if self.specialize else None
        if specialized is not None:
            self.program, query = specialized.program, specialized.query
            self.inputs = specialized.inputs
            self.share = "off"  # the specialized relations are this query's own
            self.notes.append("specialized to the query's constants (magic sets)")
            self.notes += [f"  {note}" for note in specialized.notes]
        query = bind_query(query, self.functors)  # user functors: the functions bound now
        self.program = bind_program(self.program, self.functors, relations_read(query))
        dataflow = self.engine.dataflow(name)
        root = Sources(dataflow, dataflow.root, self.program.schema)
        self._build_needed(root, relations_read(query))
        answers = []
        for body, types in zip(query.bodies, query.variable_types, strict=True):
            self.notes.append(f"query body: {_show(body)}")
            compiler = BodyCompiler(
                root, types, self.symbols, self.notes, self.fresh, self.join_plan
            )
            binding = compiler.compile(body)
            picked = Binding(
                project(binding.stream, [binding.index(v) for v in query.answer_vars]),
                query.answer_vars,
            )
            answers.append(picked)
        if len(answers) == 1 and self._is_set_join(query.bodies[0], query.answer_vars):
            result = answers[0]  # already a set: distinct would only cost an arrangement
        else:
            union = Binding(concat([a.stream for a in answers]), query.answer_vars)
            result = BodyCompiler(root, {}, self.symbols, [], self.fresh).distinct(union)
        output = dataflow.capture(result.stream, name)
        plan = QueryPlan(dataflow, output, query.answer_vars, self.notes, root.shared)
        plan.inlined = frozenset(self.inlined)
        return plan

    def view_planner(self) -> Planner:
        """A planner for the dataflow of a view: never specialized, sharing as this one."""
        return Planner(self.engine, self.original, self.symbols, self.join_plan,
                       specialize=False, functors=self.functors, share=self.share,
                       others=self.others)  # fmt: skip

    def build_view(self, relation: str, dataflow: Dataflow) -> Stream:
        """Build into `dataflow` what computes derived `relation` alone (for a view)."""
        self.program = bind_program(self.program, self.functors, {relation})
        root = Sources(dataflow, dataflow.root, self.program.schema)
        stratum = next(s for s in self.program.strata if relation in s.relations)
        below = {n for body in reads(stratum.rules).values() for n in body} - stratum.relations
        self._build_needed(root, below)
        self._stratum(root, stratum)
        return root.streams[relation]

    def _build_needed(self, root: Sources, relations: set[str]) -> None:
        """Make `relations` readable in `root`: from views where shared, else by
        building the strata they need, in evaluation order."""
        views = Views(self)
        root.views = views.read(relations) if self.share != "off" else {}
        for relation, view in sorted(root.views.items()):
            self.notes.append(f"derived relation {relation}: read from the shared view `{view}`")
            self.notes += [f"  {note}" for note in views.notes[view]]
        needed = views.inlined(relations, root.views)
        if self.share == "create":  # what a later live query may share with this one
            self.inlined |= views.keys(needed)
        for stratum in self.program.strata:
            if stratum.relations & needed:
                self._stratum(root, stratum)

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

    def _stratum(self, root: Sources, stratum: Stratum) -> None:
        relations = sorted(stratum.relations)
        if not stratum.recursive:
            for rel in relations:
                root.define(rel, self._relation(root, rel, stratum))
            return
        self.notes.append(f"recursive stratum {relations}: one iteration scope")
        scope = Subscope(root.scope, f"iterate{relations}")
        inner = Sources(root.dataflow, scope.inner, root.schema, root)
        variables = {rel: Variable(scope.inner, self._dtypes(rel), rel) for rel in relations}
        for rel, var in variables.items():
            inner.define(rel, var.output)
        results = {}
        # With subsumption the stratum is inflationary, as Soufflé's: each round
        # also sees the tuples of the last one (the variables), and only
        # subsumption removes any (ADR 0017).
        inflationary = bool(stratum.relations & self.program.dominances.keys())
        with root.scope.inserting_before(scope):
            for rel, var in variables.items():
                own = var.output if inflationary else None
                results[rel] = self._relation(inner, rel, stratum, own)
                var.set(results[rel])
        for rel, result in results.items():
            root.define(rel, leave(result))

    def _relation(
        self, sources: Sources, rel: str, stratum: Stratum, own: Stream | None = None
    ) -> Stream:
        """The distinct union of `rel`'s inserted facts and its rules' heads (and of
        `own`, its variable, if given); its undominated tuples if it is subsumed."""
        kinds = self.program.schema.types(rel)
        parts: list[Stream] = [] if own is None else [own]
        source = self.inputs.get(rel, rel)
        if source in self.engine.inputs and not (self.one_shot and sources.size(source) == 0):
            inserted = sources.input_collection(source)  # magic relations have no input
            # a nullary relation's input has one constant column; the relation has none
            parts.append(inserted if kinds else project(inserted, []))
        rules = [rule for rule in stratum.rules if rule.head.name == rel]
        for rule in rules:
            self.notes.append(f"rule {format_rule(rule)}")
            compiler = BodyCompiler(
                sources,
                self.program.types_of(rule),
                self.symbols,
                self.notes,
                self.fresh,
                self.join_plan,
            )
            binding = compiler.compile(rule.body, rule.head.args)
            parts.append(compiler.head(binding, rule.head.args, kinds))
        dominances = self.program.dominances.get(rel)
        if dominances and kinds:
            return subsume(concat(parts), dominances, self.symbols, self.notes)
        if len(parts) == 1 and self._derives_set(rules, kinds, stratum):
            self.notes.append(f"{rel}: one set join, no distinct")
            return parts[0]
        union = Binding(concat(parts), tuple(f"_c{i}" for i in range(len(kinds))))
        return BodyCompiler(sources, {}, self.symbols, [], self.fresh).distinct(union).stream

    def _derives_set(
        self, rules: Sequence[Rule], kinds: Sequence[ColumnType], stratum: Stratum
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


def relations_read(query: CheckedQuery) -> set[str]:

    found: set[str] = set()
    for body in query.bodies:
        found.update(n.name for n in nodes((), body) if isinstance(n, Atom))
    return found


def _show(body: tuple[Literal, ...]) -> str:
    return format_body(body)
