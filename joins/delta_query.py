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

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from differential.batch import Updates, compact_uniform, concat
from differential.dataflow import Operator, Scope, Stream
from differential.sort import unique_values
from differential.time import Time
from differential.tuning import TUNING
from joins.columns import ColumnsPipeline
from joins.extenders import PredicateExtender, Prefixes
from joins.few import Refused, RowsPipeline
from joins.pipeline import Constant, Pattern, Pipeline, Query, Stage, narrowed, plan_pipeline

__all__ = ["Constant", "DeltaQueryOp", "Pattern", "Pipeline", "Stage", "plan_pipeline"]


class Tactic(Protocol):
    """One pipeline's steps over prefixes held one way (`ColumnsPipeline`: numpy
    columns, the reference; `RowsPipeline`: Python lists, which may raise `Refused`)."""

    def start(self, vars_: tuple[str, ...], changes: Updates) -> Any: ...

    def empty(self, prefixes: Any) -> bool: ...

    def parts(self, prefixes: Any, stage: Stage) -> Iterable[Any]: ...

    def check(self, prefixes: Any, stage: Stage) -> Any: ...

    def finish(self, prefixes: Any) -> Updates: ...


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
        self.query = Query(
            self.patterns, self.constants, self.predicates, self.dtypes, self.out_vars
        )
        if TUNING.narrow_prefixes:  # each stage gathers what is read after it (ADR 0078)
            self.pipelines = [narrowed(self.query, p) for p in self.pipelines]
        integers = all(d.kind == "i" for d in self.dtypes.values())
        self.listed = [integers and self._listable(p) for p in self.pipelines]

    def ready(self, time: Time) -> bool:
        return any(p.by_both.has_delta(time) for p in self.patterns)

    def step(self, time: Time) -> None:
        order = self._binding_order(time)
        output = _Gathering(self.output)
        for pipeline in self.pipelines:
            delta = self.patterns[pipeline.source].by_both.delta(time)
            new = frozenset(order[: order.index(pipeline.source)])
            if delta is not None and not self._empty_product(pipeline.source, new, time):
                changes = delta.updates()
                if self.patterns[pipeline.source].negated:  # the factor is 1 - r
                    changes = changes.negate()
                # One time (and diff) for all where they agree (a round's changes): what
                # each stage gathers and joins with it stays one (`joined_times`), however
                # few they are when lookups join their times with it (ADR 0086).
                smallest = 2 if TUNING.joined_lookups else None
                times, diffs = compact_uniform(changes.times, changes.diffs, smallest)
                changes = Updates(changes.columns, times, diffs)
                for part in self._run(pipeline, changes, new, time):
                    output.add(part)
        output.flush()

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
        sample = unique_values(  # (not `np.unique`: see `unique_values`)
            np.linspace(0, len(delta) - 1, min(len(delta), TUNING.pipeline_sample)).astype(np.intp)
        )
        prefixes = Prefixes(self.patterns[source].vars, delta.updates().take(sample))
        everyone = frozenset(range(len(self.patterns)))
        extenders = ColumnsPipeline(self.query, everyone, time).proposers(pipeline.stages[0])
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
    ) -> Iterable[Updates]:
        """Pipeline `pipeline` from `changes`: on Python lists for a few changes when
        it may (`RowsPipeline`, which refuses a hub: so it runs to the end before
        anything is sent), else on columns, part by part."""
        if len(changes) <= TUNING.few and self.listed[pipeline.source]:
            try:
                return list(self._walk(RowsPipeline(self.query, new, time), pipeline, changes))
            except Refused:
                pass
        return self._walk(ColumnsPipeline(self.query, new, time), pipeline, changes)

    def _walk(self, tactic: Tactic, pipeline: Pipeline, changes: Updates) -> Iterator[Updates]:
        """The pipeline's algorithm, once for every tactic: the source's changes,
        checked; then stage by stage, its variable bound and its checks applied.

        Depth first over the parts an extension yields: each part is carried to
        the end before the next is proposed, so memory holds a chunk per stage and
        not a stage's whole product (hundreds of millions of triangles stream out
        in parts). An explicit stack, as bodies may have hundreds of stages."""
        stages = pipeline.stages
        first = tactic.check(
            tactic.start(self.patterns[pipeline.source].vars, changes), pipeline.first
        )
        walking: list[tuple[int, Iterator[Any]]] = [(0, iter([first]))]
        while walking:
            depth, parts = walking[-1]
            prefixes = None  # (the last part is not held while the next is built)
            prefixes = next(parts, None)
            if prefixes is None:
                walking.pop()
            elif tactic.empty(prefixes):
                continue
            elif depth == len(stages):
                yield tactic.finish(prefixes)
            else:
                stage = stages[depth]
                walking.append((depth + 1, _checked(tactic, prefixes, stage)))

    def _listable(self, pipeline: Pipeline) -> bool:
        """Whether the pipeline may run on Python lists (`joins.few`): bindings
        propose and validate, no negation, no constant proposes."""
        return all(
            not s.negations
            and not s.constants
            and all(len(self.patterns[j].vars) == 2 for j in s.proposers)
            for s in (pipeline.first, *pipeline.stages)
        )

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


class _Gathering:
    """A step's output parts, sent in batches of at most `TUNING.pairs` rows (a binary
    join's parts) or alone: few sends for a small step, and for a huge one a part at a time
    that its reader takes on before the next is made (a growing distinct counts the
    rows of known keys as they arrive, ADR 0072), none concatenated into a copy of
    a large batch."""

    def __init__(self, output: Stream) -> None:
        self.output = output
        self.parts: list[Updates] = []
        self.rows = 0

    def add(self, part: Updates) -> None:
        """Hold `part`, its times and diffs each one repeated value where all its rows
        agree (every output of a round lands at the round's time, and a set's diffs
        are ones): what waits for the next round and the arrangements' queues then
        holds the columns only (ADR 0062)."""
        if len(part):
            times, diffs = compact_uniform(part.times, part.diffs)
            if times is not part.times or diffs is not part.diffs:
                part = Updates(part.columns, times, diffs)
            if self.rows + len(part) > TUNING.pairs:  # a batch stays within `pairs` rows
                self.flush()
            if len(part) >= TUNING.pairs:  # large already: sent alone, not copied
                self.output.send(part)
                return
            self.parts.append(part)
            self.rows += len(part)

    def flush(self) -> None:
        if self.parts:
            parts, self.parts, self.rows = self.parts, [], 0
            batch = parts[0] if len(parts) == 1 else concat(parts)
            del parts  # (the parts are not held while their reader takes the batch on)
            self.output.send(batch)


def _checked(tactic: Tactic, prefixes: Any, stage: Stage) -> Iterator[Any]:
    """The parts `stage` extends `prefixes` to, each checked after that stage. A
    function, not a generator expression in the walk: the walk goes deeper before it
    draws the next part, and an expression would look its stage up only then, when
    the name is bound to a deeper one (checks of the wrong stage: lost rows, extra
    rows, or a variable not yet bound)."""
    for part in tactic.parts(prefixes, stage):
        checked = tactic.check(part, stage)
        del part  # (not held while the caller carries it on, nor while the next is built)
        yield checked
        del checked
