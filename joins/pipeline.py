"""The plan of a delta query: its bindings and each pipeline's stages.

Layer: joins. Imports `differential` (arrangements) only for the bindings.

A delta query's inputs are bindings (`Pattern`: a relation over one or two
variables, or a negated relation over any number of them), constants
(`Constant`: a variable equal to a value) and predicates (comparisons over
bound variables). One pipeline starts from each binding's changes, negated
ones included; its stages bind the other variables one at a time. Each
check is placed at the first stage where its variables are all bound, so it
prunes as early as possible:

- right after the source (`first`): bindings all of whose variables the
  source binds (source conflicts such as `knows(a, b), knows(b, a)`, or a
  relation bound twice), unary bindings, constants on the source's variables,
  negations and predicates;
- at a stage binding `x`: binary bindings whose other variable is bound,
  unary bindings on `x` and constants equal to `x` all compete to propose
  (the smallest count wins, the others validate); then negations whose
  variables are now all bound; then predicates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from differential.operators.arrange import Arranged
from joins.extenders import PredicateExtender
from joins.order import variable_order


@dataclass
class Pattern:
    """One binding: relation `name` over distinct variables `vars`.

    `by_both` arranges all its columns as the key (it is also the source of the
    binding's changes); `by_first`/`by_second` key a binary relation by one
    column with the other as value. A `negated` binding (`!r(vars)`, any
    number of variables, its relation a set) only has `by_both`.
    """

    name: str
    vars: tuple[str, ...]
    by_both: Arranged
    by_first: Arranged | None = None
    by_second: Arranged | None = None
    size: int = 0
    negated: bool = False
    text: str = ""  # how explain shows it (default: the relation over its variables)

    def show(self) -> str:
        return self.text or f"{'!' if self.negated else ''}{self.name}({', '.join(self.vars)})"


@dataclass(frozen=True)
class Query:
    """What a delta query's pipelines read: its bindings, constants and predicates,
    each variable's column type, and the output's variables."""

    patterns: list[Pattern]
    constants: list[Constant]
    predicates: list[PredicateExtender]
    dtypes: dict[str, np.dtype]
    out_vars: tuple[str, ...]


@dataclass(frozen=True)
class Constant:
    """`var` equals `value` (of the variable's column type); `text` shows the value."""

    var: str
    value: np.generic
    text: str

    def show(self) -> str:
        return f"{self.var} = {self.text}"


@dataclass
class Stage:
    """Bind `variable` (proposers compete), then check what is now bound."""

    variable: str
    proposers: list[int]  # binary bindings with the other side bound, unary ones on it
    constants: list[int] = field(default_factory=list)  # constants on `variable`: propose
    negations: list[int] = field(default_factory=list)  # negated bindings now bound
    unary: list[int] = field(default_factory=list)  # (first stage) unary bindings
    complete: list[int] = field(default_factory=list)  # (first stage) fully bound bindings
    fixed: list[int] = field(default_factory=list)  # (first stage) constants on bound vars
    predicates: list[int] = field(default_factory=list)
    # the variables its extension gathers, in bound order (None: every one bound so far)
    keep: tuple[str, ...] | None = None


@dataclass
class Pipeline:
    source: int
    first: Stage  # validations right after the source (variable unused)
    stages: list[Stage]


def orderable(
    patterns: Sequence[Pattern] | Sequence[tuple[str, ...]],
    negated: Sequence[bool],
    constants: Sequence[str],
    source: int,
    sizes: Sequence[int] | None = None,
) -> list[str] | None:
    """Pipeline `source`'s variable order (None: some variable cannot be proposed)."""
    vars_ = [p.vars if isinstance(p, Pattern) else p for p in patterns]
    validators = {j for j, n in enumerate(negated) if n}
    return variable_order(vars_, source, sizes or [0] * len(vars_), constants, validators)


def plan_pipeline(
    patterns: Sequence[Pattern],
    constants: Sequence[Constant],
    predicates: Sequence[PredicateExtender],
    source: int,
) -> Pipeline:
    """The stages of pipeline `source`: variable order, extenders, validations."""
    negated = [p.negated for p in patterns]
    fixed_vars = [c.var for c in constants]
    order = orderable(patterns, negated, fixed_vars, source, [p.size for p in patterns])
    if order is None:
        raise ValueError("the bindings are not connected: no suitable variable order")
    plan = _Planner(patterns, constants, predicates, {source}, set(patterns[source].vars))
    first = Stage("", [])
    plan.settle(first)
    stages = []
    for var in order:
        stage = Stage(var, plan.proposers(var))
        stage.constants = [k for k, c in enumerate(constants) if c.var == var]
        plan.used.update(stage.proposers)
        plan.done_constants.update(stage.constants)
        plan.bound.add(var)
        plan.settle(stage, var)
        stages.append(stage)
    return Pipeline(source, first, stages)


def narrowed(query: Query, pipeline: Pipeline) -> Pipeline:
    """`pipeline` with each stage keeping only the variables that its own checks, the
    later stages and the output read (ADR 0078): a variable that only proposed the
    next one (`w` of `a(x, w), b(w, y)` with `x, y` out) is not gathered past it."""
    needed = set(query.out_vars)
    bound = [*query.patterns[pipeline.source].vars, *(s.variable for s in pipeline.stages)]
    stages = []
    for stage in reversed(pipeline.stages):
        bound.pop()
        needed |= _checked(query, stage)
        stages.append(
            replace(stage, keep=tuple(v for v in (*bound, stage.variable) if v in needed))
        )
        needed |= {v for j in stage.proposers for v in query.patterns[j].vars}
        needed |= {query.constants[k].var for k in stage.constants}
    return replace(pipeline, stages=stages[::-1])


def _checked(query: Query, stage: Stage) -> set[str]:
    """The variables read by the checks of `stage` (those after its extension, and its
    negations, which validate the extension's candidates)."""
    bindings = (*stage.negations, *stage.unary, *stage.complete)
    found = {v for j in bindings for v in query.patterns[j].vars}
    found |= {query.constants[k].var for k in stage.fixed}
    return found | {v for k in stage.predicates for v in query.predicates[k].needs}


@dataclass
class _Planner:
    patterns: Sequence[Pattern]
    constants: Sequence[Constant]
    predicates: Sequence[PredicateExtender]
    used: set[int]
    bound: set[str]
    done_constants: set[int] = field(default_factory=set)
    done_predicates: set[int] = field(default_factory=set)
    # Variable -> the bindings, constants and predicates that mention it, in order: a
    # step looks only at what the variable it binds can change (a long body costs
    # each binding a few looks, not one per step).
    by_var: dict[str, list[int]] = field(default_factory=dict)
    constants_of: dict[str, list[int]] = field(default_factory=dict)
    predicates_of: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for j, p in enumerate(self.patterns):
            for var in dict.fromkeys(p.vars):
                self.by_var.setdefault(var, []).append(j)
        for k, const in enumerate(self.constants):
            self.constants_of.setdefault(const.var, []).append(k)
        for k, pred in enumerate(self.predicates):
            for var in sorted(pred.needs):
                self.predicates_of.setdefault(var, []).append(k)

    def proposers(self, var: str) -> list[int]:
        """Unused positive bindings that can propose `var`: binary ones whose other
        variable is bound, unary ones on `var`."""
        return [
            j
            for j in self.by_var.get(var, ())
            if j not in self.used
            and not (p := self.patterns[j]).negated
            and len(p.vars) <= 2
            and (set(p.vars) - {var}) <= self.bound
        ]

    def settle(self, stage: Stage, var: str | None = None) -> None:
        """Add to `stage` every binding, constant and predicate now bound and unused
        (`var`: the one just bound, the only one whose bindings can have changed)."""
        patterns: Sequence[int] = range(len(self.patterns))
        constants: Sequence[int] = range(len(self.constants))
        predicates: Sequence[int] = range(len(self.predicates))
        if var is not None:
            patterns = self.by_var.get(var, [])
            constants = self.constants_of.get(var, [])
            predicates = sorted(set(self.predicates_of.get(var, [])))
        for j in patterns:
            p = self.patterns[j]
            if j not in self.used and set(p.vars) <= self.bound:
                if p.negated:
                    stage.negations.append(j)
                else:
                    (stage.unary if len(p.vars) == 1 else stage.complete).append(j)
                self.used.add(j)
        for k in constants:
            if k not in self.done_constants and self.constants[k].var in self.bound:
                stage.fixed.append(k)
                self.done_constants.add(k)
        for k in predicates:
            if k not in self.done_predicates and self.predicates[k].needs <= self.bound:
                stage.predicates.append(k)
                self.done_predicates.add(k)
