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
`knows(b, a)` after `knows(a, b)`, or a relation bound twice, or a source
variable equal to a constant) become validations right after the source.

A negated binding `!r(vars)` is the factor `1 - r(vars)` of the product: it
validates (`AntijoinExtender`) wherever its variables are bound, and its own
changes start a pipeline with negated diffs, so the telescoping sum, and
with it every result's count, stays exact when `r` changes too.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from differential.batch import Updates, concat
from differential.dataflow import Operator, Scope, Stream, check_budget, check_rows, row_limit
from differential.time import Time
from differential.tuning import TUNING
from joins import few
from joins.extenders import (
    AntijoinExtender,
    CollectionExtender,
    ConstantExtender,
    Extender,
    Owner,
    PredicateExtender,
    Prefixes,
    UnaryExtender,
)
from joins.pipeline import Constant, Pattern, Pipeline, Stage, plan_pipeline

__all__ = ["Constant", "DeltaQueryOp", "Pattern", "Pipeline", "Stage", "plan_pipeline"]


class DeltaQueryOp(Operator):
    """Maintains the conjunction of `patterns`, `constants` and `predicates` over `out_vars`."""

    name = "delta_query"

    def __init__(
        self,
        scope: Scope,
        patterns: Sequence[Pattern],
        predicates: Sequence[PredicateExtender],
        out_vars: Sequence[str],
        constants: Sequence[Constant] = (),
    ) -> None:
        super().__init__(scope)
        self.patterns = list(patterns)
        self.predicates = list(predicates)
        self.constants = list(constants)
        self.out_vars = tuple(out_vars)
        self.pipelines = [
            plan_pipeline(self.patterns, self.constants, self.predicates, i)
            for i in range(len(patterns))
        ]
        self.dtypes = {
            v: p.by_both.dtypes[p.vars.index(v)] for p in reversed(patterns) for v in p.vars
        }
        dtypes = [self.dtypes[v] for v in self.out_vars]
        self.output = Stream(scope, dtypes, "delta_query", producer=self)
        integers = all(d.kind == "i" for d in self.dtypes.values())
        self.listed = [integers and self._listable(p) for p in self.pipelines]

    def ready(self, time: Time) -> bool:
        return any(p.by_both.has_delta(time) for p in self.patterns)

    def step(self, time: Time) -> None:
        order = self._binding_order(time)
        parts = []
        for pipeline in self.pipelines:
            delta = self.patterns[pipeline.source].by_both.delta(time)
            new = frozenset(order[: order.index(pipeline.source)])
            if delta is not None and not self._empty_product(pipeline.source, new, time):
                changes = delta.updates()
                if self.patterns[pipeline.source].negated:  # the factor is 1 - r
                    changes = changes.negate()
                parts.append(self._run(pipeline, changes, new, time))
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
        Negated bindings come first: their pipelines then see the others old,
        and are skipped while those were empty.
        """
        n = len(self.patterns)
        negated = [j for j in range(n) if self.patterns[j].negated]
        positive = [j for j in range(n) if not self.patterns[j].negated]
        empty = [j for j in positive if self.patterns[j].by_both.visible(time, False) == 0]
        rest = [j for j in positive if j not in empty]
        if len(empty) > 1:
            empty.sort(key=lambda j: -self._estimate(j, time))
        return negated + rest + empty

    def _estimate(self, source: int, time: Time) -> float:
        """Values the first stage of pipeline `source` would propose, from a sample,
        were it to run last (every other binding seen new)."""
        delta = self.patterns[source].by_both.delta(time)
        pipeline = self.pipelines[source]
        if delta is None or not len(delta) or not pipeline.stages:
            return 0.0 if delta is None else float(len(delta))
        sample = np.unique(
            np.linspace(0, len(delta) - 1, min(len(delta), TUNING.pipeline_sample)).astype(np.intp)
        )
        prefixes = Prefixes(self.patterns[source].vars, delta.updates().take(sample))
        everyone = frozenset(range(len(self.patterns)))
        extenders = self._proposers(pipeline.stages[0], everyone)
        counts = np.min(np.stack([e.count(prefixes, time) for e in extenders]), axis=0)
        return float(counts.mean()) * len(delta)

    def _empty_product(self, source: int, new: frozenset[int], time: Time) -> bool:
        """Some other positive binding, as this pipeline sees it, is empty: nothing
        to derive (an empty negated binding is the factor one)."""
        return any(
            p.by_both.visible(time, j in new) == 0
            for j, p in enumerate(self.patterns)
            if j != source and not p.negated
        )

    def _run(
        self, pipeline: Pipeline, changes: Updates, new: frozenset[int], time: Time
    ) -> Updates:
        if len(changes) <= TUNING.few and self.listed[pipeline.source]:
            found = self._run_few(pipeline, changes, new, time)
            if found is not None:
                return found
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

    def _listable(self, pipeline: Pipeline) -> bool:
        """Whether the pipeline may run on Python lists (`joins.few`): bindings
        propose and validate, no negation, no constant proposes."""
        return all(
            not s.negations
            and not s.constants
            and all(len(self.patterns[j].vars) == 2 for j in s.proposers)
            for s in (pipeline.first, *pipeline.stages)
        )

    def _run_few(
        self, pipeline: Pipeline, changes: Updates, new: frozenset[int], time: Time
    ) -> Updates | None:
        """`_run` on Python prefixes (None: a lookup found too many entries, run numpy).

        Predicates filter the finished rows: they commute with extending."""
        vars_ = self.patterns[pipeline.source].vars
        prefixes = few.prefixes_of(changes)
        for stage in (pipeline.first, *pipeline.stages):
            extended: list[few.Prefix] | None = prefixes
            if stage.variable:
                bindings = [self._binding(j, vars_, stage.variable, new) for j in stage.proposers]
                extended = few.extend(prefixes, bindings, time)
                vars_ = (*vars_, stage.variable)
            checked = (
                None if extended is None else self._check_few(extended, vars_, stage, new, time)
            )
            if checked is None:
                return None
            prefixes = checked
        found = Prefixes(
            vars_, few.to_updates(prefixes, [self.dtypes[v] for v in vars_], len(time))
        )
        for stage in (pipeline.first, *pipeline.stages):
            for k in stage.predicates:
                found = self.predicates[k].filter(found, time)
        u = found.updates
        return Updates(tuple(u.columns[vars_.index(v)] for v in self.out_vars), u.times, u.diffs)

    def _check_few(
        self,
        prefixes: list[few.Prefix],
        vars_: tuple[str, ...],
        stage: Stage,
        new: frozenset[int],
        time: Time,
    ) -> list[few.Prefix] | None:
        """`_validate` on Python prefixes, but for predicates (see `_run_few`)."""
        for k in stage.fixed:
            const = self.constants[k]
            prefixes = few.constant(prefixes, vars_.index(const.var), const.value.item())
        for j in (*stage.unary, *stage.complete):
            where = [vars_.index(v) for v in self.patterns[j].vars]
            found = few.matched(prefixes, where, self.patterns[j].by_both, time, j in new)
            if found is None:
                return None
            prefixes = found
        return prefixes

    def _binding(
        self, j: int, vars_: tuple[str, ...], var: str, new: frozenset[int]
    ) -> few.Binding:
        """Binary binding `j` proposing `var` from the bound variable of prefixes in `vars_`."""
        p = self.patterns[j]
        first = p.vars[1] == var
        by_key = p.by_first if first else p.by_second
        assert by_key is not None
        key = p.vars[0] if first else p.vars[1]
        return few.Binding(vars_.index(key), by_key, j in new)

    def _extend(
        self, prefixes: Prefixes, stage: Stage, new: frozenset[int], time: Time
    ) -> Prefixes:
        """Bind `stage.variable`: the smallest count proposes, the other proposers and
        the negations now bound check the candidates, survivors are gathered.

        Under a row limit, an extension whose candidates all survive (one proposer,
        no negation) is refused before any is proposed if they are too many; any
        other once its survivors so far are."""
        extenders = self._proposers(stage, new)
        negations = [self._antijoin(j, new, stage.variable) for j in stage.negations]
        limited = row_limit() is not None
        if len(extenders) == 1 and not limited:  # nothing to choose between: no counts
            winner = np.zeros(len(prefixes), dtype=np.intp)
            sizes = None
        else:
            counts = np.stack([e.count(prefixes, time) for e in extenders])
            winner = np.argmin(counts, axis=0)
            sizes = np.take_along_axis(counts, winner[None, :], axis=0)[0]
            if len(extenders) == 1 and not negations:
                check_rows(int(sizes.sum()), "a join (delta query)")
        parts = []
        built = 0
        for rows in _chunks(len(prefixes), sizes):
            check_budget()  # a huge extension stops between two chunks when time is up
            for w, proposer in enumerate(extenders):
                mine = rows[winner[rows] == w]
                if not len(mine):
                    continue
                proposed = proposer.propose(prefixes, mine, time)
                for check in [e for o, e in enumerate(extenders) if o != w] + negations:
                    if len(proposed):
                        proposed = check.validate(prefixes, proposed, time)
                if len(proposed):
                    parts.append(proposed.extend(prefixes, stage.variable).updates)
                    built += len(proposed)
            if limited:
                check_rows(built, "a join (delta query)", at_least=True)
        vars_ = (*prefixes.vars, stage.variable)
        if not parts:
            empty = prefixes.updates.take(np.zeros(0, dtype=np.intp))
            column = np.zeros(0, dtype=self.dtypes[stage.variable])
            return Prefixes(vars_, empty.with_columns((*empty.columns, column)))
        return Prefixes(vars_, concat(parts))

    def _proposers(self, stage: Stage, new: frozenset[int]) -> list[Extender]:
        """Constants first (they win ties), then binary bindings, then unary ones."""
        var = stage.variable
        out: list[Extender] = [self._constant(k) for k in stage.constants]
        binary = [j for j in stage.proposers if len(self.patterns[j].vars) == 2]
        out += [self._collection(j, var, new) for j in binary]
        out += [self._unary(j, new) for j in stage.proposers if j not in binary]
        return out

    def _validate(
        self, prefixes: Prefixes, stage: Stage, new: frozenset[int], time: Time
    ) -> Prefixes:
        """The checks placed after `stage` (negations of a later stage ran in `_extend`)."""
        for k in stage.fixed:
            prefixes = self._constant(k).filter(prefixes, time)
        for j in stage.unary:
            prefixes = self._unary(j, new).filter(prefixes, time)
        for j in stage.complete:
            prefixes = self._whole(j, new).filter(prefixes, time)
        if not stage.variable:
            for j in stage.negations:
                prefixes = self._antijoin(j, new).filter(prefixes, time)
        for k in stage.predicates:
            prefixes = self.predicates[k].filter(prefixes, time)
        return prefixes

    def _collection(self, j: int, var: str, new: frozenset[int]) -> CollectionExtender:
        p = self.patterns[j]
        first = p.vars[1] == var
        by_key = p.by_first if first else p.by_second
        assert by_key is not None
        key = p.vars[0] if first else p.vars[1]
        both = (p.vars[0], p.vars[1])
        return CollectionExtender(key, var, by_key, p.by_both, both, j in new)

    def _unary(self, j: int, new: frozenset[int]) -> UnaryExtender:
        return UnaryExtender(self.patterns[j].vars[0], self.patterns[j].by_both, j in new)

    def _antijoin(self, j: int, new: frozenset[int], proposing: str = "") -> AntijoinExtender:
        p = self.patterns[j]
        return AntijoinExtender(p.vars, p.by_both, j in new, proposing)

    def _constant(self, k: int) -> ConstantExtender:
        const = self.constants[k]
        return ConstantExtender(const.var, const.value, self.dtypes[const.var])

    def _whole(self, j: int, new: frozenset[int]) -> UnaryExtender | CollectionExtender:
        p = self.patterns[j]
        if len(p.vars) == 1:
            return self._unary(j, new)
        assert p.by_first is not None
        both = (p.vars[0], p.vars[1])
        return CollectionExtender(p.vars[0], p.vars[1], p.by_first, p.by_both, both, j in new)

    def describe(self) -> str:
        shown = [p.show() for p in self.patterns]
        shown += [c.show() for c in self.constants]
        return f"delta_query({', '.join(shown)})"

    def inputs(self) -> Sequence[Operator | Stream]:
        """Every arrangement its pipelines read, each once, in binding order."""
        found = [a for p in self.patterns for a in (p.by_both, p.by_first, p.by_second) if a]
        return list(dict.fromkeys(found))

    def explain(self) -> list[str]:
        lines = []
        for pipe in self.pipelines:
            steps = [self._checks(pipe.first)] if self._checks(pipe.first) else []
            for s in pipe.stages:
                by = [f"const {self.constants[k].text}" for k in s.constants]
                for j in s.proposers:
                    unary = len(self.patterns[j].vars) == 1
                    by.append(f"{'unary ' if unary else ''}{self.patterns[j].show()}")
                step = f"{s.variable} by {'|'.join(by)}"
                checks = self._checks(s)
                steps.append(f"{step} ({checks})" if checks else step)
            source = self.patterns[pipe.source].show()
            lines.append(f"pipeline from d{source}: " + (", ".join(steps) or "-"))
        return lines

    def _checks(self, stage: Stage) -> str:
        """The validations after a stage: constants, whole, unary and negated
        bindings, predicates."""
        parts = [f"check {self.constants[k].show()}" for k in stage.fixed]
        bindings = (*stage.complete, *stage.unary, *stage.negations)
        parts += [f"check {self.patterns[j].show()}" for j in bindings]
        parts += [f"check {self.predicates[k].text}" for k in stage.predicates]
        return ", ".join(parts)


def _chunks(n: int, sizes: Owner | None) -> Iterator[Owner]:
    """Consecutive runs of the rows `0..n`: about `TUNING.proposals` candidates each by
    their proposal `sizes`, or `TUNING.prefixes` rows each when the sizes are unknown."""
    if sizes is None:
        edges = [*range(0, n, TUNING.prefixes), n]
    else:
        ends = np.cumsum(sizes)
        marks = np.arange(TUNING.proposals, int(ends[-1]) if n else 0, TUNING.proposals)
        edges = np.unique(np.r_[0, np.searchsorted(ends, marks, side="right"), n]).tolist()
    for lo, hi in itertools.pairwise(edges):
        yield np.arange(lo, hi, dtype=np.intp)
