"""The plan as data: what the planning passes decide, as small immutable values.

Layer: datalog.plan. Imports the language's AST, checked program and printer (a
delta query's `Constant`, `joins.pipeline`, only as a type), nothing that builds
operators.

A `Plan` starts as a checked query (or a derived relation a view computes) with
its `Options`, and each named pass of `datalog.plan.passes` returns a new one with
its decisions filled in (3DF's `Plan`, sqlglot's planner: the plan is what
`explain` prints; Soufflé's transformer pipeline: it can be dumped after each
pass). The join passes record each body's `JoinChoice` and its `Step`s in order;
`datalog.plan.build` lowers them to operators and records the steps as built;
`datalog.plan.explain` prints it. Nothing here holds an operator or a stream.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from datalog.lang.ast import Aggregate as AggregateTerm
from datalog.lang.ast import Atom, Call, ColumnType, Comparison, Const, Rule, Term
from datalog.lang.ast import Literal as BodyLiteral
from datalog.lang.checks import CheckedProgram, CheckedQuery
from datalog.lang.pretty import format_body, format_literal, format_rule

if TYPE_CHECKING:
    from joins.pipeline import Constant

JoinPlan = Literal["auto", "wcoj", "binary"]
# "create": read derived relations from views, making one where another live query
# computes the relation itself (live queries and their views); "reuse": read the
# views that exist, compute the rest (one-shot queries); "off": none (specialized).
Share = Literal["create", "reuse", "off"]
# "query": specialize to the query's constants; "tenant": to the parameter relation
# the first atom of a multi-tenant query reads (`datalog.db.tenants`); "off": never.
Magic = Literal["query", "tenant", "off"]


@dataclass(frozen=True, slots=True)
class Options:
    """How to plan: every switch a caller (a query, a live query, a tenant's shared
    dataflow, a view, a read of the past) may set, and nothing else."""

    join_plan: JoinPlan = "auto"
    magic: Magic = "query"
    share: Share = "off"
    others: frozenset[Hashable] = frozenset()  # view keys other live dataflows compute
    # The dataflow runs once over the inputs as they are now and is dropped: an input
    # empty now contributes nothing, ever (ADR 0028).
    one_shot: bool = False


# -- one body's steps: what `order_joins` decided, in order, and lowering built ---------
#
# Each step prints its own line(s) (`lines`, what `explain` shows); the fields after
# the printed ones (not compared, not shown) are what lowering needs to build it,
# so lowering decides nothing (docs/adr/0058).


@dataclass(frozen=True, slots=True)
class AtomShape:
    """An atom's positions: its distinct variables (an argument computed from others
    is a fresh variable, `_e#n`, equated to it after the join), the positions that
    repeat a variable or hold a constant (filters on the relation's columns)."""

    vars: tuple[str, ...]
    positions: tuple[int, ...]
    equal_columns: tuple[tuple[int, int], ...]
    constants: tuple[tuple[int, Const], ...]
    deferred: tuple[Comparison, ...]  # `_e#n = term`, applied once bound
    pattern: str  # `(x, _, …)`: variables, wildcards, computed arguments

    @property
    def filtered(self) -> bool:
        return bool(self.equal_columns or self.constants)


@dataclass(frozen=True, slots=True)
class Scan:
    relation: str
    pattern: str  # `(x, _, …)`: variables, wildcards, computed arguments
    shape: AtomShape | None = field(default=None, compare=False, repr=False)

    def lines(self) -> list[str]:
        return [f"scan {self.relation}{self.pattern}"]


@dataclass(frozen=True, slots=True)
class Join:
    relation: str
    pattern: str
    on: tuple[str, ...]
    shared: bool  # the right side is a shared arrangement (else arranged privately)
    shape: AtomShape | None = field(default=None, compare=False, repr=False)

    def lines(self) -> list[str]:
        how = "shared" if self.shared else "private"
        return [f"join {self.relation}{self.pattern} on {list(self.on)} ({how} arrangement)"]


@dataclass(frozen=True, slots=True)
class Antijoin:
    relation: str
    pattern: str
    on: tuple[str, ...]
    shape: AtomShape | None = field(default=None, compare=False, repr=False)

    def lines(self) -> list[str]:
        return [f"antijoin {self.relation}{self.pattern} on {list(self.on)}"]


@dataclass(frozen=True, slots=True)
class Filter:
    comparison: Comparison | None = field(default=None, compare=False, repr=False)

    def lines(self) -> list[str]:
        return ["filter"]


@dataclass(frozen=True, slots=True)
class Bind:
    variable: str
    term: Term | None = field(default=None, compare=False, repr=False)

    def lines(self) -> list[str]:
        return [f"compute {self.variable}"]


@dataclass(frozen=True, slots=True)
class Generate:
    """`x = range(...)`; `variable` is `x`, or a fresh one when `x` is bound already
    (then the rows whose `x` is one of the values are kept)."""

    variable: str
    function: str
    target: str = field(default="", compare=False, repr=False)
    call: Call | None = field(default=None, compare=False, repr=False)

    def lines(self) -> list[str]:
        return [f"generate {self.variable} = {self.function}(...)"]


@dataclass(frozen=True, slots=True)
class Unit:
    """The body starts from one row without variables (no positive atom)."""

    def lines(self) -> list[str]:
        return []


@dataclass(frozen=True, slots=True)
class Aggregate:
    """An aggregate's reduce, grouped by `groups`; its body's steps are `inner` (with
    the binding of an aggregated expression last), lowered before it."""

    function: str
    groups: tuple[str, ...]
    term: AggregateTerm | None = field(default=None, compare=False, repr=False)
    result: str = field(default="", compare=False, repr=False)
    target: str | None = field(default=None, compare=False, repr=False)
    inner: tuple[Step, ...] = field(default=(), compare=False, repr=False)

    def lines(self) -> list[str]:
        return [f"aggregate {self.function} grouped by {list(self.groups)}"]


@dataclass(frozen=True, slots=True)
class DeltaQuery:
    """A worst-case optimal join: its bindings and one pipeline per source (the
    pipelines' variable orders read the relations' sizes: lowering fills them in)."""

    bindings: tuple[str, ...]
    pipelines: tuple[str, ...]
    atoms: tuple[Atom, ...] = field(default=(), compare=False, repr=False)
    negations: tuple[Atom, ...] = field(default=(), compare=False, repr=False)
    constants: tuple[Constant, ...] = field(default=(), compare=False, repr=False)
    comparisons: tuple[Comparison, ...] = field(default=(), compare=False, repr=False)
    # the variables a rule's head reads, when the body ends here (none: every one)
    keep: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def lines(self) -> list[str]:
        head = f"delta query (worst-case optimal) over {', '.join(self.bindings)}"
        return [head, *(f"  {p}" for p in self.pipelines)]


@dataclass(frozen=True, slots=True)
class Binary:
    """`plan=wcoj` asked for a delta query that this body cannot take."""

    reason: str

    def lines(self) -> list[str]:
        return [f"plan=wcoj: {self.reason}; joined binary instead"]


@dataclass(frozen=True, slots=True)
class Subsume:
    relation: str
    key: tuple[int, ...]
    how: str

    def lines(self) -> list[str]:
        return [f"subsume {self.relation}: reduce by columns {list(self.key)} ({self.how})"]


@dataclass(frozen=True, slots=True)
class SetJoin:
    """The relation's one rule is a set join: no distinct."""

    relation: str

    def lines(self) -> list[str]:
        return [f"{self.relation}: one set join, no distinct"]


Step = (Scan | Join | Antijoin | Filter | Bind | Generate | Aggregate | DeltaQuery | Binary) | (
    Subsume | SetJoin | Unit
)


# -- what `choose_join` decided for one body --------------------------------------------


@dataclass(frozen=True, slots=True)
class DeltaChoice:
    """The literals one delta query takes, by position in the body (its aggregates
    lifted out, which keeps every literal where it was)."""

    atoms: tuple[int, ...]
    negations: tuple[int, ...]
    constants: tuple[tuple[int, Constant], ...]
    comparisons: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class JoinChoice:
    """A delta query, or binary joins (with why, when `plan=wcoj` asked for one);
    `inner`: the choice of each aggregate's body, in the order they are lifted."""

    delta: DeltaChoice | None = None
    binary: Binary | None = None
    inner: tuple[JoinChoice, ...] = ()
    body: tuple[BodyLiteral, ...] = field(default=(), compare=False, repr=False)

    def lines(self) -> list[str]:
        """The choice, then each aggregate's (indented)."""
        lines = self.binary.lines() if self.binary is not None else []
        if self.delta is not None:
            d, body = self.delta, self.body
            taken = [format_literal(body[i]) for i in (*d.atoms, *d.negations)]
            taken += [c.show() for _, c in d.constants]
            taken += [format_literal(body[i]) for i in d.comparisons]
            lines.append(f"delta query (worst-case optimal) over {', '.join(taken)}")
        elif self.binary is None:
            lines.append("binary joins")
        for n, inner in enumerate(self.inner, 1):
            first, *rest = inner.lines()
            lines += [f"aggregate {n}: {first}", *(f"  {x}" for x in rest)]
        return lines


# -- the plan ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BodyPlan:
    """One rule (or one body of the query): the join `choice` (`choose_join`), the
    steps in order (`order`, from `order_joins`: a tree, an aggregate holding its
    body's) with every variable's type (`types`, fresh variables included), and the
    steps as lowered (`steps`, flat, in the order built, what explain prints).
    Printed only when asked (`title`): formatting every rule would cost as much as
    planning it."""

    source: Rule | tuple[BodyLiteral, ...]
    steps: tuple[Step, ...] = ()
    choice: JoinChoice | None = None
    order: tuple[Step, ...] = ()
    types: Mapping[str, ColumnType] = field(default_factory=dict, compare=False, repr=False)

    @property
    def body(self) -> tuple[BodyLiteral, ...]:
        source = self.source
        return source.body if isinstance(source, Rule) else source

    @property
    def title(self) -> str:
        source = self.source
        return format_rule(source) if isinstance(source, Rule) else format_body(source)


@dataclass(frozen=True, slots=True)
class RelationPlan:
    """A derived relation: its rules, and how their union is finished."""

    relation: str
    rules: tuple[BodyPlan, ...] = ()
    finish: tuple[Step, ...] = ()


@dataclass(frozen=True, slots=True)
class StratumPlan:
    """A stratum this dataflow computes; a recursive one is one iteration scope."""

    relations: tuple[str, ...]  # sorted
    recursive: bool
    rules: tuple[Rule, ...]
    # Per relation, its rules' plans: made by `choose_join`, ordered by `order_joins`,
    # their steps filled in by lowering.
    lowered: tuple[RelationPlan, ...] = ()


@dataclass(frozen=True, slots=True)
class Specialization:
    """What the magic-sets pass did: to what it specialized, and its notes."""

    to: Magic
    notes: tuple[str, ...]
    inputs: Mapping[str, str]  # adorned copy -> the relation whose facts it reads


@dataclass(frozen=True, slots=True)
class ViewRead:
    """A derived relation read from a shared view instead of computed here."""

    relation: str
    key: Hashable
    view: str = ""  # the view's input, once lowering found or made it
    notes: tuple[str, ...] = ()  # how the view was planned


@dataclass(frozen=True, slots=True)
class SharedRead:
    """A shared arrangement (or a whole shared collection) the dataflow imports."""

    relation: str
    view: str = ""  # the view input it is read from, if a view
    key: tuple[int, ...] | None = None  # the key columns; None: the whole collection

    def show(self) -> str:
        view = f" (view `{self.view}`)" if self.view else ""
        if self.key is None:
            return f"{self.relation}{view}, whole"
        return f"{self.relation}{view} by {list(self.key)}"


@dataclass(frozen=True, slots=True)
class Node:
    """A stateful operator of the built dataflow, for the graph explain draws."""

    id: int
    label: str
    kind: Literal["operator", "shared", "scope"] = "operator"
    children: tuple[Node, ...] = ()  # a scope's operators


@dataclass(frozen=True, slots=True)
class Graph:
    """The built dataflow's stateful operators and what each reads (ids of nodes)."""

    nodes: tuple[Node, ...]
    edges: tuple[tuple[int, int, bool], ...]  # (from, to, feedback)
    answers: tuple[tuple[int, ...], ...]  # per output, the nodes it is computed from


@dataclass(frozen=True, slots=True)
class Plan:
    """A query's (or a view's) plan, as far as the passes run so far decided it."""

    name: str
    program: CheckedProgram = field(repr=False)  # as rewritten (specialized, bound)
    query: CheckedQuery | None = field(repr=False)  # None: the plan of a view
    options: Options
    relation: str = ""  # a view's relation
    passes: tuple[str, ...] = ()  # the passes run, in order
    specialized: Specialization | None = None
    reads: frozenset[str] = frozenset()  # the relations the answer reads
    views: tuple[ViewRead, ...] = ()
    computed: frozenset[str] = frozenset()  # relations this dataflow computes itself
    # The view keys of the shareable derived relations it computes itself (what a
    # later live query may share with it: `Options.others`).
    inlined: frozenset[Hashable] = frozenset()
    strata: tuple[StratumPlan, ...] = ()
    bodies: tuple[BodyPlan, ...] = ()  # the query's bodies (`choose_join` on)
    shared: tuple[SharedRead, ...] = ()
    operators: tuple[str, ...] = ()  # the dataflow's stateful operators, described
    graph: Graph | None = field(default=None, repr=False)

    @property
    def answer_vars(self) -> tuple[str, ...]:
        return self.query.answer_vars if self.query is not None else ()
