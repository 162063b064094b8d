"""Decomposable recursion: which strata can run their whole fixpoint inside tasks.

Layer: datalog (Spark back end). Imports the AST, the strata, the variable walkers
and the pretty-printer; no pyspark.

A recursive stratum is *decomposable* (BigDatalog's decomposable plans, ADR 0065)
when it derives one relation `r` and

- every rule with a stratum atom in its body is linear: exactly one atom of `r`,
  positive and at the top level of the body (none inside a negation, an aggregate
  or a disjunction); the other rules are exit rules;
- some column `k` of `r` (the pivot) is passed through unchanged by every recursive
  rule: the head's argument `k` and the recursive atom's argument `k` are the same
  variable.

Then the stratum's least fixpoint is the union over any partition of the exit
rows by their pivot value of the fixpoint each part reaches on its own, every
other relation read in full. Proof: a linear rule derives a fact from ONE fact of
`r` (and facts of complete, earlier relations), so every fact of the fixpoint has
a derivation chain from one exit row, and along the chain the pivot value never
changes; the chain stays inside the part of its exit row, and every part's facts
are facts of the whole fixpoint (monotone: each part's rules are the program's,
on a subset of its rows). Parts are disjoint in the pivot, so their answers are
disjoint: their union needs no de-duplication.

A recursive stratum of one relation with no pivot (single-source reach:
`r(y) :- r(x), e(x, y)` keeps no column of `r(x)`; or a rule that is not linear)
cannot be split that way, but it can still run in ONE task: the whole fixpoint from
all the exit rows, every relation it reads streamed into that task (ADR 0070). Its
plan is a `Decomposition` whose `pivot` is None.

`decomposition` is the planner's check; the rest (`steps_program`) is the text of
the program a task evaluates with the embedded engine: the recursive rules only,
the relations they read declared as plain inputs (the task inserts their rows).
"""

from __future__ import annotations

from dataclasses import dataclass

from datalog.lang.ast import Atom, Rule, Var
from datalog.lang.checks import check_program
from datalog.lang.errors import DatalogError
from datalog.lang.parser import parse_program
from datalog.lang.passes.variables import nodes
from datalog.lang.pretty import format_rule
from datalog.lang.schema import Schema
from datalog.lang.strata import Stratum


@dataclass(frozen=True)
class Decomposition:
    """How a decomposable stratum runs: `exits` on Spark, `steps` inside one task
    per part of `relation`'s exit rows, hash-partitioned on column `pivot`; the
    steps read `reads` (broadcast to every task). Without a pivot, the steps run in
    one task from every exit row, `reads` streamed into it."""

    relation: str
    pivot: int | None
    exits: tuple[Rule, ...]
    steps: tuple[Rule, ...]
    reads: tuple[str, ...]


def decomposition(stratum: Stratum, schema: Schema) -> Decomposition | None:
    """The stratum's decomposition (see the module): its pivot when it has one, a
    plan without a pivot (one task) when it has none, None when the stratum is not
    one recursive relation the embedded engine can take on its own."""
    if not stratum.recursive or len(stratum.relations) != 1:
        return None
    (name,) = stratum.relations
    exits = tuple(r for r in stratum.rules if not atoms_of(r, {name}))
    steps = tuple(r for r in stratum.rules if atoms_of(r, {name}))
    if not steps:
        return None
    pivot = None
    if all(linear_atom(step, name) for step in steps):
        columns = range(schema[name].arity)
        pivot = next((k for k in columns if passes_through(steps, name, k)), None)
    reads = sorted({a.name for s in steps for a in atoms_of(s, set(schema.relations))} - {name})
    plan = Decomposition(name, pivot, exits, steps, tuple(reads))
    return plan if accepted(steps_program(plan, schema)) else None


def accepted(text: str) -> bool:
    """Whether the embedded engine takes `text` (a rule that does not print back to
    a program of its own, e.g. one calling a user-defined functor, keeps the stratum
    on the per-round plan instead of failing inside a task)."""
    try:
        check_program(parse_program(text))
    except DatalogError:
        return False
    return True


def atoms_of(rule: Rule, names: set[str]) -> list[Atom]:
    """The atoms of `rule`'s body, at any depth, that read one of `names`."""
    found = nodes((), rule.body)
    return [node for node in found if isinstance(node, Atom) and node.name in names]


def linear_atom(rule: Rule, name: str) -> Atom | None:
    """The one atom of `name` in `rule`'s body when it is the only one at any depth
    and a positive literal of the body itself, else None."""
    atoms = atoms_of(rule, {name})
    if len(atoms) != 1 or not any(literal is atoms[0] for literal in rule.body):
        return None
    return atoms[0]


def passes_through(steps: tuple[Rule, ...], name: str, column: int) -> bool:
    """Every step's head has at `column` the variable its `name` atom has there."""
    for step in steps:
        atom = linear_atom(step, name)
        head = step.head.args[column]
        if atom is None or not isinstance(head, Var) or atom.args[column] != head:
            return False
    return True


def steps_program(plan: Decomposition, schema: Schema) -> str:
    """The program a task evaluates: `plan.relation` and `plan.reads` declared with
    their primitive types and columns `c0, c1, ...` (set semantics: the task inserts
    the exit rows and the read relations), and the recursive rules as written."""
    decls = []
    for name in (plan.relation, *plan.reads):
        columns = ", ".join(f"c{i}: {kind}" for i, kind in enumerate(schema[name].types))
        decls.append(f".decl {name}({columns})")
    return "\n".join([*decls, *(format_rule(step) for step in plan.steps)]) + "\n"
