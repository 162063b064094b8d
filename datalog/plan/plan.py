"""The plan as data: what the planning passes decide, as small immutable values.

Layer: datalog.plan. Imports the language's AST, checked program and printer, nothing
that builds operators.

A `Plan` starts as a checked query (or a derived relation a view computes) with
its `Options`, and each named pass of `datalog.plan.passes` returns a new one with
its decisions filled in (3DF's `Plan`, sqlglot's planner: the plan is what
`explain` prints; Soufflé's transformer pipeline: it can be dumped after each
pass). `datalog.plan.build` lowers it to operators and records what lowering
chose per body as `Step`s; `datalog.plan.explain` prints it. Nothing here holds an
operator or a stream.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from datalog.lang.ast import Literal as BodyLiteral
from datalog.lang.ast import Rule
from datalog.lang.checks import CheckedProgram, CheckedQuery
from datalog.lang.pretty import format_body, format_rule

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


# -- what lowering chose for one body, step by step ------------------------------------


@dataclass(frozen=True, slots=True)
class Scan:
    relation: str
    pattern: str  # `(x, _, …)`: variables, wildcards, computed arguments

    def lines(self) -> list[str]:
        return [f"scan {self.relation}{self.pattern}"]


@dataclass(frozen=True, slots=True)
class Join:
    relation: str
    pattern: str
    on: tuple[str, ...]
    shared: bool  # the right side is a shared arrangement (else arranged privately)

    def lines(self) -> list[str]:
        how = "shared" if self.shared else "private"
        return [f"join {self.relation}{self.pattern} on {list(self.on)} ({how} arrangement)"]


@dataclass(frozen=True, slots=True)
class Antijoin:
    relation: str
    pattern: str
    on: tuple[str, ...]

    def lines(self) -> list[str]:
        return [f"antijoin {self.relation}{self.pattern} on {list(self.on)}"]


@dataclass(frozen=True, slots=True)
class Filter:
    def lines(self) -> list[str]:
        return ["filter"]


@dataclass(frozen=True, slots=True)
class Bind:
    variable: str

    def lines(self) -> list[str]:
        return [f"compute {self.variable}"]


@dataclass(frozen=True, slots=True)
class Generate:
    variable: str
    function: str

    def lines(self) -> list[str]:
        return [f"generate {self.variable} = {self.function}(...)"]


@dataclass(frozen=True, slots=True)
class Aggregate:
    function: str
    groups: tuple[str, ...]

    def lines(self) -> list[str]:
        return [f"aggregate {self.function} grouped by {list(self.groups)}"]


@dataclass(frozen=True, slots=True)
class DeltaQuery:
    """A worst-case optimal join: its bindings and one pipeline per source."""

    bindings: tuple[str, ...]
    pipelines: tuple[str, ...]

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
    Subsume | SetJoin
)


# -- the plan ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BodyPlan:
    """One rule (or one body of the query) and its steps as lowered; printed only
    when asked (`title`): formatting every rule would cost as much as planning it."""

    source: Rule | tuple[BodyLiteral, ...]
    steps: tuple[Step, ...] = ()

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
    lowered: tuple[RelationPlan, ...] = ()  # filled in by lowering


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
    bodies: tuple[BodyPlan, ...] = ()  # the query's bodies, as lowered
    shared: tuple[SharedRead, ...] = ()
    operators: tuple[str, ...] = ()  # the dataflow's stateful operators, described
    graph: Graph | None = field(default=None, repr=False)

    @property
    def answer_vars(self) -> tuple[str, ...]:
        return self.query.answer_vars if self.query is not None else ()
