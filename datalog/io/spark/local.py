"""A decomposable recursion evaluated as one Spark job: each task runs its part's
fixpoint with the embedded engine.

Layer: datalog (Spark back end). Imports `datalog.io.spark.decompose`,
`datalog.io.spark.transfer` and, inside tasks, `datalog.db` (the embedded engine);
pyspark only inside functions.

For a stratum `decompose.decomposition` accepts (ADR 0065):

1. the relations the recursive rules read are fetched to the driver as Arrow, at
   most `spark.deltalog.localRecursionBytes` of them (default 64 MB on a `local`
   master; on a cluster the plan is off unless the setting says otherwise, as its
   executors may have no Python; `0` turns it off): more, and the stratum runs
   round by round instead (`None`);
2. they are broadcast to the executors once, as Arrow IPC streams;
3. the exit rows (the relation's own rows and its exit rules' heads, derived on
   Spark) are hash-partitioned on the pivot column, and one Python task per
   partition inserts them and the broadcast relations into a `Database` holding
   the recursive rules, and answers the relation (`mapInArrow`);
4. the answers, disjoint by the pivot, are the relation: each task's batches come
   back as Arrow IPC blobs (a few binary values), checkpointed by one job, and the
   relation is their decoding (`transfer.decoded`: cached once a Spark plan reads
   it; `arrow_batches` reads the blobs themselves, ADR 0074).

So a recursion costs two jobs whatever its depth (the fetch, and the checkpoint,
planned statically so that its shuffle is not a job of its own), against two or
three a round. The price: Deltalog (and
pyarrow) must be importable by the executors' Python, as PySpark's
`PYSPARK_PYTHON` names it; a `local[...]` session uses the driver's interpreter.

A stratum without a pivot (`Decomposition.pivot` None: single-source reach) runs
in ONE task instead (`single_task_fixpoint`, ADR 0070): the exit rows and every
relation the recursive rules read are streamed into it as one tagged frame
(nothing is fetched to the driver, nothing broadcast), and the task answers the
whole fixpoint with the embedded engine. One job, one core: the embedded engine's
work, against the per-round plan's two jobs a round, each scanning what the round
joins. It is taken when Spark's estimate of what the task reads is at most
`spark.deltalog.singleTaskRecursionBytes` (default 4 GB on a `local` master when
local fixpoints are on; on a cluster the broadcast limit, i.e. off unless asked).

PySpark's public `mapInArrow` wraps the function with `pandas_udf`, which imports
and checks pandas; `datalog.io.spark.transfer.map_in_arrow` makes the same JVM call
with the UDF built directly (the Arrow iterator UDF needs no pandas).
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from datalog.io.spark.decompose import Decomposition, steps_program
from datalog.io.spark.session import static_plan
from datalog.io.spark.transfer import (
    arrow_collect,
    arrow_task,
    blob_task,
    decoded,
    estimated_bytes,
    held_batches,
)
from datalog.lang.schema import Schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LIMIT_KEY = "spark.deltalog.localRecursionBytes"
DEFAULT_LIMIT = 64 << 20  # Arrow bytes of the relations broadcast to every task
SINGLE_KEY = "spark.deltalog.singleTaskRecursionBytes"
DEFAULT_SINGLE = 4 << 30  # Spark's estimate of the bytes one task reads, locally
TAG = "_deltalog_relation"  # the column that says which relation a streamed row is of


def broadcast_limit(spark: SparkSession) -> int:
    """The session's limit on the bytes a decomposable recursion broadcasts: the
    setting's, else `DEFAULT_LIMIT` on a `local[...]` master and 0 (the plan off)
    on a cluster, whose executors may have Java only (README, "Spark")."""
    found = spark.conf.get(LIMIT_KEY, None)
    if found:
        return int(found)
    local = (spark.sparkContext.master or "").startswith("local")
    return DEFAULT_LIMIT if local else 0


def single_task_limit(spark: SparkSession) -> int:
    """The session's limit on Spark's estimate of the bytes a stratum without a
    pivot streams into its one task: the setting's, else 0 (off) when local
    fixpoints are off, `DEFAULT_SINGLE` on a `local[...]` master, and the broadcast
    limit on a cluster (where a task holds what it reads in its Python)."""
    found = spark.conf.get(SINGLE_KEY, None)
    if found:
        return int(found)
    limit = broadcast_limit(spark)
    local = (spark.sparkContext.master or "").startswith("local")
    return 0 if limit <= 0 else DEFAULT_SINGLE if local else limit


def fetched(frame: DataFrame, limit: int) -> bytes | None:
    """`frame`'s rows as one Arrow IPC stream when they take at most `limit` bytes,
    else None (at most a few rows more than the limit allows are fetched)."""
    if limit < 0:
        return None
    arity = max(1, len(frame.columns))
    batches = held_batches(frame)  # sent from the driver: no job to fetch it back
    if batches is None:
        batches = arrow_collect(frame.limit(limit // (8 * arity) + 1))
    if sum(batch.nbytes for batch in batches) > limit:
        return None
    sink = io.BytesIO()
    schema = batches[0].schema if batches else arrow_schema(frame)
    with pa.ipc.new_stream(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue()


def arrow_schema(frame: DataFrame) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(frame.schema, timezone="UTC", prefers_large_types=False)


def local_fixpoint(
    spark: SparkSession,
    plan: Decomposition,
    schema: Schema,
    relations: Mapping[str, DataFrame],
    exits: DataFrame,
) -> DataFrame | None:
    """`plan.relation`'s fixpoint from its exit rows `exits`, the recursion run inside
    one task per partition; None when the relations it reads exceed the limit."""
    limit = broadcast_limit(spark)
    if limit <= 0 or plan.pivot is None:
        return None
    shared: dict[str, bytes] = {}
    for name in plan.reads:
        blob = fetched(relations[name], limit - sum(map(len, shared.values())))
        if blob is None:
            return None
        shared[name] = blob
    handle = spark.sparkContext.broadcast(shared)
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or "8")
    seeds = exits.repartition(partitions, exits.columns[plan.pivot])
    task = partial(part_fixpoint, steps_program(plan, schema), plan.relation, handle)
    blobs = blob_task(seeds, task)
    answer = None
    if blobs is not None:
        with static_plan(spark):  # one job: adaptive execution runs the shuffle as another
            answer = decoded(blobs.localCheckpoint(), exits.schema)
    handle.unpersist()
    return answer


def part_fixpoint(
    text: str, relation: str, shared: Any, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Inside a task: the fixpoint of `text`'s rules from this partition's exit rows
    `batches` and the broadcast relations (`shared.value`, name -> IPC stream), as
    batches of the input's schema (columns `c0, c1, ...`)."""
    from datalog.db.database import Database

    seeds = [batch for batch in batches if batch.num_rows]
    if not seeds:
        return
    db = Database()
    db.define(text)
    with db.transaction() as tx:
        for name, blob in shared.value.items():
            table = pa.ipc.open_stream(blob).read_all()
            if table.num_rows:
                tx.insert(name, table)
        for batch in seeds:
            tx.insert(relation, batch)
    target = seeds[0].schema
    answer = db.query_arrow(f"{relation}({', '.join(target.names)})")
    columns = [answer.column(i).cast(field.type) for i, field in enumerate(target)]
    yield from pa.Table.from_arrays(columns, schema=target).to_batches(max_chunksize=100_000)


def single_task_fixpoint(
    spark: SparkSession,
    plan: Decomposition,
    schema: Schema,
    relations: Mapping[str, DataFrame],
    exits: DataFrame,
) -> DataFrame | None:
    """`plan.relation`'s fixpoint from its exit rows `exits`, computed by ONE task
    that reads the exit rows and `plan.reads` streamed (see the module); None when
    Spark's estimate of those exceeds the limit (or there is no bridge)."""
    limit = single_task_limit(spark)
    frames = [exits, *(relations[name] for name in plan.reads)]
    if limit <= 0 or sum(bounded_bytes(frame, limit) for frame in frames) > limit:
        return None
    names = [plan.relation, *plan.reads]
    arities = [schema[name].arity for name in names]
    task = partial(whole_fixpoint, steps_program(plan, schema), names, arities)
    blobs = arrow_task(tagged(frames), task)
    if blobs is None:
        return None
    with static_plan(spark):
        return decoded(blobs.localCheckpoint(), exits.schema)


def bounded_bytes(frame: DataFrame, limit: int) -> int:
    """Spark's estimate of `frame`'s bytes; without one, its rows counted (one job,
    at most a row past `limit` at 8 bytes a column) times 8 bytes a column."""
    found = estimated_bytes(frame)
    if found is not None:
        return found
    width = 8 * max(1, len(frame.columns))
    with static_plan(frame.sparkSession):  # one job: adaptive execution makes two
        return frame.limit(limit // width + 1).count() * width


def tagged(frames: list[DataFrame]) -> DataFrame:
    """The rows of every frame in one frame: `TAG` says which frame (its index) a row
    comes from, then each frame's columns in turn, NULL on the other frames' rows."""
    from pyspark.sql import functions as sf

    fields = [list(frame.schema.fields) for frame in frames]
    parts = []
    for k, frame in enumerate(frames):
        columns = [sf.lit(k).alias(TAG)]
        for j, own in enumerate(fields):
            for i, field in enumerate(own):
                value = sf.col(field.name) if j == k else sf.lit(None).cast(field.dataType)
                columns.append(value.alias(f"_r{j}c{i}"))
        parts.append(frame.select(*columns))
    result = parts[0]
    for part in parts[1:]:
        result = result.union(part)
    return result


def whole_fixpoint(
    text: str, names: list[str], arities: list[int], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Inside the one task: each row of `batches` inserted into the relation its `TAG`
    names (`names[k]`, whose `arities[k]` columns follow those of the names before),
    then `names[0]`'s fixpoint under `text`'s rules, as batches of columns `c0, c1,
    ...` typed as the streamed exit rows."""
    from datalog.db.database import Database

    db = Database()
    db.define(text)
    starts = [1 + sum(arities[:k]) for k in range(len(names))]
    target: list[pa.DataType] = []
    with db.transaction() as tx:
        for batch in batches:
            target = target or batch.schema.types[starts[0] : starts[0] + arities[0]]
            for k, rows in split(batch, len(names)):
                columns = rows.columns[starts[k] : starts[k] + arities[k]]
                tx.insert(names[k], pa.RecordBatch.from_arrays(columns, names=numbered(arities[k])))
    if not target:
        return
    answer = db.query_arrow(f"{names[0]}({', '.join(numbered(arities[0]))})")
    columns = [answer.column(i).cast(kind) for i, kind in enumerate(target)]
    table = pa.Table.from_arrays(columns, names=numbered(arities[0]))
    yield from table.to_batches(max_chunksize=100_000)


def split(batch: pa.RecordBatch, count: int) -> Iterator[tuple[int, pa.RecordBatch]]:
    """`(k, rows)` for each tag `k` below `count` with rows in `batch` (a batch is
    mostly of one frame: it is then not filtered)."""
    import pyarrow.compute as pc

    tags = batch.column(0)
    low, high = pc.min_max(tags).values()
    if low.as_py() == high.as_py():
        yield low.as_py(), batch
        return
    for k in range(count):
        rows = batch.filter(pc.equal(tags, k))
        if rows.num_rows:
            yield k, rows


def numbered(arity: int) -> list[str]:
    return [f"c{i}" for i in range(arity)]
