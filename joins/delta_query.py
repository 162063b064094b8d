"""Delta queries with worst-case optimal extension (3DF's Hector operator).

Layer: joins. Imports `differential`.

For a conjunction of bindings (relations over one or two variables), one
pipeline per binding starts from that binding's changes at the current time
and extends them variable by variable with GenericJoin (count / propose /
validate) against the other bindings' shared arrangements. No intermediate
result is arranged.

Concurrent changes: at each time the bindings are put in an order, and
pipeline `i` reads the bindings before it with this time's changes ("new") and
those after it without ("old"). Summing the pipelines telescopes to
`Π(R + dR) - Π R`, so every result is derived once even when several bindings
(or one relation bound several times) change together. With times joined
(`⊔`) at every lookup this holds for partially ordered times too, so the
operator works inside iteration scopes. The order is free; we choose it per
time so that the cheapest pipeline does the work when a dataflow starts.

Each extension runs over chunks of about a million candidates, which keeps its
temporaries in cache and its memory bounded, whatever the fan-out.

Source conflicts (a binding all of whose variables are already bound, like
`knows(b, a)` after `knows(a, b)`, or a relation bound twice) become
validations: lookups of the whole tuple in the binding's full-key arrangement.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from differential.batch import Updates, concat
from differential.dataflow import Operator, Scope, Stream
from differential.operators.arrange import Arranged
from differential.time import Time
from joins.extenders import (
    CollectionExtender,
    Owner,
    PredicateExtender,
    Prefixes,
    UnaryExtender,
)
from joins.order import variable_order

_PROPOSALS = 1 << 20  # candidates proposed and validated at once (they stay in cache)
_PREFIXES = 1 << 16  # prefixes extended at once when their proposal counts are unknown
_SAMPLE = 512  # changes sampled to estimate a pipeline's cost


@dataclass
class Pattern:
    """One binding: relation `name` over distinct variables `vars` (one or two).

    `by_both` arranges all its columns as the key (it is also the source of the
    binding's changes); `by_first`/`by_second` key a binary relation by one
    column with the other as value.
    """

    name: str
    vars: tuple[str, ...]
    by_both: Arranged
    by_first: Arranged | None = None
    by_second: Arranged | None = None
    size: int = 0


@dataclass
class Stage:
    """Bind `variable` through `proposers` (binary bindings); then validate the rest."""

    variable: str
    proposers: list[int]
    unary: list[int] = field(default_factory=list)
    complete: list[int] = field(default_factory=list)  # bindings now fully bound
    predicates: list[int] = field(default_factory=list)


@dataclass
class Pipeline:
    source: int
    first: Stage  # validations right after the source (variable unused)
    stages: list[Stage]


class DeltaQueryOp(Operator):
    """Maintains the conjunction of `patterns` (and `predicates`) over `out_vars`."""

    name = "delta_query"

    def __init__(
        self,
        scope: Scope,
        patterns: Sequence[Pattern],
        predicates: Sequence[PredicateExtender],
        out_vars: Sequence[str],
    ) -> None:
        super().__init__(scope)
        self.patterns = list(patterns)
        self.predicates = list(predicates)
        self.out_vars = tuple(out_vars)
        self.pipelines = [
            plan_pipeline(self.patterns, self.predicates, i) for i in range(len(patterns))
        ]
        dtypes = {v: p.by_both.dtypes[p.vars.index(v)] for p in patterns for v in p.vars}
        self.output = Stream(scope, [dtypes[v] for v in self.out_vars], "delta_query")

    def ready(self, time: Time) -> bool:
        return any(p.by_both.delta(time) is not None for p in self.patterns)

    def step(self, time: Time) -> None:
        order = self._binding_order(time)
        parts = []
        for pipeline in self.pipelines:
            delta = self.patterns[pipeline.source].by_both.delta(time)
            new = frozenset(order[: order.index(pipeline.source)])
            if delta is not None and not self._empty_product(pipeline.source, new, time):
                parts.append(self._run(pipeline, delta.updates(), new, time))
        if parts:
            self.output.send(concat(parts))

    def _binding_order(self, time: Time) -> list[int]:
        """The order of bindings that decides which each pipeline sees as new.

        Any order derives every result once (the sum telescopes). It matters for
        cost when some bindings were empty before `time` (as when a dataflow
        starts): a pipeline is skipped when it sees an empty binding, so with
        those bindings last only the pipeline of the very last one runs. We put
        last the one whose pipeline is estimated to propose the fewest values,
        which makes the work independent of the order of the rule's body.
        """
        n = len(self.patterns)
        empty = [j for j in range(n) if self.patterns[j].by_both.visible(time, False) == 0]
        rest = [j for j in range(n) if j not in empty]
        if len(empty) > 1:
            empty.sort(key=lambda j: -self._estimate(j, time))
        return rest + empty

    def _estimate(self, source: int, time: Time) -> float:
        """Values the first stage of pipeline `source` would propose, from a sample,
        were it to run last (every other binding seen new)."""
        delta = self.patterns[source].by_both.delta(time)
        pipeline = self.pipelines[source]
        if delta is None or not len(delta) or not pipeline.stages:
            return 0.0 if delta is None else float(len(delta))
        sample = np.unique(np.linspace(0, len(delta) - 1, min(len(delta), _SAMPLE)).astype(np.intp))
        prefixes = Prefixes(self.patterns[source].vars, delta.updates().take(sample))
        everyone = frozenset(range(len(self.patterns)))
        stage = pipeline.stages[0]
        extenders = [self._collection(j, stage.variable, everyone) for j in stage.proposers]
        counts = np.min(np.stack([e.count(prefixes, time) for e in extenders]), axis=0)
        return float(counts.mean()) * len(delta)

    def _empty_product(self, source: int, new: frozenset[int], time: Time) -> bool:
        """Some other binding, as this pipeline sees it, is empty: nothing to derive."""
        return any(
            p.by_both.visible(time, j in new) == 0
            for j, p in enumerate(self.patterns)
            if j != source
        )

    def _run(
        self, pipeline: Pipeline, changes: Updates, new: frozenset[int], time: Time
    ) -> Updates:
        prefixes = Prefixes(self.patterns[pipeline.source].vars, changes)
        prefixes = self._validate(prefixes, pipeline.first, new, time)
        for stage in pipeline.stages:
            if not len(prefixes):
                return self.output.empty()
            prefixes = self._extend(prefixes, stage, new, time)
            prefixes = self._validate(prefixes, stage, new, time)
        order = [prefixes.vars.index(v) for v in self.out_vars]
        u = prefixes.updates
        return Updates(tuple(u.columns[i] for i in order), u.times, u.diffs)

    def _extend(
        self, prefixes: Prefixes, stage: Stage, new: frozenset[int], time: Time
    ) -> Prefixes:
        extenders = [self._collection(j, stage.variable, new) for j in stage.proposers]
        if len(extenders) == 1:  # nothing to choose between: skip the counts
            winner = np.zeros(len(prefixes), dtype=np.intp)
            sizes = None
        else:
            counts = np.stack([e.count(prefixes, time) for e in extenders])
            winner = np.argmin(counts, axis=0)
            sizes = np.take_along_axis(counts, winner[None, :], axis=0)[0]
        parts = []
        for rows in _chunks(len(prefixes), sizes):
            for w, proposer in enumerate(extenders):
                mine = rows[winner[rows] == w]
                if not len(mine):
                    continue
                proposed = proposer.proposals(prefixes, mine, time)
                for o, other in enumerate(extenders):
                    if o != w and len(proposed):
                        proposed = other.check(prefixes, proposed, time)
                if len(proposed):
                    parts.append(proposed.extend(prefixes, stage.variable).updates)
        vars_ = (*prefixes.vars, stage.variable)
        if not parts:
            empty = prefixes.updates.take(np.zeros(0, dtype=np.intp))
            column = np.zeros(0, dtype=self.output.dtypes[self.out_vars.index(stage.variable)])
            return Prefixes(vars_, empty.with_columns((*empty.columns, column)))
        return Prefixes(vars_, concat(parts))

    def _validate(
        self, prefixes: Prefixes, stage: Stage, new: frozenset[int], time: Time
    ) -> Prefixes:
        for j in stage.unary:
            unary = UnaryExtender(self.patterns[j].vars[0], self.patterns[j].by_both, j in new)
            prefixes = unary.validate(prefixes, time)
        for j in stage.complete:
            prefixes = self._whole(j, new).validate(prefixes, time)
        for k in stage.predicates:
            prefixes = self.predicates[k].validate(prefixes, time)
        return prefixes

    def _collection(self, j: int, var: str, new: frozenset[int]) -> CollectionExtender:
        p = self.patterns[j]
        first = p.vars[1] == var
        by_key = p.by_first if first else p.by_second
        assert by_key is not None
        key = p.vars[0] if first else p.vars[1]
        both = (p.vars[0], p.vars[1])
        return CollectionExtender(key, var, by_key, p.by_both, both, j in new)

    def _whole(self, j: int, new: frozenset[int]) -> UnaryExtender | CollectionExtender:
        p = self.patterns[j]
        if len(p.vars) == 1:
            return UnaryExtender(p.vars[0], p.by_both, j in new)
        assert p.by_first is not None
        both = (p.vars[0], p.vars[1])
        return CollectionExtender(p.vars[0], p.vars[1], p.by_first, p.by_both, both, j in new)

    def describe(self) -> str:
        return "delta_query(" + ", ".join(self._show(j) for j in range(len(self.patterns))) + ")"

    def explain(self) -> list[str]:
        lines = []
        for pipe in self.pipelines:
            steps = [self._checks(pipe.first)] if self._checks(pipe.first) else []
            for s in pipe.stages:
                step = f"{s.variable} by {'|'.join(self._show(j) for j in s.proposers)}"
                checks = self._checks(s)
                steps.append(f"{step} ({checks})" if checks else step)
            lines.append(f"pipeline from d{self._show(pipe.source)}: " + (", ".join(steps) or "-"))
        return lines

    def _checks(self, stage: Stage) -> str:
        """The validations after a stage: whole bindings, unary bindings, predicates."""
        parts = [f"check {self._show(j)}" for j in (*stage.complete, *stage.unary)]
        parts += [f"check {self.predicates[k].text}" for k in stage.predicates]
        return ", ".join(parts)

    def _show(self, j: int) -> str:
        return f"{self.patterns[j].name}({', '.join(self.patterns[j].vars)})"


def _chunks(n: int, sizes: Owner | None) -> Iterator[Owner]:
    """Consecutive runs of the rows `0..n`: about `_PROPOSALS` candidates each by
    their proposal `sizes`, or `_PREFIXES` rows each when the sizes are unknown."""
    if sizes is None:
        edges = [*range(0, n, _PREFIXES), n]
    else:
        ends = np.cumsum(sizes)
        marks = np.arange(_PROPOSALS, int(ends[-1]) if n else 0, _PROPOSALS)
        edges = np.unique(np.r_[0, np.searchsorted(ends, marks, side="right"), n]).tolist()
    for lo, hi in itertools.pairwise(edges):
        yield np.arange(lo, hi, dtype=np.intp)


def plan_pipeline(
    patterns: Sequence[Pattern], predicates: Sequence[PredicateExtender], source: int
) -> Pipeline:
    """The stages of pipeline `source`: variable order, extenders, validations."""
    vars_ = [p.vars for p in patterns]
    order = variable_order(vars_, source, [p.size for p in patterns])
    if order is None:
        raise ValueError("the bindings are not connected: no suitable variable order")
    used = {source}
    bound = set(patterns[source].vars)
    done_predicates: set[int] = set()
    first = Stage("", [])
    _settle(first, patterns, predicates, bound, used, done_predicates)
    stages = []
    for var in order:
        proposers = [
            j
            for j, p in enumerate(patterns)
            if j not in used
            and len(p.vars) == 2
            and var in p.vars
            and (set(p.vars) - {var}) <= bound
        ]
        stage = Stage(var, proposers)
        used.update(proposers)
        bound.add(var)
        _settle(stage, patterns, predicates, bound, used, done_predicates)
        stages.append(stage)
    return Pipeline(source, first, stages)


def _settle(
    stage: Stage,
    patterns: Sequence[Pattern],
    predicates: Sequence[PredicateExtender],
    bound: set[str],
    used: set[int],
    done: set[int],
) -> None:
    """Add to `stage` every binding and predicate that is now fully bound and unused."""
    for j, p in enumerate(patterns):
        if j not in used and set(p.vars) <= bound:
            (stage.unary if len(p.vars) == 1 else stage.complete).append(j)
            used.add(j)
    for k, pred in enumerate(predicates):
        if k not in done and pred.needs <= bound:
            stage.predicates.append(k)
            done.add(k)
