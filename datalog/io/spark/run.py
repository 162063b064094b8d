"""`deltalog run --engine spark`: fact files in, the same output files out.

Layer: datalog (Spark back end). Imports the checker, the fact-file
conventions of `datalog.io.sources.csv` (file names, options, value formatting)
and the Spark readers of `datalog.io.sources.spark`; pyspark only inside functions.

The `.input` files are read by Spark (`read_fact_files`, checked by one job), the program is
evaluated by `datalog.io.spark.evaluate`, and every `.output` relation is sorted
by Spark and streamed to its file (`toLocalIterator`), formatted exactly as
the embedded engine formats it. `.printsize` counts with Spark.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from datalog.io.sources.csv import FactFile, input_file, output_file, print_framed, write_file
from datalog.io.spark.evaluate import evaluate
from datalog.lang.checks import CheckedProgram, check_program
from datalog.lang.parser import parse_program

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def run(
    program: str,
    facts_dir: str | Path,
    output_dir: str | Path,
    spark: SparkSession | None = None,
    stdout: IO[str] | None = None,
) -> None:
    """Evaluate `program` on Spark like `deltalog run`; DatalogError on bad input."""
    from datalog.io.sources.spark import read_fact_files
    from datalog.io.spark.session import local_session

    stdout = stdout or sys.stdout
    checked = check_program(parse_program(program))
    spark = spark or local_session()
    inputs = read_fact_files(spark, input_files(checked, facts_dir))
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


def sorted_rows(frame: DataFrame) -> Iterable[tuple[Any, ...]]:
    """The rows of `frame`, sorted column by column, fetched a partition at a time."""
    return (tuple(row) for row in frame.orderBy(*frame.columns).toLocalIterator())


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
        rows = sorted_rows(relations[directive.relation])
        if str(output_dir) == "-" or (directive.option("IO") or "").lower() == "stdout":
            print_framed(stdout, file, rows)
            continue
        write_file(file, rows)
