"""The Datalog abstract syntax tree: frozen dataclasses, each with a source span.

Layer: datalog (language). Imports nothing from the engine; every pass (checks,
planner, reference evaluator, pretty-printer) reads these nodes. The parser's
transformer only builds them; all validation runs as separate passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeAlias
from typing import Literal as Lit


@dataclass(frozen=True)
class Span:
    """Where a node came from: 1-based line/column, 0-based character offsets.

    `source` is the text the node was parsed from (empty for a node built by a
    program rather than parsed), so that an error about it quotes the right line
    whenever it is found: a component declared by an earlier `define`, a functor
    raising while a commit evaluates the rule that calls it.
    """

    line: int = 0
    column: int = 0
    end_line: int = 0
    end_column: int = 0
    start: int = 0
    end: int = 0
    source: str = field(default="", compare=False, repr=False)


NOWHERE = Span()

ColumnType: TypeAlias = Lit["number", "unsigned", "float", "symbol"]
Semantics: TypeAlias = Lit["set", "multiset", "last_write_wins"]
AggregateFunction: TypeAlias = Lit["count", "sum", "min", "max", "mean"]
ComparisonOp: TypeAlias = Lit[
    "=", "!=", "<", "<=", ">", ">=", "contains", "match", "!contains", "!match"
]
BUILTIN_PREDICATES = ("contains", "match", "!contains", "!match")
ArithmeticOp: TypeAlias = Lit["+", "-", "*", "/", "%", "^", "band", "bor", "bxor", "bshl", "bshr"]


# --- terms -------------------------------------------------------------------


@dataclass(frozen=True)
class Var:
    name: str
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Wildcard:
    """`_`: a fresh, unnamed variable at each occurrence."""

    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Const:
    """A literal. `type` is the column type the literal belongs to."""

    value: int | float | str
    type: ColumnType
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True, eq=False)  # equality and hash: `_equal`, `_hash`
class BinOp:
    op: ArithmeticOp
    left: Term
    right: Term
    span: Span = field(default=NOWHERE, compare=False)

    def __eq__(self, other: object) -> bool:
        return _equal(self, other) if type(other) is type(self) else NotImplemented

    def __hash__(self) -> int:
        return _hash(self)


@dataclass(frozen=True, eq=False)
class Neg:
    """Unary minus."""

    operand: Term
    span: Span = field(default=NOWHERE, compare=False)

    def __eq__(self, other: object) -> bool:
        return _equal(self, other) if type(other) is type(self) else NotImplemented

    def __hash__(self) -> int:
        return _hash(self)


@dataclass(frozen=True)
class UserFunctor:
    """A user-defined functor (`.functor`) as its calls carry it: the parameter and
    result types, erased to primitive ones (attached by the checker), and the Python
    function bound to it (attached when a dataflow is planned; None before)."""

    name: str  # without the `@`
    params: tuple[ColumnType, ...]
    result: ColumnType
    function: Callable[..., Any] | None = field(default=None, compare=False, repr=False)
    vectorized: bool = False

    def declaration(self) -> FunctorDecl:
        """A `.functor` declaring this signature (parameters named `x1`, `x2`...)."""
        params = tuple(Column(f"x{i + 1}", kind) for i, kind in enumerate(self.params))
        return FunctorDecl(self.name, params, self.result)


@dataclass(frozen=True, eq=False)
class Call:
    """A functor: `cat`, `strlen`, `substr`, `to_number`, `to_string`, `ord`, `min`, `max`,
    `range` (which generates several values: only as `x = range(...)`)...,
    or a user-defined one, `@name(...)` (`function` keeps the `@`); `functor` is its
    signature once checked (not compared: it follows from the program)."""

    function: str
    args: tuple[Term, ...]
    span: Span = field(default=NOWHERE, compare=False)
    functor: UserFunctor | None = field(default=None, compare=False, repr=False)

    def __eq__(self, other: object) -> bool:
        return _equal(self, other) if type(other) is type(self) else NotImplemented

    def __hash__(self) -> int:
        return _hash(self)


@dataclass(frozen=True, eq=False)
class Cast:
    """`as(value, type)`: `value` converted to `type` (ADR 0027); `kind` is the
    primitive type `type` erases to once checked (not compared: it follows from the
    program; None before, or when `type` is unknown)."""

    value: Term
    type: str  # as written: a ColumnType or a declared `.type` name
    span: Span = field(default=NOWHERE, compare=False)
    kind: ColumnType | None = field(default=None, compare=False, repr=False)

    def __eq__(self, other: object) -> bool:
        return _equal(self, other) if type(other) is type(self) else NotImplemented

    def __hash__(self) -> int:
        return _hash(self)


@dataclass(frozen=True)
class Aggregate:
    """`count : { body }`, `sum x : { body }`, `min x : atom` ...

    `target` is None for `count`. Variables of `body` that are not bound outside
    the aggregate are local to it; the others group it (Soufflé semantics).
    """

    function: AggregateFunction
    target: Term | None
    body: tuple[Literal, ...]
    span: Span = field(default=NOWHERE, compare=False)


Term: TypeAlias = Var | Wildcard | Const | BinOp | Neg | Call | Cast | Aggregate

# Operators, negations, calls and casts nest without bound (a sum of 400 terms is 400
# levels deep); their equality and hash walk them with an explicit stack, where a
# generated dataclass `__eq__` would recurse two or three frames a level in C.
_NESTED = (BinOp, Neg, Call, Cast)


def _own(term: BinOp | Neg | Call | Cast) -> tuple[object, ...]:
    """What a nested term compares besides its subterms."""
    if isinstance(term, BinOp):
        return ("BinOp", term.op)
    if isinstance(term, Call):
        return ("Call", term.function, len(term.args))
    if isinstance(term, Cast):
        return ("Cast", term.type)
    return ("Neg",)


def _parts(term: BinOp | Neg | Call | Cast) -> tuple[Term, ...]:
    if isinstance(term, BinOp):
        return (term.left, term.right)
    if isinstance(term, Call):
        return term.args
    if isinstance(term, Cast):
        return (term.value,)
    return (term.operand,)


def _equal(a: Term, b: Term) -> bool:
    pending = [(a, b)]
    while pending:
        x, y = pending.pop()
        if x is y:
            continue
        if type(x) is not type(y):
            return False
        if isinstance(x, _NESTED):
            assert isinstance(y, _NESTED)
            if _own(x) != _own(y):
                return False
            pending.extend(zip(_parts(x), _parts(y), strict=True))
        elif x != y:  # a leaf, or an aggregate (its own equality)
            return False
    return True


def _hash(term: Term) -> int:
    done: list[int] = []
    pending: list[tuple[Term, bool]] = [(term, False)]
    while pending:
        node, ready = pending.pop()
        if not isinstance(node, _NESTED):
            done.append(hash(node))
        elif not ready:
            pending.append((node, True))
            pending.extend((part, False) for part in reversed(_parts(node)))
        else:
            count = len(_parts(node))
            parts = tuple(done[len(done) - count :]) if count else ()
            del done[len(done) - count :]
            done.append(hash((_own(node), parts)))
    return done[0]


# --- literals (body elements) --------------------------------------------------


@dataclass(frozen=True)
class Atom:
    """`name(args)`; `name` may be qualified (`person.knows`)."""

    name: str
    args: tuple[Term, ...]
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Negation:
    """`!atom`: stratified negation."""

    atom: Atom
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Comparison:
    """`a < b`, `a = b`, ... and the builtin predicates `contains(a, b)`, `!contains(a, b)`
    (a is a substring of b) and `match(pattern, s)`."""

    op: ComparisonOp
    left: Term
    right: Term
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Disjunction:
    """`( a ; b, c )` inside a body. Normalized away before planning."""

    alternatives: tuple[tuple[Literal, ...], ...]
    span: Span = field(default=NOWHERE, compare=False)


Literal: TypeAlias = Atom | Negation | Comparison | Disjunction


# --- clauses and declarations --------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """`head :- body.`; a fact is a rule with an empty body."""

    head: Atom
    body: tuple[Literal, ...]
    span: Span = field(default=NOWHERE, compare=False)

    @property
    def is_fact(self) -> bool:
        return not self.body


@dataclass(frozen=True)
class Subsumption:
    """`r(x, d1) <= r(x, d2) :- d2 <= d1.` (Soufflé's subsumptive clause): a tuple of
    `r` matching `dominated` is removed while a tuple matching `dominating` exists
    for which `body` (comparisons over both atoms' variables) holds."""

    dominated: Atom
    dominating: Atom
    body: tuple[Literal, ...]
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # a ColumnType or a declared `.type` name (erased by the checker)
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Decl:
    """`.decl name(col: type, ...) [qualifiers]`.

    `semantics` is the input semantics of the relation when facts are inserted
    by transactions (`set` unless a qualifier says `multiset` or
    `last_write_wins`; the latter only for binary relations).
    """

    name: str
    columns: tuple[Column, ...]
    semantics: Semantics = "set"
    span: Span = field(default=NOWHERE, compare=False)
    qualifiers: tuple[str, ...] = field(default=(), compare=False)  # as written

    @property
    def arity(self) -> int:
        return len(self.columns)


@dataclass(frozen=True)
class TypeDecl:
    """`.type Name <: base`, `.type Name = base`, `.type Name = A | B`.

    Deltalog erases user types to their primitive base column type.
    """

    name: str
    bases: tuple[str, ...]
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class FunctorDecl:
    """`.functor name(a: number, b: symbol): number [stateful]`: a functor written in
    Python and bound at run time (`Database(functors=...)`). `stateful` is refused."""

    name: str
    params: tuple[Column, ...]
    result: str  # a ColumnType or a declared `.type` name (erased by the checker)
    stateful: bool = False
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Directive:
    """`.input r(filename="x", delimiter=",")`, `.output r`, `.printsize r`."""

    kind: Lit["input", "output", "printsize"]
    relation: str
    options: tuple[tuple[str, str], ...] = ()
    span: Span = field(default=NOWHERE, compare=False)

    def option(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.options:
            if k == key:
                return v
        return default


@dataclass(frozen=True)
class Program:
    """A parsed source text; items keep source order."""

    decls: tuple[Decl, ...] = ()
    types: tuple[TypeDecl, ...] = ()
    directives: tuple[Directive, ...] = ()
    rules: tuple[Rule, ...] = ()
    source: str = field(default="", compare=False, repr=False)
    pragmas: tuple[Pragma, ...] = ()
    functors: tuple[FunctorDecl, ...] = ()
    subsumptions: tuple[Subsumption, ...] = ()
    components: tuple[Component, ...] = ()
    instances: tuple[Instance, ...] = ()
    overrides: tuple[Override, ...] = ()  # only inside a component's body

    def extended(self, later: Program) -> Program:
        """This program's items followed by `later`'s, with `later`'s source text."""
        items = {f.name: getattr(self, f.name) + getattr(later, f.name) for f in fields(self)}
        return Program(**{**items, "source": later.source})


# --- components (Soufflé's `.comp` / `.init`; expanded away before checking) -------


@dataclass(frozen=True)
class ComponentType:
    """`Name` or `Name<A, B>`: a component and its type arguments (or, declaring
    it, its type parameters)."""

    name: str
    args: tuple[str, ...] = ()
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Component:
    """`.comp Name<T1, T2> : Base<T1>, Other { body }`: a template of declarations,
    rules and directives, instantiated by `.init`. `body.source` is the text that
    declared it."""

    name: str
    params: tuple[str, ...]
    bases: tuple[ComponentType, ...]
    body: Program
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Instance:
    """`.init name = Component<args>`: the component's relations and types become
    `name.relation` and `name.Type`."""

    name: str
    component: ComponentType
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Override:
    """`.override relation` in a component: the rules its bases give the
    (`overridable`) relation are dropped."""

    relation: str
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Pragma:
    """`.pragma "key" "value"`: a Soufflé option; every one is an optimisation or
    engine hint for Deltalog (none changes an answer), reported by `explain`."""

    key: str
    value: str = ""
    span: Span = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class Query:
    """A body with free variables, e.g. `reach(1, y)`.

    The answer columns are the named variables of the body, in order of first
    appearance (wildcards excluded).
    """

    body: tuple[Literal, ...]
    source: str = field(default="", compare=False, repr=False)
    span: Span = field(default=NOWHERE, compare=False)
