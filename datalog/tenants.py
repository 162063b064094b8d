"""Multi-tenant dataflows: live queries that differ only in constants share one.

Layer: datalog (API). Imports the planner, `datalog.live` and `differential`;
`datalog.database` holds one `Tenants` table and calls it from thin hooks.

3DF's thesis (section 10.3): `out(1, y)` and `out(2, y)` are one query with a
parameter. The constants of a query's positive atoms become parameter
variables; one dataflow per generalized query evaluates the generalized body
joined with an internal input relation `tenant@N` that holds the parameter
tuples subscribed to, and its answer carries the parameter columns first. With
magic sets (`datalog.plan.magic`) the parameter relation seeds the demand, so
it drives the evaluation as a constant would. Each distinct parameter tuple is
a member: a `LiveQuery` of its own (own answer, own subscribers, registered in
`db.live` under its own query text) whose plan is the shared one. Per epoch the
output is sorted by parameter with numpy and split into one slice per
parameter touched; subscribers of untouched parameters cost nothing.

Epochs (ADR 0022): a subscription that adds a new parameter inserts it as an
epoch of its own (logged as an empty commit, so a durable replay reaches the
same epochs); nothing changes for the other members, so they receive nothing.
That epoch also publishes the new member and its subscriber to a monitored
`deltalog.dataflow` (`LiveQuery.arriving` counts the subscriber before its
snapshot), so the subscription takes one epoch, not two (ADR 0025).
Unsubscribing the last subscriber of a parameter retracts it with the next
commit (it may happen inside a callback, where no epoch can be committed); the
dataflow and its parameter input go with the last member.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import count
from typing import TYPE_CHECKING, Any

import numpy as np

from datalog import durable
from datalog.ast import Atom, Column, Const, Decl, Literal, Query, Term, Var
from datalog.checks import CheckedProgram, CheckedQuery, check_query
from datalog.expressions import DTYPES
from datalog.live import LiveQuery, deliver
from datalog.parser import parse_query
from datalog.plan.build import Planner, QueryPlan
from datalog.plan.magic import tenant_specialize
from datalog.plan.wcoj import JoinPlan
from datalog.pretty import format_query
from datalog.schema import RelationInfo, Schema
from differential.batch import Updates, concat, consolidate
from differential.inputs import Requests
from differential.time import column
from differential.trace.spine import Spine

if TYPE_CHECKING:
    from datalog.database import Database

Param = tuple[Any, ...]  # one parameter tuple, as Python scalars (symbols as ids)
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
    members: dict[Param, LiveQuery] = field(default_factory=dict)
    retiring: set[Param] = field(default_factory=set)  # to retract with the next commit
    built_for: CheckedProgram | None = None  # the program the dataflow was built from
    pending: dict[Param, Updates] = field(default_factory=dict)  # rebuild differences


class Tenants:
    """The database's shared parameterized dataflows, by generalized key."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.by_key: dict[str, Tenant] = {}

    # -- hooks called by the database -------------------------------------------------

    def join(self, key: str, text: str, checked: CheckedQuery, plan: JoinPlan) -> LiveQuery | None:
        """The member live query for `key`, sharing a tenant dataflow; None if the
        query does not qualify (no constants in positive atoms, disjunctions)."""
        shape = generalize(text, checked, self.db)
        if shape is None:
            return None
        tkey = shape.key if plan == "auto" else f"{shape.key} [plan={plan}]"
        tenant = self.by_key.get(tkey)
        if tenant is None:
            tenant = self._create(tkey, shape, plan)
        param = self._encode(shape)
        if param in tenant.retiring:  # retract it first: the new member starts empty
            self._commit({tenant.relation: self._retract(tenant)})
        dtypes = [np.dtype(DTYPES[t]) for t in checked.answer_types]
        assert tenant.plan is not None
        member = LiveQuery(key, tenant.plan, checked.answer_types, Spine(len(dtypes), dtypes, 1))
        member.join_plan = plan
        member.tenant = tenant
        member.param = param
        member.arriving = 1  # its epoch publishes the subscriber count too (ADR 0025)
        tenant.members[param] = member
        self.db.live[key] = member
        try:  # the insert derives the member's answer (delivered to its state only)
            self._commit({tenant.relation: _requests([param], tenant, True)})
        except BaseException:
            del tenant.members[param], self.db.live[key]
            if not tenant.members:
                self._drop(tenant)
            raise
        return member

    def leave(self, member: LiveQuery) -> None:
        """`member` lost its last subscriber: retract its parameter with the next
        commit; the dataflow goes with the last member."""
        tenant: Tenant = member.tenant
        del tenant.members[member.param]
        self.db.live.pop(member.key, None)
        if tenant.members:
            tenant.retiring.add(member.param)
        else:
            self._drop(tenant)

    def fold(self, requests: dict[str, Requests]) -> None:
        """Add the retractions of retiring parameters to a commit's requests."""
        for tenant in self.by_key.values():
            if tenant.retiring:
                requests[tenant.relation] = self._retract(tenant, clear=False)

    def committed(self) -> None:
        for tenant in self.by_key.values():
            tenant.retiring.clear()

    def rebuild(self, member: LiveQuery) -> Updates:
        """`Database._rebuild` for a member: the shared dataflow is rebuilt once per
        program (or after an aborted commit dropped it), every member's difference
        between the new answer and the one it holds kept; `member`'s is returned."""
        tenant: Tenant = member.tenant
        assert tenant.plan is not None
        fresh = tenant.built_for is self.db.checked
        if not (fresh and tenant.plan.dataflow in self.db.engine.dataflows):
            self.db.engine.drop(tenant.plan.dataflow)
            first = self._start(tenant)
            epoch = self.db.engine.epoch
            split = dict(_groups(first, len(tenant.shape.params)))
            tenant.pending = {}
            for param, m in tenant.members.items():
                m.plan = tenant.plan
                new = split.get(param, Updates.empty(len(m.types), 1, _dtypes(m.types)))
                parts = [m.state.accumulate(None).negate(), new]
                at = [p.with_times(column((epoch,), len(p))) for p in parts]
                tenant.pending[param] = consolidate(concat(at))
        return tenant.pending.pop(member.param)

    def note(self, key: str) -> list[str]:
        """`explain`'s line for a live member: the shared dataflow that serves it."""
        member = self.db.live.get(key)
        if member is None or member.tenant is None:
            return []
        tenant: Tenant = member.tenant
        return [
            f"  live: served by the shared multi-tenant dataflow {tenant.shape.key!r} "
            f"({len(tenant.members)} parameters, ADR 0022), not by the plan below"
        ]

    # -- internals --------------------------------------------------------------------

    def _create(self, tkey: str, shape: Generalized, plan: JoinPlan) -> Tenant:
        relation = f"{PREFIX}{next(_ids)}"
        dtypes = [np.dtype(DTYPES[t]) for t in shape.types]
        self.db.engine.create_input(relation, dtypes, history=False)  # internal (ADR 0040)
        tenant = Tenant(shape, relation, plan)
        try:
            self._start(tenant)
        except BaseException:
            self.db.engine.inputs.pop(relation, None)
            raise
        self.by_key[tkey] = tenant
        return tenant

    def _start(self, tenant: Tenant) -> Updates:
        """Build and start the shared dataflow over the parameters now in its input;
        its first output (all members' answers, parameter columns first)."""
        db, shape = self.db, tenant.shape
        program = with_relation(db.checked, tenant.relation, shape.types)
        param_atom = Atom(tenant.relation, tuple(Var(p) for p in shape.params))
        body = (param_atom, *shape.body)
        query = check_query(Query(body), program.schema)
        planner = Planner(
            db.engine, program, db.symbols, tenant.join_plan, specialize=False, functors=db.functors
        )
        specialized = tenant_specialize(program, query)
        if specialized is not None:
            planner.program, query = specialized.program, specialized.query
            planner.inputs = specialized.inputs
            planner.notes.append("specialized to the parameter relation (magic sets)")
        built = planner.build(query, shape.key)
        answer = built.start(db.engine)
        built.output.listeners.append(lambda u, e: self._route(tenant, u, e))
        tenant.plan, tenant.built_for = built, db.checked
        return answer

    def _route(self, tenant: Tenant, updates: Updates, epoch: int) -> None:
        """Hand each touched parameter's slice of an epoch's output to its member."""
        for param, part in _groups(updates, len(tenant.shape.params)):
            member = tenant.members.get(param)
            if member is not None:
                self.db._delivering += 1
                try:
                    deliver(member, part, epoch, self.db.symbols)
                finally:
                    self.db._delivering -= 1

    def _commit(self, requests: dict[str, Requests]) -> None:
        """An epoch of its own (a new parameter), logged as an empty commit."""
        db = self.db
        for tenant in self.by_key.values():
            if tenant.retiring and tenant.relation not in requests:
                requests[tenant.relation] = self._retract(tenant, clear=False)
        epoch, end = db.engine.epoch + 1, durable.mark(db)
        try:
            durable.log_commit(db, epoch, [], [])
            epoch = db.engine.commit(requests)
        except BaseException:
            if db.engine.epoch < epoch:  # it did not happen (else: a listener failed)
                durable.undo(db, end)
            db._restart_live()
            raise
        self.committed()
        db._tick(epoch)

    def _retract(self, tenant: Tenant, clear: bool = True) -> Requests:
        params = sorted(tenant.retiring)
        if clear:
            tenant.retiring.clear()
        return _requests(params, tenant, False)

    def _drop(self, tenant: Tenant) -> None:
        if tenant.plan is not None:
            self.db.engine.drop(tenant.plan.dataflow)
        self.db.engine.inputs.pop(tenant.relation, None)
        self.by_key = {k: t for k, t in self.by_key.items() if t is not tenant}

    def _encode(self, shape: Generalized) -> Param:
        out: list[Any] = []
        for const, kind in zip(shape.constants, shape.types, strict=True):
            if kind == "symbol":
                out.append(self.db.symbols.intern(str(const.value)))
            else:
                out.append(np.asarray(const.value).astype(DTYPES[kind]).item())
        return tuple(out)


def generalize(text: str, checked: CheckedQuery, db: Database) -> Generalized | None:
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
            info = db.checked.schema.get(lit.name)
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


def _requests(params: list[Param], tenant: Tenant, inserting: bool) -> Requests:
    dtypes = _dtypes(tenant.shape.types)
    cols = tuple(np.array([p[i] for p in params], dtype=dtypes[i]) for i in range(len(dtypes)))
    return Requests(cols, np.full(len(params), inserting, dtype=bool))


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
