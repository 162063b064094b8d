"""Evaluate a checked program on Spark DataFrames, stratum by stratum.

Layer: datalog (Spark back end). Imports the checker's results, the reference
evaluator's scalar helpers (for program facts) and `datalog.io.spark.body`;
pyspark only inside functions.

The program is the one `check_program` returns, so parsing, checks and
stratification are shared with the embedded engine. Every relation is a
DataFrame with positional columns `c0, c1, ...` of Spark types long (number),
double (float) and string (symbol), holding a SET of rows.

- Inputs are read as they came, copies included: a body binds the same values
  either way, and heads and aggregates drop copies (`evaluate` returns every
  relation as a set); cached when a stratum evaluated by Spark's plans reads them.
- A non-recursive stratum: each relation is its base rows united with every
  rule's head rows, without copies, cached so later strata do not recompute it
  (its plan stays as long as the program, so no checkpoint is needed).
- A decomposable recursive stratum (`datalog.io.spark.decompose`: linear, one
  relation, a column its recursive rules pass through) whose other relations fit
  the broadcast limit: one job, each task computing its part's fixpoint with the
  embedded engine (`datalog.io.spark.local`, ADR 0065). A recursive stratum of one
  relation without such a column (or over that limit): one task computing the whole
  fixpoint, what it reads streamed in (ADR 0070), when Spark's estimate fits.
- Any other recursive stratum: semi-naive iteration. Round 0 applies every rule to the
  base rows, and its delta is those rows and the derived ones; afterwards each rule
  is applied once per positive atom of the stratum whose delta is not empty, that
  atom reading the previous round's delta (broadcast when it fits under Spark's
  broadcast threshold) and every other atom the full relation. The derived rows
  not in `full` are the next delta, checkpointed and counted by the one job that
  computes them (an observed metric; the count ends the iteration).
- Every delta is hash-partitioned by all its columns into the session's shuffle
  partitions and checkpointed by a static (non-adaptive) plan, which keeps that
  partitioning (an adaptive plan's checkpoint forgets it). `full` is the union of
  the deltas (a union of identically partitioned children stays partitioned), so
  a round's anti-join against `full` reads it where it lies and shuffles only the
  rows just derived; every `merge_every` rounds the pieces become one checkpoint.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from datalog.eval.reference import Solver
from datalog.io.spark.body import BodySolver
from datalog.io.spark.columns import SPARK_TYPES, Names
from datalog.io.spark.decompose import atoms_of, decomposition
from datalog.io.spark.local import local_fixpoint, single_task_fixpoint
from datalog.io.spark.session import prepare, static_plan
from datalog.io.spark.squaring import squared
from datalog.lang.ast import Atom, Rule
from datalog.lang.checks import CheckedProgram
from datalog.lang.errors import UnsupportedError
from datalog.lang.passes.variables import aggregate_groups
from datalog.lang.schema import RelationInfo
from datalog.lang.strata import Stratum

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Relations = dict[str, "DataFrame"]
Deltas = dict[str, tuple["DataFrame", int]]  # a round's new rows per relation, and how many


def evaluate(
    spark: SparkSession,
    checked: CheckedProgram,
    inputs: Mapping[str, DataFrame],
    *,
    merge_every: int = 16,
    verbose: bool = False,
    squaring: bool = True,
    local: bool = True,
) -> Relations:
    """Every relation of `checked`: the `inputs` (by position), the program's
    facts and everything the rules derive. With `local`, a decomposable recursion
    whose other relations fit the broadcast limit runs as one job, each task
    evaluating its part's fixpoint (`datalog.io.spark.local`); with `squaring`, a
    stratum that is the transitive closure of one relation is otherwise evaluated
    in its non-linear form (same fixpoint, about log2 of the rounds:
    `datalog.io.spark.squaring`)."""
    require_supported(checked)
    prepare(spark)
    relations = base_relations(spark, checked, inputs)
    seeded = {*inputs, *(fact.head.name for fact in checked.facts)}
    uncached = set(relations)  # the base relations: cached once a Spark plan reads them
    for stratum in checked.strata:
        found = local_stratum(spark, checked, relations, stratum, verbose) if local else None
        if found is None:
            cache_reads(relations, stratum, uncached)
            rules = {r: r for r in stratum.rules}
            if squaring:
                rules = squared(stratum, checked.schema, seeded)
            evaluator = StratumEvaluator(spark, checked, relations, rules, merge_every, verbose)
            found = evaluator.run(stratum)
        relations.update(found)
        uncached -= set(found)  # a stratum's answer is cached or checkpointed already
    for name in inputs:  # read as they came (bodies do not mind copies), returned as sets
        relations[name] = relations[name].distinct()
    return relations


def local_stratum(
    spark: SparkSession,
    checked: CheckedProgram,
    relations: Relations,
    stratum: Stratum,
    verbose: bool,
) -> Relations | None:
    """The relation of a decomposable recursive stratum, its fixpoint evaluated by
    one job of local tasks (ADR 0065); None when the stratum is not decomposable or
    what it reads is too large to broadcast."""
    plan = decomposition(stratum, checked.schema) if stratum.recursive else None
    if plan is None:
        return None
    evaluator = StratumEvaluator(spark, checked, relations, {r: r for r in plan.exits}, 1, False)
    derived = evaluator.derive(stratum, relations, None, {})[plan.relation]
    exits = union_all([relations[plan.relation], *filter(None, [derived])])
    found, how = None, f"one job of local fixpoints, pivot column {plan.pivot}"
    if plan.pivot is not None:
        found = local_fixpoint(spark, plan, checked.schema, relations, exits)
    if found is None:  # no pivot, or what it reads does not fit a broadcast
        found = single_task_fixpoint(spark, plan, checked.schema, relations, exits)
        how = "one task"
    if found is not None and verbose:
        print(f"stratum [{plan.relation}]: {how}", file=sys.stderr)
    return None if found is None else {plan.relation: found}


def cache_reads(relations: Relations, stratum: Stratum, uncached: set[str]) -> None:
    """Cache the base relations `stratum`'s rules read that are still `uncached` (and
    strike them off): its Spark plans read them once per rule and round. Not before:
    a relation only local fixpoints read is read once, and caching it would cost a
    pass that builds the cache (ADR 0070)."""
    for rule in stratum.rules:
        for atom in atoms_of(rule, set(uncached)):
            if atom.name in uncached:
                relations[atom.name] = relations[atom.name].cache()
                uncached.discard(atom.name)


def require_supported(checked: CheckedProgram) -> None:
    """`UnsupportedError` at the declaration of a relation Spark cannot hold (or at
    a subsumptive clause: Spark's semi-naive evaluation never removes tuples)."""
    for dominances in checked.dominances.values():
        message = "subsumption is not supported on Spark"
        raise UnsupportedError(message, dominances[0].span)
    for info in checked.schema.relations.values():
        if "unsigned" in info.types:
            message = f"`{info.name}`: unsigned columns are not supported on Spark"
            raise UnsupportedError(message, info.decl.span)
        if info.arity == 0:
            raise UnsupportedError(
                f"`{info.name}`: nullary relations are not supported on Spark", info.decl.span
            )


def rows_frame(
    spark: SparkSession, rows: Sequence[tuple[object, ...]], info: RelationInfo
) -> DataFrame:
    """A frame of the relation's types holding `rows`, built by the JVM alone: a
    generated table of literals (`createDataFrame` of Python rows is a Python RDD,
    which starts Python workers on the executors for every job that reads it)."""
    from pyspark.sql import functions as sf

    kinds = [SPARK_TYPES[t] for t in info.types]
    if not rows:
        empty = [sf.lit(None).cast(k).alias(f"c{i}") for i, k in enumerate(kinds)]
        return spark.range(0).select(*empty)
    structs = [
        sf.struct(
            *[
                sf.lit(v).cast(k).alias(f"c{i}")
                for i, (v, k) in enumerate(zip(row, kinds, strict=True))
            ]
        )
        for row in rows
    ]
    return spark.range(1).select(sf.inline(sf.array(*structs)))


def typed(frame: DataFrame, info: RelationInfo) -> DataFrame:
    """`frame`'s columns, by position, as `c0, c1, ...` of the relation's types."""
    from pyspark.sql import functions as sf

    if len(frame.columns) != info.arity:
        raise UnsupportedError(
            f"`{info.name}` has {info.arity} columns, the DataFrame {len(frame.columns)}"
        )
    spelled = {"long": "bigint"}  # how Spark writes a type's name back
    wanted = [
        (f"c{i}", spelled.get(SPARK_TYPES[t], SPARK_TYPES[t])) for i, t in enumerate(info.types)
    ]
    if [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == wanted:
        return frame  # typed already: the same frame (what is known of it stays)
    columns = [
        sf.col(f"`{name}`").cast(SPARK_TYPES[kind]).alias(f"c{i}")
        for i, (name, kind) in enumerate(zip(frame.columns, info.types, strict=True))
    ]
    return frame.select(*columns)


def base_relations(
    spark: SparkSession, checked: CheckedProgram, inputs: Mapping[str, DataFrame]
) -> Relations:
    """The inputs and the program's facts, as typed frames per relation (cached once a
    Spark plan reads them: `cache_reads`). An input keeps its copies: bodies bind the
    same values either way, heads and aggregates drop copies, and `evaluate` returns
    each relation as a set."""
    rows: dict[str, list[tuple[object, ...]]] = {}
    for fact in checked.facts:
        row = Solver({}, checked.schema, {}, {}).head_row(fact.head, {})
        if row is not None:
            rows.setdefault(fact.head.name, []).append(row)
    relations: Relations = {}
    for name, info in checked.schema.relations.items():
        if name in inputs and name not in rows:  # the input as it is
            frame = typed(inputs[name], info)
        elif name in inputs:
            frame = typed(inputs[name], info).unionByName(rows_frame(spark, rows[name], info))
        else:
            frame = rows_frame(spark, rows.get(name, []), info)
        relations[name] = frame
    unknown = sorted(set(inputs) - set(relations))
    if unknown:
        raise UnsupportedError(f"inputs for undeclared relations: {', '.join(unknown)}")
    return relations


class StratumEvaluator:
    """Computes the relations of one stratum from the (complete) earlier ones, with
    `rules` (the stratum's, or rules of the same fixpoint), each mapped to the
    program's rule whose variable types it has."""

    def __init__(
        self,
        spark: SparkSession,
        checked: CheckedProgram,
        relations: Relations,
        rules: Mapping[Rule, Rule],
        merge_every: int,
        verbose: bool,
    ) -> None:
        self.spark, self.checked = spark, checked
        self.relations = relations
        self.rules = rules
        self.merge_every = max(1, merge_every)
        self.verbose = verbose

    def run(self, stratum: Stratum) -> Relations:
        if not stratum.recursive:
            derived = self.derive(stratum, self.relations, None, {})
            full = {
                n: union_all([self.relations[n], *filter(None, [derived[n]])]).distinct()
                for n in stratum.relations
            }
            return {n: f.cache() for n, f in full.items()}
        return self.iterate(stratum)

    def iterate(self, stratum: Stratum) -> Relations:
        """Semi-naive rounds. Each relation's `full` is a union of the deltas found so
        far, every one hash-partitioned by all its columns into the same partitions, so
        a round's anti-join reads `full` where it lies and shuffles only derived rows;
        round 0's delta includes the base rows (one extra pass over them, no extra job).
        `older` holds the pieces of `full` before the last delta (unknown after a merge)."""
        derived = self.derive(stratum, self.relations, None, {})
        seeded = {n: union_all([self.relations[n], *filter(None, [derived[n]])]) for n in derived}
        delta = self.new_facts(seeded, {})
        pieces = {n: [frame] for n, (frame, _) in delta.items()}
        older: dict[str, list[DataFrame]] = {n: [] for n in pieces}
        rounds = 0
        while any(size for _, size in delta.values()):
            rounds += 1
            if rounds % self.merge_every == 0:
                pieces = {n: [self.merged(frames)] for n, frames in pieces.items()}
                older = {}
            full = {n: union_all(frames) for n, frames in pieces.items()}
            derived = self.derive(stratum, {**self.relations, **full}, delta, older)
            delta = self.new_facts(derived, full)
            older = {n: list(frames) for n, frames in pieces.items()}
            for name, (frame, size) in delta.items():
                if size:
                    pieces[name].append(frame)
            if self.verbose:
                sizes = ", ".join(f"{n} +{size:,}" for n, (_, size) in sorted(delta.items()))
                print(
                    f"stratum {sorted(stratum.relations)}: round {rounds}: {sizes}", file=sys.stderr
                )
        return {n: union_all(frames) for n, frames in pieces.items()}

    def new_facts(self, derived: Mapping[str, DataFrame | None], full: Relations) -> Deltas:
        """The derived rows not in `full` yet (all of them without a `full`), each
        hash-partitioned by all its columns, materialized and counted by ONE job (the
        count is observed while the checkpoint computes it): the next delta and its
        size. Heads have no NULLs, so a plain anti-join on every column is `EXCEPT`."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as sf

        found: Deltas = {}
        for name, frame in derived.items():
            if frame is None:  # no rule was applied: nothing new, and no job to say so
                found[name] = (rows_frame(self.spark, [], self.checked.schema[name]), 0)
                continue
            rows = Observation()
            new = fresh(frame, full.get(name))
            with static_plan(self.spark):
                new = new.observe(rows, sf.count(sf.lit(1)).alias("rows")).localCheckpoint()
            found[name] = (new, int(rows.get["rows"]))
        return found

    def merged(self, frames: list[DataFrame]) -> DataFrame:
        """The pieces of a relation as one checkpoint, partitioned as they are (their
        union keeps the layout): bounds the union a round plans and reads."""
        if len(frames) == 1:
            return frames[0]
        with static_plan(self.spark):
            return union_all(frames).localCheckpoint()

    def broadcast(self, frame: DataFrame, rows: int, arity: int) -> DataFrame:
        """`frame`, hinted to be broadcast to every join when its rows fit under Spark's
        own broadcast threshold (a checkpointed delta has no size estimate of its own)."""
        from pyspark.sql import functions as sf

        threshold = byte_size(self.spark.conf.get("spark.sql.autoBroadcastJoinThreshold") or "-1")
        return sf.broadcast(frame) if 0 <= rows * arity * 8 <= threshold else frame

    def derive(
        self,
        stratum: Stratum,
        relations: Relations,
        delta: Deltas | None,
        older: Mapping[str, list[DataFrame]],
    ) -> dict[str, DataFrame | None]:
        """Every rule's head rows; with `delta`, only those using some delta row (a rule
        is not applied to an empty delta); None for a relation no rule was applied to.
        A rule with several recursive atoms is applied once per atom reading the delta,
        the atoms before it reading `older` (the relation without that delta, where
        known; skipped when empty) and those after it the full relation: each
        derivation from two delta rows is made once, not once per atom."""
        found: dict[str, list[DataFrame]] = {n: [] for n in stratum.relations}
        for rule in self.rules:
            if delta is None:
                found[rule.head.name].append(self.apply(rule, relations, {}))
                continue
            atoms = recursive_atoms(rule, stratum)
            for i, atom in enumerate(atoms):
                frame, rows = delta[atom.name]
                before = [older.get(a.name) for a in atoms[:i]]
                if not rows or any(pieces == [] for pieces in before):
                    continue
                sources = {id(atom): self.broadcast(frame, rows, len(atom.args))}
                for earlier, pieces in zip(atoms[:i], before, strict=True):
                    if pieces is not None:
                        sources[id(earlier)] = union_all(pieces)
                found[rule.head.name].append(self.apply(rule, relations, sources))
        return {n: union_all(frames) if frames else None for n, frames in found.items()}

    def apply(
        self, rule: Rule, relations: Relations, sources: Mapping[int, DataFrame]
    ) -> DataFrame:
        groups = aggregate_groups(rule.head.args, rule.body)
        solver = BodySolver(self.spark, relations, self.checked.schema, groups)
        names = Names(self.checked.types_of(self.rules[rule]))
        frame = solver.solve(rule.body, solver.unit, names, sources)
        return solver.head(rule.head, frame, names)


def fresh(derived: DataFrame, full: DataFrame | None) -> DataFrame:
    """The rows of `derived` not in `full` (all of them without it), without copies and
    hash-partitioned by all their columns into the session's shuffle partitions: the
    de-duplication's own shuffle lays them out, after each task has dropped its copies
    (a partial aggregate before the exchange: a round of reach derives one row per
    edge it follows, mostly copies)."""
    new = derived.distinct()
    return new if full is None else absent(new, full)


def absent(new: DataFrame, full: DataFrame) -> DataFrame:
    """The rows of `new` not in `full` (same columns, no NULLs, both hash-partitioned
    by every column): a left outer join that builds its hash table from `new` and
    streams `full` where it lies, keeping the rows `full` did not match. A `left_anti`
    join builds from `full` or sorts it, i.e. every round would sort or hash the whole
    relation to find a few new rows."""
    from pyspark.sql import functions as sf

    columns = list(new.columns)
    seen = full.select(*[sf.col(c).alias(f"_old{c}") for c in columns])
    on = [sf.col(c) == sf.col(f"_old{c}") for c in columns]
    joined = new.hint("shuffle_hash").join(seen, on, "left_outer")
    return joined.where(sf.col(f"_old{columns[0]}").isNull()).select(*columns)


def union_all(frames: list[DataFrame]) -> DataFrame:
    result = frames[0]
    for frame in frames[1:]:
        result = result.union(frame)
    return result


def byte_size(text: str) -> int:
    """A Spark size setting (`10485760b`, `10m`, `-1`) in bytes."""
    text = text.strip().lower().removesuffix("b")
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}.get(text[-1:], 1)
    return int(text[:-1] if scale > 1 else text) * scale


def recursive_atoms(rule: Rule, stratum: Stratum) -> list[Atom]:
    """The positive atoms of `rule` that read a relation of its own stratum."""
    return [a for a in rule.body if isinstance(a, Atom) and a.name in stratum.relations]
