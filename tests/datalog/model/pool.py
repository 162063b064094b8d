"""What the model test defines, redefines, writes and asks: a pool over a few relations.

The base relations are those of `tests.datalog.programs` (`e`, `v`, `s`, columns
`c0`, `c1`, tiny domains), so a program drawn by its `programs()` strategy can be
defined next to the pool's fragments (`generated_fragment`). Each fragment declares
its own derived relations and may read those of others (`needs`): it is offered
once they are declared. Every rule sits on one line, so a model can keep a
program as lines (`ModelState` in `state.py`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from datalog import vectorized
from tests.datalog.programs import BASE, NUMBERS, SYMBOLS, Generated, Types, literal_text

BASE_DECLS = tuple(
    f".decl {name}({', '.join(f'c{i}: {k}' for i, k in enumerate(kinds))})"
    for name, kinds in BASE.items()
)


@dataclass(frozen=True)
class Fragment:
    """A text for `define`: declarations, rules and facts, each on its own line."""

    name: str
    decls: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    needs: frozenset[str] = frozenset()  # relations it reads that others declare
    repeatable: bool = False  # facts only: it may be defined again

    @property
    def text(self) -> str:
        return "\n".join((*self.decls, *self.rules, *self.facts)) + "\n"

    @property
    def declares(self) -> frozenset[str]:
        return frozenset(_declared(line) for line in self.decls if line.startswith(".decl"))


def _declared(line: str) -> str:
    return line.split()[1].split("(")[0]


def fragment(name: str, text: str, needs: Sequence[str] = ()) -> Fragment:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    decls = tuple(line for line in lines if line.startswith("."))
    rules = tuple(line for line in lines if ":-" in line)
    facts = tuple(line for line in lines if not line.startswith(".") and ":-" not in line)
    return Fragment(name, decls, rules, facts, frozenset(needs))


FRAGMENTS: tuple[Fragment, ...] = (
    fragment(
        "closure",
        """
        .decl tc(c0: number, c1: number)
        tc(x, y) :- e(x, y).
        tc(x, z) :- tc(x, y), e(y, z).
        """,
    ),
    fragment(
        "negation",
        """
        .decl node(c0: number)
        .decl unreached(c0: number)
        node(x) :- e(x, _).
        node(y) :- e(_, y).
        node(x) :- v(x).
        unreached(x) :- node(x), !tc(0, x).
        """,
        needs=("tc",),
    ),
    fragment(
        "aggregates",
        """
        .decl deg(c0: number, c1: number)
        .decl heavy(c0: number)
        .decl total(c0: number)
        deg(x, n) :- v(x), n = count : { e(x, _) }.
        heavy(x) :- deg(x, n), n >= 2.
        total(n) :- n = sum y : { e(_, y) }.
        """,
    ),
    fragment(
        "mutual",
        """
        .decl odd(c0: number, c1: number)
        .decl even(c0: number, c1: number)
        odd(x, y) :- e(x, y).
        even(x, z) :- odd(x, y), e(y, z).
        odd(x, z) :- even(x, y), e(y, z).
        """,
    ),
    fragment(
        "symbols",
        """
        .decl named(c0: symbol, c1: number)
        .decl top(c0: symbol, c1: number)
        .decl avg(c0: symbol, c1: float)
        named(a, y) :- s(a, x), tc(x, y).
        top(a, m) :- s(a, _), m = max n : { s(a, n) }.
        avg(a, m) :- s(a, _), m = mean n : { s(a, n) }.
        """,
        needs=("tc",),
    ),
    fragment(
        "triangle",
        """
        .decl tri(c0: number, c1: number, c2: number)
        tri(x, y, z) :- e(x, y), e(y, z), e(z, x).
        """,
    ),
    fragment(
        "functor",
        """
        .functor mix(a: number, b: number): number
        .decl mixed(c0: number, c1: number)
        .decl mixreach(c0: number, c1: number)
        mixed(x, @mix(x, y)) :- e(x, y).
        mixreach(x, y) :- tc(x, y), @mix(x, y) > 0.
        """,
        needs=("tc",),
    ),
    fragment(
        "seeds",
        """
        .decl seed(c0: number)
        .decl fromseed(c0: number)
        seed(0).
        seed(2).
        fromseed(y) :- seed(x), tc(x, y).
        """,
        needs=("tc",),
    ),
    Fragment("edge facts", facts=("e(0, 1).", "e(1, 2).", "v(3)."), repeatable=True),
)

# Texts that must be rejected whole (and change nothing): (text, why).
BAD_DEFINES: tuple[tuple[str, str], ...] = (
    (".decl e(c0: number, c1: number)\n", "declared twice"),
    (".decl bad(c0: number)\nbad(x) :- e(x, y", "syntax"),
    (".decl bad(c0: number)\nbad(x) :- e(x, _), !bad(x).\n", "negative cycle"),
    (".decl bad(c0: symbol)\nbad(x) :- e(x, _).\n", "type mismatch"),
    (".decl bad(c0: number)\nbad(x) :- nothere(x).\n", "unknown relation"),
    (".decl bad(c0: number)\nbad(y) :- e(x, _).\n", "range restriction"),
)


@dataclass(frozen=True)
class Redefinition:
    """New rules for `relation` (one per line; "" removes them all)."""

    relation: str
    text: str
    needs: frozenset[str] = frozenset()

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(line.strip() for line in self.text.splitlines() if line.strip())


def _redefinition(relation: str, text: str, *needs: str) -> Redefinition:
    return Redefinition(relation, text, frozenset(needs))


REDEFINITIONS: tuple[Redefinition, ...] = (
    _redefinition("tc", "tc(x, y) :- e(x, y).\ntc(x, z) :- tc(x, y), tc(y, z)."),
    _redefinition("tc", "tc(x, y) :- e(x, y), x != y."),
    _redefinition("tc", ""),
    _redefinition("tc", "tc(x, y) :- e(x, y).\ntc(x, z) :- tc(x, y), e(y, z)."),
    # a cycle through negation once `unreached` exists (rejected, nothing changes)
    _redefinition("tc", "tc(x, y) :- e(x, y), !unreached(y).", "unreached"),
    _redefinition("unreached", "unreached(x) :- node(x), !tc(1, x)."),
    _redefinition("unreached", "unreached(x) :- node(x), !tc(0, x)."),
    _redefinition("deg", "deg(x, n) :- v(x), n = count : { e(_, x) }."),
    _redefinition("total", "total(n) :- n = max y : { e(y, _) }."),
    _redefinition("odd", "odd(x, y) :- e(x, y), x < y.\nodd(x, z) :- even(x, y), e(y, z)."),
    _redefinition("named", "named(a, x) :- s(a, x)."),
    _redefinition("mixed", "mixed(x, @mix(y, x)) :- e(x, y)."),
    _redefinition("tri", "tri(x, y, z) :- e(x, y), e(y, z), e(z, x), x < y."),
    _redefinition("tc", "tc(x, y) :- e(x, y", "tc"),  # a syntax error
    _redefinition("tc", "node(x) :- v(x).", "node"),  # another relation's rule
)


# --- generated programs ------------------------------------------------------------

_GENERATED_NAME = re.compile(r"\b(r\d+[ab]?|m\d+)\(")


def generated_fragment(generated: Generated, tag: int) -> Fragment:
    """A program drawn by `tests.datalog.programs.programs()`, its relations renamed
    `g<tag>_...` (so several can be defined) and its base declarations dropped."""
    text = _GENERATED_NAME.sub(lambda m: f"g{tag}_{m.group(1)}(", generated.text)
    lines = [line for line in text.splitlines() if line.strip()]
    base = set(BASE_DECLS)
    decls = tuple(line for line in lines if line.startswith(".decl") and line not in base)
    rules = tuple(line for line in lines if not line.startswith("."))
    return Fragment(f"generated {tag}", decls, rules)


# --- the functor ---------------------------------------------------------------------


def mix(a: int, b: int) -> int:
    return (a * 31 + b * 7) % 5 - 2


def functors(vectorize: bool, hook: Callable[[], None]) -> dict[str, object]:
    """`Database(functors=...)`: `mix`, calling `hook` first (a fault point)."""

    def plain(a: int, b: int) -> int:
        hook()
        return mix(a, b)

    def columns(a: Any, b: Any) -> Any:
        hook()
        return (np.asarray(a) * 31 + np.asarray(b) * 7) % 5 - 2

    return {"mix": vectorized(columns) if vectorize else plain}


# --- queries -------------------------------------------------------------------------

# Queries the checker refuses (a syntax error, an unknown relation, a wrong arity, a
# constant of the wrong type, a comparison of a number with a symbol, an unbound
# negated variable).
BAD_QUERIES = (
    "e(x, y",
    "edge(x, y)",
    "e(x)",
    'e("a", y)',
    'e(x, y), x < "a"',
    "v(x), !e(x, z)",
)


def BAD_EPOCHS(current: int) -> st.SearchStrategy[object]:  # noqa: N802 (a strategy)
    """`as_of` values that name no readable epoch for another reason than compaction."""
    return st.one_of(st.integers(current + 1, current + 3), st.just(-1), st.just("3"), st.just(2.0))


OUTSIDE: dict[str, Any] = {"number": 7, "unsigned": 7, "float": 7.5, "symbol": "zz"}


def domain(kind: str) -> tuple[Any, ...]:
    """Constants for a column: its domain and one value outside it."""
    if kind == "symbol":
        return (*SYMBOLS, OUTSIDE[kind])
    if kind == "float":
        return ()
    return (*NUMBERS, OUTSIDE[kind])


def atom(relation: str, args: Sequence[str]) -> str:
    return f"{relation}({', '.join(args)})"


def full_query(relation: str, kinds: Types) -> str:
    return atom(relation, [f"x{i}" for i in range(len(kinds))])


def query_shapes(
    relation: str, kinds: Types
) -> list[Callable[[Callable[[Sequence[Any]], Any]], str]]:
    """Query makers for one relation, each given a `pick` (hypothesis's sampler):
    the full relation, one or all columns constant (a shared multi-tenant
    dataflow), a comparison, a join with `e`, a negation."""
    variables = [f"x{i}" for i in range(len(kinds))]
    fixable = [i for i, k in enumerate(kinds) if domain(k)]
    numbers = [i for i, k in enumerate(kinds) if k == "number"]
    shapes: list[Callable[[Callable[[Sequence[Any]], Any]], str]] = [
        lambda pick: atom(relation, variables)
    ]
    if fixable:

        def constant(pick: Callable[[Sequence[Any]], Any]) -> str:
            at = pick(fixable)
            args = list(variables)
            args[at] = literal_text(pick(domain(kinds[at])))
            return atom(relation, args)

        def ground(pick: Callable[[Sequence[Any]], Any]) -> str:
            args = [
                literal_text(pick(domain(k))) if domain(k) else f"x{i}" for i, k in enumerate(kinds)
            ]
            return atom(relation, args)

        shapes += [constant, constant, ground]
    if numbers:
        at = numbers[-1]
        shapes.append(
            lambda pick: f"{atom(relation, variables)}, x{at} {pick(('<', '!='))} {pick(NUMBERS)}"
        )
        shapes.append(lambda pick: f"{atom(relation, variables)}, e(x{at}, y)")
        if len(kinds) == 1:
            shapes.append(lambda pick: f"v(x0), !{relation}(x0)")
    return shapes
