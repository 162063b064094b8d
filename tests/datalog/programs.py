"""Hypothesis strategies for VALID random Datalog programs and transaction streams.

Kept apart from the tests that use them (as `strategies.py` is for syntactic
ASTs). Programs are built as text from small templates, typed as they are
drawn, so that (almost) every draw passes `check_program`:

- base relations `e(number, number)`, `v(number)` and `s(symbol, number)` over
  tiny domains (numbers 0..3, symbols "a".."c"), so joins and negations hit;
- derived relations defined in order, in groups: one relation (maybe
  self-recursive, linearly or not) or two mutually recursive ones. A rule reads
  base relations, relations of earlier groups and (when recursive) its own group;
  negations and aggregates read only base relations and earlier groups, so the
  program is stratified by construction;
- bodies join atoms on shared variables (repeated variables, constants and
  wildcards inside atoms; sometimes a triangle, a cyclic join), then add
  comparisons, negations, aggregates (`count`, `sum`, `min`, `max`, `mean`,
  grouped by an outer variable or not, bound to a variable or used as an
  expression in its place: a head argument, an atom's, in arithmetic),
  arithmetic bindings and string functions. Anything that makes new values
  (arithmetic, `cat`, `to_string`) stays out of recursive rules, except
  `y = x + 1` guarded by `y < 5`, so every program reaches a finite fixpoint.

Streams are lists of transactions over the base relations; each change is
`(insert|retract, relation, row)`, drawn against a model of the current facts
so that streams retract present rows, retract absent ones, re-insert retracted
ones and change one relation several times in one transaction.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count as counter

from hypothesis import note
from hypothesis import strategies as st

from bench.analysis_data import CSPA
from datalog import Database
from datalog.eval import reference
from datalog.lang.checks import check_program, check_query
from datalog.lang.functions import Value
from datalog.lang.parser import parse_program, parse_query
from differential.tuning import TUNING, tuned

Types = tuple[str, ...]
Row = tuple[Value, ...]
Change = tuple[str, str, Row]  # ("insert" | "retract", relation, row)
Transaction = list[Change]

NUMBERS = (0, 1, 2, 3)
SYMBOLS = ("a", "b", "c")
BASE: dict[str, Types] = {
    "e": ("number", "number"),
    "v": ("number",),
    "s": ("symbol", "number"),
}
SIGNATURES: tuple[Types, ...] = (
    ("number", "number"),
    ("number", "number"),
    ("number",),
    ("number",),
    ("symbol", "number"),
    ("symbol",),
    ("number", "number", "number"),
    (),
)
COMPARE_NUMBERS = ("<", "!=", "=", "<=", ">")
COMPARE_SYMBOLS = ("!=", "=")


@dataclass(frozen=True)
class Generated:
    """A program's text, its relations' column types, and the derived ones in order."""

    text: str
    relations: dict[str, Types]
    derived: tuple[str, ...]

    @property
    def base(self) -> tuple[str, ...]:
        return tuple(BASE)


# --- values and constants -----------------------------------------------------------


def values(kind: str) -> st.SearchStrategy[Value]:
    if kind == "symbol":
        return st.sampled_from(SYMBOLS)
    if kind == "float":
        return st.sampled_from((0.5, 1.0, 1.5))
    return st.sampled_from(NUMBERS)


def literal_text(value: Value) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def rows(kinds: Types) -> st.SearchStrategy[Row]:
    return st.tuples(*(values(k) for k in kinds))


# --- one rule body ------------------------------------------------------------------


@dataclass
class Body:
    """A rule body under construction: its literals and its variables' types."""

    draw: st.DrawFn
    fresh: counter[int]
    literals: list[str] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)  # positively bound variables
    inlined: dict[str, str] = field(default_factory=dict)  # variable -> aggregate in its place

    def new_var(self, kind: str, prefix: str = "v") -> str:
        return f"{prefix}{next(self.fresh)}"

    def rule(self, head: str, args: Sequence[str]) -> str:
        """The rule `head(args) :- body.`, each inlined aggregate written in its
        result's place."""
        text = f"{head}({', '.join(args)}) :- {', '.join(self.literals)}."
        for var, aggregate in self.inlined.items():
            text = re.sub(rf"\b{var}\b", aggregate, text)
        return text

    def bound(self, kind: str) -> list[str]:
        return sorted(v for v, k in self.types.items() if k == kind)

    def atom(self, relation: str, kinds: Types, join_bias: float = 0.6) -> None:
        """A positive atom: joins on bound variables, new ones, constants, `_`."""
        args, local = [], dict(self.types)
        for kind in kinds:
            choices = ["new", "new", "const", "wild"]
            existing = sorted(v for v, k in local.items() if k == kind)
            if existing:
                choices += ["join"] * 4
            pick = self.draw(st.sampled_from(choices))
            if pick == "join":
                var = self.draw(st.sampled_from(existing))
            elif pick == "new":
                var = self.new_var(kind)
            elif pick == "const":
                args.append(literal_text(self.draw(values(kind))))
                continue
            else:
                args.append("_")
                continue
            local[var] = kind
            args.append(var)
        self.types = local
        self.literals.append(f"{relation}({', '.join(args)})")

    def triangle(self) -> None:
        """A cyclic join: e(x, y), e(y, z), e(z, x)."""
        x, y, z = (self.new_var("number") for _ in range(3))
        self.literals += [f"e({x}, {y})", f"e({y}, {z})", f"e({z}, {x})"]
        self.types.update({x: "number", y: "number", z: "number"})

    # -- extras, each applicable when the body binds what it needs --------------------

    def comparison(self) -> None:
        kind = self.draw(st.sampled_from(sorted({k for k in self.types.values() if k != "float"})))
        left = self.draw(st.sampled_from(self.bound(kind)))
        others = [v for v in self.bound(kind) if v != left]
        if self.draw(st.booleans()) and others:
            right = self.draw(st.sampled_from(others))
        else:
            right = literal_text(self.draw(values(kind)))
        ops = COMPARE_NUMBERS if kind == "number" else COMPARE_SYMBOLS
        self.literals.append(f"{left} {self.draw(st.sampled_from(ops))} {right}")

    def negation(self, readable: dict[str, Types]) -> None:
        relation = self.draw(st.sampled_from(sorted(readable)))
        args = []
        for kind in readable[relation]:
            options = ["const", "wild"] + ["var"] * 3 * bool(self.bound(kind))
            pick = self.draw(st.sampled_from(options))
            if pick == "var":
                args.append(self.draw(st.sampled_from(self.bound(kind))))
            elif pick == "const":
                args.append(literal_text(self.draw(values(kind))))
            else:
                args.append("_")
        self.literals.append(f"!{relation}({', '.join(args)})")

    def aggregate(self, readable: dict[str, Types]) -> None:
        """`n = f t : { atom }`, grouped by an outer variable or not."""
        relation = self.draw(st.sampled_from(sorted(readable)))
        kinds = readable[relation]
        function = self.draw(st.sampled_from(("count", "count", "sum", "min", "max", "mean")))
        numeric = [i for i, k in enumerate(kinds) if k == "number"]
        if function != "count" and not numeric:
            function = "count"
        target_at = self.draw(st.sampled_from(numeric)) if function != "count" else -1
        args, target = [], ""
        for i, kind in enumerate(kinds):
            if i == target_at:
                target = self.new_var(kind, "t")
                args.append(target)
                continue
            options = ["inner", "wild", "const"] + ["group"] * 2 * bool(self.bound(kind))
            pick = self.draw(st.sampled_from(options))
            if pick == "group":
                args.append(self.draw(st.sampled_from(self.bound(kind))))
            elif pick == "inner":
                args.append(self.new_var(kind, "i"))
            elif pick == "const":
                args.append(literal_text(self.draw(values(kind))))
            else:
                args.append("_")
        result = self.new_var("number", "n")
        head = "count" if function == "count" else f"{function} {target}"
        aggregate = f"{head} : {{ {relation}({', '.join(args)}) }}"
        if self.draw(st.integers(0, 2)) == 0:  # used as an expression wherever `result` is
            self.inlined[result] = aggregate
        else:
            self.literals.append(f"{result} = {aggregate}")
        self.types[result] = "float" if function == "mean" else "number"

    def arithmetic(self, recursive: bool) -> None:
        x = self.draw(st.sampled_from(self.bound("number")))
        y = self.new_var("number")
        if recursive:  # guarded, so recursion through it stays finite
            self.literals += [f"{y} = {x} + 1", f"{y} < 5"]
        else:
            op = self.draw(st.sampled_from(("+", "-", "*")))
            constant = self.draw(st.sampled_from((1, 2)))
            self.literals.append(f"{y} = {x} {op} {constant}")
        self.types[y] = "number"

    def string_function(self, recursive: bool) -> None:
        a = self.draw(st.sampled_from(self.bound("symbol")))
        forms = ["strlen"] + ([] if recursive else ["cat", "substr", "to_string"])
        form = self.draw(st.sampled_from(forms))
        if form == "strlen":
            y, kind, expr = self.new_var("number"), "number", f"strlen({a})"
        elif form == "cat":
            other = self.draw(st.sampled_from([*self.bound("symbol"), '"x"']))
            y, kind, expr = self.new_var("symbol"), "symbol", f"cat({a}, {other})"
        elif form == "substr":
            y, kind, expr = self.new_var("symbol"), "symbol", f"substr(cat({a}, {a}), 1, 2)"
        else:
            n = self.draw(st.sampled_from(self.bound("number") or ["7"]))
            y, kind, expr = self.new_var("symbol"), "symbol", f"to_string({n})"
        self.literals.append(f"{y} = {expr}")
        self.types[y] = kind

    def souffle_functor(self) -> None:
        """Soufflé's `range` (generating, or testing a bound variable), `as` and `ord`;
        range bounds are taken modulo small numbers, so recursion through them ends."""
        numbers, symbols = self.bound("number"), self.bound("symbol")
        forms = ["ord"] * bool(symbols) + ["range", "range", "member", "as"] * bool(numbers)
        if not forms:
            return
        form = self.draw(st.sampled_from(forms))
        if form == "ord":
            y, expr = self.new_var("number"), f"ord({self.draw(st.sampled_from(symbols))})"
        elif form == "member":  # `range` tests a variable, not an inlined aggregate
            tested = [n for n in numbers if n not in self.inlined]
            if not tested:
                return
            x = self.draw(st.sampled_from(tested))
            self.literals.append(
                f"{x} = range({self.draw(st.sampled_from(('-1, 3', '4, 0, -2')))})"
            )
            return
        else:
            x = self.draw(st.sampled_from(numbers))
            y = self.new_var("number")
            shapes = (
                (f"range({x} % 3, {x} % 5)", f"range(0, {x} % 4, 2)", f"range({x} % 4, -1, -1)")
                if form == "range"
                else (f"as(as({x}, float) / 2, number)", f"as(as({x}, unsigned) % 3u, number)")
            )
            expr = self.draw(st.sampled_from(shapes))
        self.literals.append(f"{y} = {expr}")
        self.types[y] = "number"

    # -- the head ----------------------------------------------------------------------

    def head_args(self, kinds: Types, recursive: bool) -> list[str]:
        args = []
        for kind in kinds:
            options = ["const"] + ["var"] * 6 * bool(self.bound(kind))
            if kind == "number" and self.bound("number") and not recursive:
                options.append("expr")
            pick = self.draw(st.sampled_from(options))
            if pick == "var":
                args.append(self.draw(st.sampled_from(self.bound(kind))))
            elif pick == "expr":
                args.append(f"{self.draw(st.sampled_from(self.bound('number')))} + 1")
            else:
                args.append(literal_text(self.draw(values(kind))))
        return args


@st.composite
def rule_text(
    draw: st.DrawFn,
    head: str,
    kinds: Types,
    lower: dict[str, Types],
    group: dict[str, Types],
    recursive: bool,
    fresh: counter[int],
) -> str:
    """One rule for `head`; recursive rules read `group`, all read `lower` positively."""
    body = Body(draw, fresh)
    if not recursive and draw(st.integers(0, 9)) == 0:
        body.triangle()
    else:
        first = draw(st.sampled_from(sorted(group if recursive else lower)))
        body.atom(first, (group if recursive else lower)[first])
    positive = {**lower, **group} if recursive else lower
    for _ in range(draw(st.integers(0, 2))):
        relation = draw(st.sampled_from(sorted(positive)))
        body.atom(relation, positive[relation])
    extras = draw(st.lists(st.sampled_from(EXTRAS), max_size=3))
    for extra in extras:
        if extra == "comparison" and any(k != "float" for k in body.types.values()):
            body.comparison()
        elif extra == "negation":
            body.negation(lower)
        elif extra == "aggregate":
            body.aggregate(lower)
        elif extra == "arithmetic" and body.bound("number"):
            body.arithmetic(recursive)
        elif extra == "string" and body.bound("symbol"):
            body.string_function(recursive)
        elif extra == "souffle":
            body.souffle_functor()
    args = body.head_args(kinds, recursive)
    return body.rule(head, args)


EXTRAS = ("comparison", "comparison", "negation", "aggregate", "arithmetic", "string", "souffle")


def _decl(name: str, kinds: Types) -> str:
    columns = ", ".join(f"c{i}: {k}" for i, k in enumerate(kinds))
    return f".decl {name}({columns})"


@st.composite
def programs(draw: st.DrawFn, max_groups: int = 3) -> Generated:
    """A checked-valid program over `BASE` with 1..`max_groups` groups of derived relations."""
    relations = dict(BASE)
    derived: list[str] = []
    rules: list[str] = []
    fresh = counter()
    for g in range(draw(st.integers(1, max_groups))):
        shape = draw(st.sampled_from(("plain", "recursive", "recursive", "mutual")))
        size = 2 if shape == "mutual" else 1
        names = [f"r{g}" if size == 1 else f"r{g}{'ab'[i]}" for i in range(size)]
        group = {n: draw(st.sampled_from(SIGNATURES)) for n in names}
        if shape == "mutual" and not all(group.values()):
            group = {n: k or ("number",) for n, k in group.items()}
        lower = dict(relations)
        for name, kinds in group.items():
            rules.append(draw(rule_text(name, kinds, lower, group, False, fresh)))
            if shape == "plain":
                rules.extend(
                    draw(rule_text(name, kinds, lower, group, False, fresh))
                    for _ in range(draw(st.integers(0, 1)))
                )
                continue
            for _ in range(draw(st.integers(1, 2))):
                rules.append(draw(recursive_rule(name, kinds, lower, group, fresh)))
        if shape == "mutual":  # make sure each reads the other
            a, b = names
            rules.append(draw(link_rule(a, group[a], b, group[b], fresh)))
            rules.append(draw(link_rule(b, group[b], a, group[a], fresh)))
        relations.update(group)
        derived.extend(names)
        if draw(st.integers(0, 5)) == 0:
            name = f"m{g}"
            rules.append(draw(mean_rule(name, lower)))
            relations[name] = ("number", "float")
            derived.append(name)
    decls = [_decl(n, k) for n, k in relations.items()]
    return Generated("\n".join(decls + rules) + "\n", relations, tuple(derived))


@st.composite
def recursive_rule(
    draw: st.DrawFn,
    head: str,
    kinds: Types,
    lower: dict[str, Types],
    group: dict[str, Types],
    fresh: counter[int],
) -> str:
    """A recursive rule: linear, non-linear (two recursive atoms) or a generic one."""
    shape = draw(st.sampled_from(("closure", "nonlinear", "generic", "generic")))
    if shape == "generic" or kinds != ("number", "number") or group.get(head) != kinds:
        return draw(rule_text(head, kinds, lower, group, True, fresh))
    x, y, z = (f"w{next(fresh)}" for _ in range(3))
    if shape == "closure":
        step = draw(st.sampled_from(sorted(n for n, k in lower.items() if k == kinds)))
        return f"{head}({x}, {z}) :- {head}({x}, {y}), {step}({y}, {z})."
    return f"{head}({x}, {z}) :- {head}({x}, {y}), {head}({y}, {z})."


@st.composite
def link_rule(
    draw: st.DrawFn, head: str, kinds: Types, other: str, other_kinds: Types, fresh: counter[int]
) -> str:
    """`head(...) :- other(...)`: the head takes the other relation's columns by type."""
    body = Body(draw, fresh)
    body.atom(other, other_kinds)
    return f"{head}({', '.join(body.head_args(kinds, True))}) :- {body.literals[0]}."


@st.composite
def mean_rule(draw: st.DrawFn, head: str, lower: dict[str, Types]) -> str:
    """`m(x, a) :- v(x), a = mean y : { e(x, y) }`, grouped or not, into a float column."""
    pairs = sorted(n for n, k in lower.items() if k[:2] == ("number", "number"))
    relation = draw(st.sampled_from(pairs))
    rest = ", _" * (len(lower[relation]) - 2)
    if draw(st.booleans()):
        return f"{head}(x, a) :- v(x), a = mean y : {{ {relation}(x, y{rest}) }}."
    return f"{head}(0, a) :- a = mean y : {{ {relation}(_, y{rest}) }}."


# --- transaction streams --------------------------------------------------------------


@st.composite
def streams(
    draw: st.DrawFn,
    relations: dict[str, Types] | None = None,
    max_transactions: int = 6,
    max_changes: int = 8,
) -> list[Transaction]:
    """Transactions of changes drawn against a model of the current facts."""
    relations = relations or BASE
    present: dict[str, set[Row]] = {r: set() for r in relations}
    gone: dict[str, set[Row]] = {r: set() for r in relations}
    out: list[Transaction] = []
    for n in range(draw(st.integers(1, max_transactions))):
        tx: Transaction = []
        size = st.integers(1, max_changes) if n else st.integers(max_changes // 2, 2 * max_changes)
        for _ in range(draw(size)):  # the first transaction loads a bulk of rows
            relation = draw(st.sampled_from(sorted(relations)))
            tx.append(draw(change(relation, relations[relation], present, gone)))
            op, _, row = tx[-1]
            (present if op == "insert" else gone)[relation].add(row)
            (gone if op == "insert" else present)[relation].discard(row)
        out.append(tx)
    return out


@st.composite
def change(
    draw: st.DrawFn,
    relation: str,
    kinds: Types,
    present: dict[str, set[Row]],
    gone: dict[str, set[Row]],
) -> Change:
    kinds_of = ["insert"] * 4 + ["retract_absent"]
    if present[relation]:
        kinds_of += ["retract_present"] * 3
    if gone[relation]:
        kinds_of += ["reinsert"]
    kind = draw(st.sampled_from(kinds_of))
    if kind == "retract_present":
        return ("retract", relation, draw(st.sampled_from(sorted(present[relation], key=repr))))
    if kind == "reinsert":
        return ("insert", relation, draw(st.sampled_from(sorted(gone[relation], key=repr))))
    row = draw(rows(kinds))
    return ("insert" if kind == "insert" else "retract", relation, row)


def apply(facts: dict[str, set[Row]], transaction: Sequence[Change]) -> None:
    """Replay one transaction on a model of the facts (set semantics, in order)."""
    for op, relation, row in transaction:
        if op == "insert":
            facts.setdefault(relation, set()).add(row)
        else:
            facts.setdefault(relation, set()).discard(row)


def fed(
    generated: Generated, stream: Sequence[Transaction]
) -> tuple[Database, dict[str, set[Row]]]:
    """A database of `generated` that committed `stream` a transaction at a time, and
    the facts it holds by then (the model `apply` keeps)."""
    db = Database()
    db.define(generated.text)
    facts: dict[str, set[Row]] = {}
    for transaction in stream:
        with db.transaction() as tx:
            for op, relation, row in transaction:
                (tx.insert if op == "insert" else tx.retract)(relation, [row])
        apply(facts, transaction)
    return db, facts


def reference_answers(
    generated: Generated, facts: dict[str, set[Row]], queries: Sequence[str]
) -> list[set[Row]]:
    """The reference evaluator's answer to each of `queries` over `facts` (what `fed`
    returns) under `generated`'s rules."""
    checked = check_program(parse_program(generated.text))
    computed = reference.evaluate(checked, {r: sorted(rows) for r, rows in facts.items()})
    return [
        set(reference.answer(check_query(parse_query(q), checked.schema), computed))
        for q in queries
    ]


# Tuning changes under which every size of a generated program takes numpy's paths
# (no Python-list kernels, no rows waiting unarranged): a tactic's twin test reads the
# generated programs with these, so the tactic meets the small inputs it is built for.
NUMPY_PATHS: dict[str, object] = {"few": 0, "few_pairs": 0, "recent_rows": 0, "deferred_rows": 0}


def cspa_database(n: int) -> Database:
    """A database of CSPA's rules (`bench.analysis_data.CSPA`) over `n` variables:
    each assigned from one of the five before it, plus a tenth more assignments and
    dereferences drawn at random (seed 0), inserted in two transactions."""
    rng = random.Random(0)
    assign = [(i, rng.randrange(max(1, i - 5), i + 1) if i else 0) for i in range(n)]
    assign += [(rng.randrange(n), rng.randrange(n)) for _ in range(n // 10)]
    db = Database()
    db.define(CSPA)
    db.insert("assign", assign)
    db.insert("dereference", [(rng.randrange(n), rng.randrange(n)) for _ in range(n // 10)])
    return db


def tunings_agree_with_the_reference(
    data: st.DataObject, tunings: Sequence[Mapping[str, object]]
) -> None:
    """The twin test of a tactic: a generated program fed a generated stream, every
    derived relation read whole under each of `tunings` (`Tuning.but` changes), gives
    the same answers under all of them, and the reference evaluator's."""
    generated: Generated = data.draw(programs())
    stream = data.draw(streams())
    note(generated.text)
    db, facts = fed(generated, stream)
    queries = [full_query(r, generated.relations[r]) for r in generated.derived]
    found = []
    for changes in tunings:
        with tuned(TUNING.but(**changes)):
            found.append([set(db.query(q)) for q in queries])
    assert all(answers == found[0] for answers in found[1:])
    expected = reference_answers(generated, facts, queries)
    for query, got, wanted in zip(queries, found[0], expected, strict=True):
        assert got == wanted, query


def format_stream(stream: Sequence[Transaction]) -> str:
    return "\n".join(f"tx {i}: {tx}" for i, tx in enumerate(stream))


# --- queries -------------------------------------------------------------------------


def full_query(relation: str, kinds: Types) -> str:
    return f"{relation}({', '.join(f'x{i}' for i in range(len(kinds)))})"


@st.composite
def constant_query(draw: st.DrawFn, generated: Generated) -> str:
    """A query on a derived relation with one column fixed to a constant."""
    candidates = [r for r in generated.derived if any(k != "float" for k in generated.relations[r])]
    if not candidates:
        relation, kinds = "e", BASE["e"]
    else:
        relation = draw(st.sampled_from(candidates))
        kinds = generated.relations[relation]
    at = draw(st.sampled_from([i for i, k in enumerate(kinds) if k != "float"]))
    args = [literal_text(draw(values(k))) if i == at else f"x{i}" for i, k in enumerate(kinds)]
    return f"{relation}({', '.join(args)})"
