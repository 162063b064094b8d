"""`deltalog run --engine spark`: fact files in, the same output files out.

Layer: datalog (Spark back end). Imports the checker, the fact-file
conventions of `datalog.io.sources.csv` (file names, options, value formatting)
and the Spark readers of `datalog.io.sources.spark`; pyspark only inside functions.

The `.input` files are read on the driver as `deltalog run` reads them and sent to
Spark as Arrow (`driver_fact_files`: each parsed once, no job; ADR 0079), the program is
evaluated by `datalog.io.spark.evaluate`, and every `.output` relation is
fetched as Arrow batches (`arrow_batches`, a partition at a time) and written as
the embedded engine writes an answer: sorted and formatted by whole columns. A
relation whose batches exceed `spark.deltalog.driverSortBytes` (default 256 MB
of Arrow) is sorted by Spark instead and written a batch at a time, so the
driver holds at most that much of it. `.printsize` counts with Spark.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa

from datalog.db.change import Answer
from datalog.io.sources.csv import (
    FactFile,
    Rows,
    input_file,
    output_file,
    print_framed,
    write_file,
)
from datalog.io.spark.evaluate import evaluate
from datalog.io.spark.transfer import arrow_batches
from datalog.lang.checks import CheckedProgram, check_program
from datalog.lang.parser import parse_program

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SORT_KEY = "spark.deltalog.driverSortBytes"
DEFAULT_SORT = 256 << 20  # Arrow bytes of an output the driver holds to sort it itself


def run(
    program: str,
    facts_dir: str | Path,
    output_dir: str | Path,
    spark: SparkSession | None = None,
    stdout: IO[str] | None = None,
) -> None:
    """Evaluate `program` on Spark like `deltalog run`; DatalogError on bad input."""
    from datalog.io.sources.spark import driver_fact_files
    from datalog.io.spark.session import local_session

    stdout = stdout or sys.stdout
    checked = check_program(parse_program(program))
    spark = spark or local_session()
    inputs = driver_fact_files(spark, input_files(checked, facts_dir))
    relations = evaluate(spark, checked, inputs)
    write_outputs(checked, relations, output_dir, stdout)
    for directive in checked.directives:
        if directive.kind == "printsize":
            print(f"{directive.relation}\t{relations[directive.relation].count()}", file=stdout)


def input_files(checked: CheckedProgram, facts_dir: str | Path) -> list[FactFile]:
    schema = checked.schema
    return [
        input_file(d, schema.require(d.relation, d.span), facts_dir)
        for d in checked.directives
        if d.kind == "input"
    ]


def output_rows(frame: DataFrame) -> Rows:
    """The rows of `frame` as the output writers take them: an `Answer` (sorted and
    formatted by whole columns, as the embedded engine's) when its Arrow batches
    take at most `driverSortBytes`, else `sorted_rows`."""
    limit = driver_sort_limit(frame.sparkSession)
    batches: list[pa.RecordBatch] = []
    held = 0
    if limit > 0:
        for _, batch in arrow_batches(frame):
            held += batch.nbytes
            if held > limit:
                return sorted_rows(frame)
            batches.append(batch)
        return answer_of(batches, len(frame.columns))
    return sorted_rows(frame)


def driver_sort_limit(spark: SparkSession) -> int:
    found = spark.conf.get(SORT_KEY, None)
    return int(found) if found else DEFAULT_SORT


def answer_of(batches: list[pa.RecordBatch], arity: int) -> Answer:
    """The rows of `batches` as numpy columns (symbols as strings), as the embedded
    engine answers."""
    if not batches:
        return Answer({f"x{i}": _empty_column() for i in range(arity)}, 0)
    table = pa.Table.from_batches(batches).combine_chunks()
    columns = {f"x{i}": table.column(i).to_numpy() for i in range(arity)}
    return Answer(columns, table.num_rows)


def _empty_column() -> Any:
    import numpy as np

    return np.array([], dtype=np.int64)


def sorted_rows(frame: DataFrame) -> Iterable[tuple[Any, ...]]:
    """The rows of `frame`, sorted column by column by Spark, fetched as Arrow a
    partition at a time (in the sort's order) and handed out as tuples."""
    ordered = frame.orderBy(*frame.columns)
    for _, batch in arrow_batches(ordered):
        yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)


def write_outputs(
    checked: CheckedProgram,
    relations: dict[str, DataFrame],
    output_dir: str | Path,
    stdout: IO[str],
) -> None:
    for directive in checked.directives:
        if directive.kind != "output":
            continue
        file = output_file(directive, checked.schema.require(directive.relation), output_dir)
        rows = output_rows(relations[directive.relation])
        if str(output_dir) == "-" or (directive.option("IO") or "").lower() == "stdout":
            print_framed(stdout, file, rows)
            continue
        write_file(file, rows)
