"""The named planning passes: each takes a `Plan` and returns a new one.

Layer: datalog.plan. Imports the language, the functor binder, `magic`, `views`,
`choose` and `order`.

In order (`PASSES`), then `datalog.plan.build` lowers the result to operators:

- `magic sets`: specialize the program to the query's constants, or (a multi-tenant
  dataflow) to its parameter relation (`datalog.plan.magic`); a specialized plan
  shares nothing;
- `normalize`: bind the user functors the rules call (`datalog.eval.functors`) and
  find the relations the answer reads (a view: those below its stratum);
- `sharing`: which derived relations are read from shared views (`datalog.plan.views`)
  and which this dataflow computes itself;
- `strata`: the strata to compute, in evaluation order, each recursive one an
  iteration scope;
- `choose_join`: per body (and per aggregate's body), one delta query (worst-case
  optimal) over which literals, or binary joins (`datalog.plan.choose`);
- `order_joins`: per body, its steps in order: the delta query, then filters,
  negations and aggregates as soon as their variables are bound, the next atom
  the one sharing most bound variables (`datalog.plan.order`).

Lowering then builds what the steps say; only a delta query's pipelines (their
variable orders read the relations' sizes) are filled in there (docs/adr/0058).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from itertools import count as counter

from datalog.eval.functors import FunctorBinding, bind_program, bind_query
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import Atom, ColumnType, Rule, Term
from datalog.lang.checks import CheckedQuery
from datalog.lang.passes.variables import nodes
from datalog.lang.strata import reads
from datalog.plan.choose import Chooser
from datalog.plan.magic import Specializations, specialize, tenant_specialize
from datalog.plan.order import Orderer
from datalog.plan.plan import BodyPlan, Plan, RelationPlan, Specialization, StratumPlan
from datalog.plan.views import Views
from differential.tuning import TUNING

Pass = Callable[[Plan], Plan]


def magic_sets(memo: Specializations | None = None) -> Pass:
    """The pass specializing to the query's constants or the tenant's parameters, if
    asked and something is asked for with a constant; through `memo` (a planner's
    `Specializations`) when `Tuning.memo_specializations` is on."""

    def run(plan: Plan) -> Plan:
        how, query = plan.options.magic, plan.query
        if query is None or how not in ("query", "tenant"):
            return ran(plan, "magic sets")
        tenant = how == "tenant"
        if memo is not None and TUNING.memo_specializations:
            found = memo.specialize(plan.program, query, tenant)
        else:
            found = (tenant_specialize if tenant else specialize)(plan.program, query)
        if found is None:
            return ran(plan, "magic sets")
        specialized = Specialization(how, tuple(found.notes), found.inputs)
        options = replace(plan.options, share="off")  # the specialized relations are its own
        plan = replace(plan, program=found.program, query=found.query, options=options)
        return ran(replace(plan, specialized=specialized), "magic sets")

    return run


def normalize(functors: Mapping[str, FunctorBinding]) -> Pass:
    """The pass binding `functors` (the functions bound now) into the query and the
    rules the answer reads."""

    def bind(plan: Plan) -> Plan:
        if plan.query is None:  # a view: its relation's stratum and what it reads
            program = bind_program(plan.program, functors, {plan.relation})
            stratum = next(s for s in program.strata if plan.relation in s.relations)
            below = {n for body in reads(stratum.rules).values() for n in body}
            found = frozenset(below - stratum.relations)
            return ran(replace(plan, program=program, reads=found), "normalize")
        query = bind_query(plan.query, functors)
        read = relations_read(query)
        program = bind_program(plan.program, functors, read)
        return ran(replace(plan, program=program, query=query, reads=read), "normalize")

    return bind


def sharing(views: Views) -> Pass:
    """The pass choosing the derived relations read from `views`."""

    def share(plan: Plan) -> Plan:
        options = plan.options
        found = views.read(plan.reads, options)
        computed = views.inlined(plan.program, plan.reads, found)
        keys = views.keys(computed, options.join_plan) if options.share == "create" else set()
        shared = tuple(found[r] for r in sorted(found))
        plan = replace(plan, views=shared, computed=frozenset(computed), inlined=frozenset(keys))
        return ran(plan, "sharing")

    return share


def strata(plan: Plan) -> Plan:
    """The strata of what the dataflow computes (and a view's own), in evaluation order."""
    wanted = plan.computed | ({plan.relation} if plan.query is None else set())
    chosen = tuple(
        StratumPlan(tuple(sorted(s.relations)), s.recursive, tuple(s.rules))
        for s in plan.program.strata
        if s.relations & wanted
    )
    return ran(replace(plan, strata=chosen), "strata")


def choose_join(symbols: SymbolTable) -> Pass:
    """The pass choosing, per body, a delta query or binary joins (`symbols`: a
    constant a delta query takes is interned)."""

    def choose(plan: Plan) -> Plan:
        chooser = Chooser(plan.program.schema, symbols, plan.options.join_plan)

        def chosen(body: BodyPlan, types: Mapping[str, ColumnType], head: Head) -> BodyPlan:
            return replace(body, choice=chooser.body(body.body, types, head))

        return ran(each_body(_with_bodies(plan), chosen), "choose join")

    return choose


def order_joins(plan: Plan) -> Plan:
    """Every body's steps in order, in the order lowering builds the bodies (the
    strata's rules, then the query's), which numbers their fresh variables."""
    orderer = Orderer(plan.program.schema, counter())

    def ordered(body: BodyPlan, types: Mapping[str, ColumnType], head: Head) -> BodyPlan:
        assert body.choice is not None
        steps, typed = orderer.top(body.body, body.choice, types, head)
        return replace(body, order=steps, types=typed)

    return ran(each_body(plan, ordered), "order joins")


Head = Sequence[Term]


def each_body(
    plan: Plan, change: Callable[[BodyPlan, Mapping[str, ColumnType], Head], BodyPlan]
) -> Plan:
    """`plan` with `change` applied to every body, in the order lowering builds them:
    each stratum's relations' rules, then the query's bodies."""
    program, query = plan.program, plan.query
    strata = []
    for stratum in plan.strata:
        relations = []
        for relation in stratum.lowered:
            rules = []
            for body in relation.rules:
                rule = body.source
                assert isinstance(rule, Rule)
                rules.append(change(body, program.types_of(rule), rule.head.args))
            relations.append(replace(relation, rules=tuple(rules)))
        strata.append(replace(stratum, lowered=tuple(relations)))
    bodies = plan.bodies
    if query is not None:
        pairs = zip(bodies, query.variable_types, strict=True)
        bodies = tuple(change(body, types, ()) for body, types in pairs)
    return replace(plan, strata=tuple(strata), bodies=bodies)


def _with_bodies(plan: Plan) -> Plan:
    """`plan` with a plan for each body: a stratum's per relation, the query's."""
    strata = tuple(replace(stratum, lowered=tuple(_relations(stratum))) for stratum in plan.strata)
    bodies = tuple(BodyPlan(body) for body in plan.query.bodies) if plan.query else ()
    return replace(plan, strata=strata, bodies=bodies)


def _relations(stratum: StratumPlan) -> list[RelationPlan]:
    return [
        RelationPlan(name, tuple(BodyPlan(r) for r in stratum.rules if r.head.name == name))
        for name in stratum.relations
    ]


def ran(plan: Plan, name: str) -> Plan:
    return replace(plan, passes=(*plan.passes, name))


def relations_read(query: CheckedQuery) -> frozenset[str]:
    """The relations the query's bodies read (aggregates and negations included)."""
    found: set[str] = set()
    for body in query.bodies:
        found.update(n.name for n in nodes((), body) if isinstance(n, Atom))
    return frozenset(found)
