"""Transitive closure by squaring: a linear closure rule made non-linear.

Layer: datalog (Spark back end). Imports the AST and the strata; no pyspark.

A recursive stratum shaped as the transitive closure of one relation `e`,

    p(x, y) :- e(x, y).
    p(x, z) :- p(x, y), e(y, z).      (or  p(x, z) :- e(x, y), p(y, z).)

with no other rule, fact or input row for `p`, has the same least fixpoint as

    p(x, y) :- e(x, y).
    p(x, z) :- p(x, y), p(y, z).

(both are `e+`). Evaluated semi-naively, round k of the linear rule finds the paths
of k + 1 edges, the non-linear one those of up to 2^k: a closure whose longest
shortest path has d edges takes about log2(d) rounds instead of d. On Spark a round
costs a few jobs whatever its size, so fewer, larger rounds win (ADR 0059).
"""

from __future__ import annotations

from collections.abc import Collection

from datalog.lang.ast import Atom, Rule, Var
from datalog.lang.schema import Schema
from datalog.lang.strata import Stratum


def squared(stratum: Stratum, schema: Schema, seeded: Collection[str]) -> dict[Rule, Rule]:
    """The rules to evaluate `stratum` with, each mapped to the program's rule it
    stands for (whose variable types it has): a linear transitive-closure rule
    replaced by its non-linear form when the stratum is exactly a closure (see the
    module), every rule itself otherwise. `seeded` names the relations with rows of
    their own (inputs and facts): a closure seeded with other rows is not `e+`."""
    rules = {rule: rule for rule in stratum.rules}
    if not stratum.recursive or len(stratum.relations) != 1 or len(rules) != 2:
        return rules
    (name,) = stratum.relations
    if name in seeded or schema[name].arity != 2:
        return rules
    base, step = sorted(rules, key=lambda r: len(r.body))
    edge = closure_edge(base, name)
    found = None if edge is None else linear_step(step, name, edge)
    if found is None:
        return rules
    x, y, z = found
    body = (Atom(name, (x, y), step.body[0].span), Atom(name, (y, z), step.body[1].span))
    return {base: base, Rule(step.head, body, step.span): step}


def closure_edge(base: Rule, name: str) -> str | None:
    """The relation `e` of a base rule `name(x, y) :- e(x, y)` (distinct variables,
    same order), or None."""
    if len(base.body) != 1 or not isinstance(base.body[0], Atom):
        return None
    atom = base.body[0]
    pair = distinct_vars(base.head.args)
    if atom.name == name or pair is None or atom.args != base.head.args:
        return None
    return atom.name


def linear_step(step: Rule, name: str, edge: str) -> tuple[Var, Var, Var] | None:
    """`(x, y, z)` of `name(x, z) :- name(x, y), edge(y, z)` or of
    `name(x, z) :- edge(x, y), name(y, z)` (distinct variables), else None."""
    if step.head.name != name or len(step.body) != 2:
        return None
    first, second = step.body
    if not isinstance(first, Atom) or not isinstance(second, Atom):
        return None
    if {first.name, second.name} != {name, edge} or {len(first.args), len(second.args)} != {2}:
        return None
    found = distinct_vars((*first.args, second.args[1]))
    if found is None:
        return None
    x, y, z = found
    if first.args[1] != second.args[0] or step.head.args != (x, z):
        return None
    return x, y, z


def distinct_vars(terms: tuple[object, ...]) -> tuple[Var, ...] | None:
    """`terms` when they are distinct named variables, else None."""
    if not all(isinstance(t, Var) for t in terms):
        return None
    names = {t.name for t in terms if isinstance(t, Var)}
    return tuple(t for t in terms if isinstance(t, Var)) if len(names) == len(terms) else None
