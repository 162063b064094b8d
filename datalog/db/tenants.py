"""Multi-tenant dataflows: queries that differ only in constants share one dataflow.

Layer: datalog (API). Imports the planner, the checker and `datalog.db.live`; the live
queries' registry (`datalog.db.queries`) owns the `Tenants` and calls it.

A query whose positive atoms hold constants (`reach(3, y)`) is generalized: its
constants become parameter variables; one dataflow per generalized query
evaluates the generalized body joined with an internal input relation `tenant@N`
that holds the parameter tuples subscribed to, and its answer carries the
parameter columns first. With magic sets (`datalog.plan.magic`) the parameter
relation seeds the demand, so it drives the evaluation as a constant would. Each
distinct parameter tuple is a member: a `LiveQuery` of its own (own answer, own
subscribers, registered under its own query text) whose plan is the shared one.
Per epoch the output is sorted by parameter with numpy and split into one slice
per parameter touched; subscribers of untouched parameters cost nothing.

Reads never write (docs/adr/0022, amended by ADR 0041): a subscription that adds a
parameter takes no epoch. Its member starts with the answer of a one-shot
evaluation at the current epoch (the snapshot its subscriber receives), and the
parameter joins the shared input with the next commit (`requests`): the slice that
commit derives for it is its whole answer at that epoch, so the member is handed
that slice minus the snapshot (`committed`). Unsubscribing the last subscriber of
a parameter retracts it with the next commit likewise; the dataflow and its
parameter input go with the last member.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import count
from typing import TYPE_CHECKING, Any

import numpy as np

from datalog.db.live import LiveQuery
from datalog.eval.expressions import DTYPES
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import Atom, Column, Const, Decl, Literal, Query, Term, Var
from datalog.lang.checks import CheckedProgram, CheckedQuery, check_query
from datalog.lang.parser import parse_query
from datalog.lang.pretty import format_query
from datalog.lang.schema import RelationInfo, Schema
from datalog.plan.plan import JoinPlan, Options
from datalog.plan.planner import Planner
from differential.batch import Updates, concat, consolidate
from differential.engine import Engine
from differential.inputs import Requests
from differential.time import column

if TYPE_CHECKING:  # the planner's lowering is loaded when a query is first planned
    from datalog.plan.build import QueryPlan

Param = tuple[Any, ...]  # one parameter tuple, as Python scalars (symbols as ids)
Deliver = Callable[[LiveQuery, Updates, int], None]
PREFIX = "tenant@"
_ids = count(1)


@dataclass(frozen=True)
class Generalized:
    """A query with its constants replaced by parameter variables."""

    key: str  # the shared dataflow's key
    body: tuple[Literal, ...]  # the generalized body (no parameter atom)
    params: tuple[str, ...]  # the parameter variables, in order
    types: tuple[str, ...]  # their column types
    constants: tuple[Const, ...]  # this query's values for them


@dataclass(eq=False)
class Tenant:
    """One shared dataflow, its parameter input and its members by parameter."""

    shape: Generalized
    relation: str
    join_plan: JoinPlan
    plan: QueryPlan | None = None
    members: dict[Param, LiveQuery] = field(default_factory=dict)  # in the input
    joining: dict[Param, LiveQuery] = field(default_factory=dict)  # inserted next commit
    retiring: set[Param] = field(default_factory=set)  # retracted with the next commit
    arrived: dict[Param, Updates] = field(default_factory=dict)  # joiners' first slices
    built_for: CheckedProgram | None = None  # the program the dataflow was built from

    def seats(self) -> list[LiveQuery]:
        return [*self.members.values(), *self.joining.values()]


@dataclass
class Context:
    """What a tenant's dataflow is planned and started with."""

    engine: Engine
    symbols: SymbolTable
    planner: Planner
    deliver: Deliver  # hands a member its slice of an epoch


class Tenants:
    """The shared parameterized dataflows, by generalized key."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.by_key: dict[str, Tenant] = {}
        self.enabled = True

    def shape(
        self, text: str, checked: CheckedQuery, program: CheckedProgram
    ) -> Generalized | None:
        """The generalized query `text` would share, or None if it does not qualify
        (no constants in positive atoms, disjunctions, tenancy switched off)."""
        return generalize(text, checked, program) if self.enabled else None

    def seat(
        self,
        key: str,
        shape: Generalized,
        checked: CheckedQuery,
        program: CheckedProgram,
        plan: JoinPlan,
        snapshot: Updates,
    ) -> LiveQuery:
        """A member for `key` holding `snapshot` (its answer now), in the shared
        dataflow of `shape`, created if need be; its parameter joins with the next
        commit (or stays, if its last member left since the last commit)."""
        member = LiveQuery.empty(key, checked.answer_types, checked.answer_vars, plan)
        member.reset(snapshot)  # first: if it fails, no dataflow was made for nobody
        param = self._encode(shape)
        tkey = shape.key if plan == "auto" else f"{shape.key} [plan={plan}]"
        tenant = self.by_key.get(tkey) or self._create(tkey, shape, plan, program)
        member.plan, member.tenant, member.param = tenant.plan, tenant, param
        if param in tenant.retiring:  # still in the input: it stays, and is current
            tenant.retiring.discard(param)
            tenant.members[param] = member
        else:
            tenant.joining[param] = member
        return member

    def leave(self, member: LiveQuery) -> None:
        """`member` lost its last subscriber: its parameter goes with the next commit;
        the dataflow goes with the last member."""
        tenant = member.tenant
        assert isinstance(tenant, Tenant)
        if tenant.joining.get(member.param) is member:
            del tenant.joining[member.param]  # never inserted: nothing to retract
        elif tenant.members.get(member.param) is member:
            del tenant.members[member.param]
            tenant.retiring.add(member.param)
        if not tenant.members and not tenant.joining:
            self._drop(tenant)

    def requests(self) -> dict[str, Requests]:
        """The parameter inserts and retractions the next commit carries."""
        found = {}
        for tenant in self.by_key.values():
            if tenant.joining or tenant.retiring:
                params = [*tenant.joining, *sorted(tenant.retiring)]
                inserting = [True] * len(tenant.joining) + [False] * len(tenant.retiring)
                found[tenant.relation] = _requests(params, tenant, inserting)
        return found

    def committed(self, epoch: int) -> None:
        """The commit carrying `requests` happened at `epoch`: joiners become members
        and are handed their first slice minus their snapshot (a tenant whose
        dataflow failed during the epoch is left to the repair, which rebuilds it
        and hands every member what it lacks)."""
        failure: BaseException | None = None
        running = self.context.engine.dataflows
        for tenant in list(self.by_key.values()):
            tenant.retiring.clear()
            joined, tenant.joining = tenant.joining, {}
            arrived, tenant.arrived = tenant.arrived, {}
            tenant.members.update(joined)
            if tenant.plan is None or tenant.plan.dataflow not in running:
                continue  # it failed this epoch: its rebuild hands them what they lack
            for param, member in joined.items():
                first = arrived.get(param, _empty(member))
                difference = _difference(member.answer(), first, epoch)
                try:
                    self.context.deliver(member, difference, epoch)
                except BaseException as error:  # the others still get theirs
                    failure = failure or error
        if failure is not None:
            raise failure

    def changes(self, tenant: Tenant, updates: Updates, epoch: int) -> dict[LiveQuery, Updates]:
        """What each seat of `tenant` would be handed if its dataflow output `updates`
        at `epoch` with the parameter requests of `requests` (a hypothetical epoch,
        `datalog.db.whatif`): a member its slice, a joiner its first slice minus its
        snapshot (`committed`). Changes nothing."""
        found = {member: _empty(member) for member in tenant.members.values()}
        firsts: dict[Param, Updates] = {}
        for param, part in _groups(updates, len(tenant.shape.params)):
            if param in tenant.joining:
                firsts[param] = part
            elif (member := tenant.members.get(param)) is not None:
                found[member] = part
        for param, joiner in tenant.joining.items():
            first = firsts.get(param, _empty(joiner))
            found[joiner] = _difference(joiner.answer(), first, epoch)
        return found

    def rebuild(self, tenant: Tenant, program: CheckedProgram) -> dict[LiveQuery, Updates]:
        """Rebuild `tenant`'s dataflow over `program` (its rules changed, or a failed
        commit dropped it): each member's new answer (not delivered). Joiners are not
        in the input yet: they wait for the commit that inserts them. If building
        fails, the old dataflow stays and the failure is raised."""
        old = tenant.plan
        first = self._start(tenant, program)
        if old is not None:
            self.context.engine.retire(old.dataflow)
        split = dict(_groups(first, len(tenant.shape.params)))
        for seat in tenant.seats():
            seat.plan = tenant.plan
        return {
            member: split.get(param, _empty(member)) for param, member in tenant.members.items()
        }

    def note(self, member: LiveQuery) -> list[str]:
        """`explain`'s line for a live member: the shared dataflow that serves it."""
        tenant = member.tenant
        if not isinstance(tenant, Tenant):
            return []
        seated = len(tenant.members) + len(tenant.joining)
        return [
            f"  live: served by the shared multi-tenant dataflow {tenant.shape.key!r} "
            f"({seated} parameters, ADR 0022), not by the plan below"
        ]

    # -- internals --------------------------------------------------------------------

    def _create(
        self, tkey: str, shape: Generalized, plan: JoinPlan, program: CheckedProgram
    ) -> Tenant:
        engine = self.context.engine
        relation = f"{PREFIX}{next(_ids)}"
        dtypes = [np.dtype(DTYPES[t]) for t in shape.types]
        engine.create_input(relation, dtypes, history=False)  # internal (ADR 0040)
        tenant = Tenant(shape, relation, plan)
        try:
            self._start(tenant, program)
        except BaseException:
            engine.remove_input(relation)
            raise
        self.by_key[tkey] = tenant
        return tenant

    def _start(self, tenant: Tenant, program: CheckedProgram) -> Updates:
        """Build and start the shared dataflow over the parameters now in its input;
        its first output (all members' answers, parameter columns first)."""
        context, shape, base = self.context, tenant.shape, program
        program = with_relation(program, tenant.relation, shape.types)
        param_atom = Atom(tenant.relation, tuple(Var(p) for p in shape.params))
        query = check_query(Query((param_atom, *shape.body)), program.schema)
        options = Options(tenant.join_plan, magic="tenant")  # the parameters seed the demand
        built = context.planner.build(program, query, shape.key, options)
        answer = built.start(context.engine)
        built.output.listeners.append(lambda u, e: self._route(tenant, u, e))
        tenant.plan, tenant.built_for = built, base
        return answer

    def _route(self, tenant: Tenant, updates: Updates, epoch: int) -> None:
        """Hand each touched member its slice of an epoch's output; a joiner's slice
        waits for `committed`. Every member is handed its slice even if one fails."""
        failure: BaseException | None = None
        for param, part in _groups(updates, len(tenant.shape.params)):
            if param in tenant.joining:
                tenant.arrived[param] = part
            elif (member := tenant.members.get(param)) is not None:
                try:
                    self.context.deliver(member, part, epoch)
                except BaseException as error:
                    failure = failure or error
        if failure is not None:
            raise failure

    def _drop(self, tenant: Tenant) -> None:
        engine = self.context.engine
        self.by_key = {k: t for k, t in self.by_key.items() if t is not tenant}
        engine.inputs.pop(tenant.relation, None)
        if tenant.plan is not None:
            engine.retire(tenant.plan.dataflow)

    def _encode(self, shape: Generalized) -> Param:
        out: list[Any] = []
        for const, kind in zip(shape.constants, shape.types, strict=True):
            if kind == "symbol":
                out.append(self.context.symbols.intern(str(const.value)))
            else:
                out.append(np.asarray(const.value).astype(DTYPES[kind]).item())
        return tuple(out)


def generalize(text: str, checked: CheckedQuery, program: CheckedProgram) -> Generalized | None:
    """`text` with the constants of its positive atoms as parameters, or None."""
    if len(checked.bodies) != 1:
        return None
    parsed = parse_query(text)
    taken = set(checked.variable_types[0]) | set(checked.answer_vars)
    params: list[str] = []
    types: list[str] = []
    constants: list[Const] = []
    body: list[Literal] = []
    for lit in parsed.body:
        if isinstance(lit, Atom) and any(isinstance(a, Const) for a in lit.args):
            info = program.schema.get(lit.name)
            if info is None:
                return None
            args: list[Term] = []
            for pos, arg in enumerate(lit.args):
                if isinstance(arg, Const):
                    name = _fresh(taken, len(params))
                    params.append(name)
                    types.append(info.types[pos])
                    constants.append(arg)
                    args.append(Var(name))
                else:
                    args.append(arg)
            lit = replace(lit, args=tuple(args))
        body.append(lit)
    if not params:
        return None
    key = "tenant " + format_query(Query(tuple(body)))
    return Generalized(key, tuple(body), tuple(params), tuple(types), tuple(constants))


def with_relation(program: CheckedProgram, name: str, types: tuple[str, ...]) -> CheckedProgram:
    """`program` with one more (base) relation declared."""
    columns = tuple(Column(f"p{i}", t) for i, t in enumerate(types))
    decl = Decl(name, columns)
    info = RelationInfo(name, tuple(types), tuple(c.name for c in columns), "set", decl)  # type: ignore[arg-type]
    schema = Schema(
        {**program.schema.relations, name: info},
        program.schema.functors,
        program.schema.type_names,
    )
    return replace(program, schema=schema)


def _fresh(taken: set[str], i: int) -> str:
    name = f"_p{i}"
    while name in taken:
        name = "_" + name
    taken.add(name)
    return name


def _requests(params: list[Param], tenant: Tenant, inserting: list[bool]) -> Requests:
    dtypes = _dtypes(tenant.shape.types)
    cols = tuple(np.array([p[i] for p in params], dtype=dtypes[i]) for i in range(len(dtypes)))
    return Requests(cols, np.array(inserting, dtype=bool))


def _empty(member: LiveQuery) -> Updates:
    return Updates.empty(len(member.types), 1, _dtypes(member.types))


def _difference(old: Updates, new: Updates, epoch: int) -> Updates:
    """`new - old`, consolidated, at `epoch`."""
    parts = [old.negate(), new]
    return consolidate(concat([p.with_times(column((epoch,), len(p))) for p in parts]))


def _groups(updates: Updates, width: int) -> list[tuple[Param, Updates]]:
    """`updates` split by their first `width` columns (numpy: one sort, then one
    slice per distinct parameter), the parameter columns dropped."""
    if len(updates) == 0:
        return []
    keys = updates.columns[:width]
    order = np.lexsort(keys[::-1])
    ordered = updates.take(order)
    keys = ordered.columns[:width]
    change = np.zeros(len(ordered), dtype=bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(change)
    ends = np.append(starts[1:], len(ordered))
    rest = ordered.with_columns(ordered.columns[width:])
    firsts = [k[starts].tolist() for k in keys]
    return [
        (tuple(f[j] for f in firsts), rest.take(np.arange(s, e)))
        for j, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True))
    ]


def _dtypes(types: tuple[str, ...]) -> list[np.dtype]:
    return [np.dtype(DTYPES[t]) for t in types]
