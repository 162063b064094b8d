"""The fixed costs of a Spark evaluation: a recursive relation stays partitioned
between rounds (only the rows just derived are shuffled), a round is at most three
jobs, and the fact files of a run are checked by one job. Counted, never timed."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from datalog.eval.reference import evaluate as reference_evaluate
from datalog.io.sources.csv import FactFile, FactFileError
from datalog.io.spark.session import default_partitions
from datalog.lang.checks import check_program
from datalog.lang.parser import parse_program
from tests.spark.test_evaluate import collect_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

CLOSURE = """
.decl edge(x: number, y: number)
.decl path(x: number, y: number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
"""
CHAIN = [(i, i + 1) for i in range(9)] + [(3, 0)]  # a cycle, then a tail: 9 rounds


def jobs(spark: SparkSession) -> int:
    """How many jobs the session has run (they are numbered from 0)."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1) + 1


@contextlib.contextmanager
def no_broadcast(spark: SparkSession) -> Iterator[None]:
    key = "spark.sql.autoBroadcastJoinThreshold"
    before = spark.conf.get(key) or "10485760b"
    spark.conf.set(key, "-1")
    try:
        yield
    finally:
        spark.conf.set(key, before)


@pytest.mark.parametrize("merge_every", [2, 16])
def test_closure_rounds_stay_partitioned_and_cost_three_jobs_at_most(
    spark: SparkSession, merge_every: int
) -> None:
    from datalog.io.spark.evaluate import absent, evaluate
    from datalog.io.spark.session import static_plan

    checked = check_program(parse_program(CLOSURE))
    frame = spark.createDataFrame(CHAIN, "a long, b long")
    before = jobs(spark)
    stream = io.StringIO()
    with contextlib.redirect_stderr(stream):
        relations = evaluate(
            spark,
            checked,
            {"edge": frame},
            merge_every=merge_every,
            verbose=True,
            squaring=False,
            local=False,
        )
    used = jobs(spark) - before
    rounds = stream.getvalue().count("round ")
    expected = reference_evaluate(checked, {"edge": set(CHAIN)})["path"]
    assert collect_all({"path": relations["path"]})["path"] == expected
    # round 0 and every later round: at most the broadcasts of the delta and of the
    # small relation it joins, and the one job computing the next delta (adaptive
    # execution ran each shuffle stage as a job of its own: four to six a round);
    # merging the pieces every other round adds one job per merge
    merges = rounds // merge_every
    assert rounds == 9 and used <= 3 * (rounds + 1) + merges
    # the full relation is laid out as new rows are: an anti-join against it, planned
    # as a round plans it, shuffles the new rows only (one exchange, on their side)
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or "0")
    new = spark.createDataFrame([(1, 2), (5, 0)], "c0 long, c1 long")
    anti = new.repartition(partitions, "c0", "c1").join(
        relations["path"], ["c0", "c1"], "left_anti"
    )
    plan = io.StringIO()
    with no_broadcast(spark), static_plan(spark), contextlib.redirect_stdout(plan):
        anti.explain()
    assert plan.getvalue().count("Exchange") == 1, plan.getvalue()
    assert sorted(tuple(r) for r in anti.collect()) == [(5, 0)]
    # the round's own join builds its table from the new rows and streams the full
    # relation as it lies: no shuffle and no sort of it
    absent_rows = absent(new.repartition(partitions, "c0", "c1"), relations["path"])
    plan = io.StringIO()
    with no_broadcast(spark), static_plan(spark), contextlib.redirect_stdout(plan):
        absent_rows.explain()
    text = plan.getvalue()
    assert text.count("Exchange") == 1 and "Sort" not in text and "BuildLeft" in text, text
    assert sorted(tuple(r) for r in absent_rows.collect()) == [(5, 0)]


def test_fact_files_of_a_run_are_checked_by_one_job(spark: SparkSession, tmp_path: Path) -> None:
    from datalog.io.sources.spark import read_fact_files

    checked = check_program(parse_program(CLOSURE + ".decl name(x: number, s: symbol)\n"))
    schema = checked.schema
    (tmp_path / "edge.facts").write_text("1\t2\n2\t3\n")
    (tmp_path / "path.facts").write_text("7\t8\n")
    (tmp_path / "name.facts").write_text("1\tone\n")
    files = [FactFile(schema[n], tmp_path / f"{n}.facts") for n in ("edge", "path", "name")]
    before = jobs(spark)
    frames = read_fact_files(spark, files)
    assert jobs(spark) - before == 1
    found: dict[str, Any] = collect_all(frames)
    assert found == {"edge": {(1, 2), (2, 3)}, "path": {(7, 8)}, "name": {(1, "one")}}


def test_the_first_fact_file_with_a_bad_line_is_named(spark: SparkSession, tmp_path: Path) -> None:
    from datalog.io.sources.spark import read_fact_files

    schema = check_program(parse_program(CLOSURE)).schema
    (tmp_path / "edge.facts").write_text("1\t2\n")
    (tmp_path / "path.facts").write_text("7\tx\n")
    (tmp_path / "late.facts").write_text("1\n")
    files = [
        FactFile(schema["edge"], tmp_path / "edge.facts"),
        FactFile(schema["path"], tmp_path / "path.facts"),
        FactFile(schema["edge"], tmp_path / "late.facts"),
    ]
    with pytest.raises(FactFileError) as caught:
        read_fact_files(spark, files)
    assert caught.value.path == str(tmp_path / "path.facts")
    assert caught.value.text == "7\tx"


@pytest.mark.parametrize(
    ("master", "partitions"),
    [("local", 1), ("local[2]", 2), ("local[3, 2]", 3), ("spark://127.0.0.1:7077", 32)],
)
def test_a_local_session_shuffles_into_one_partition_per_core(master: str, partitions: int) -> None:
    assert default_partitions(master) == partitions


def test_program_facts_are_built_by_the_jvm_without_python_rows(spark: SparkSession) -> None:
    # facts of every type (and a relation without any) give the reference's answers,
    # from a plan that reads no Python RDD (it would start Python workers)
    from datalog.io.spark.evaluate import evaluate

    text = """
    .decl fact(x: number, s: symbol, f: float)
    fact(1, "one", 0.5). fact(-9223372036854775807, "", -2.25). fact(1, "one", 0.5).
    .decl none(x: number)
    .decl both(x: number, s: symbol)
    both(x, s) :- fact(x, s, _), !none(x).
    """
    checked = check_program(parse_program(text))
    relations = evaluate(spark, checked, {})
    expected = reference_evaluate(checked, {})
    found = collect_all({n: relations[n] for n in ("fact", "none", "both")})
    assert found == {n: expected[n] for n in ("fact", "none", "both")}
    for name in ("fact", "none"):
        plan = io.StringIO()
        with contextlib.redirect_stdout(plan):
            relations[name].explain()
        assert "ExistingRDD" not in plan.getvalue(), plan.getvalue()


def test_a_local_session_compiles_with_the_first_jit_tier(spark: SparkSession) -> None:
    """On a few cores the optimizing JIT's threads took the cores a short run needed
    (ADR 0059): a local session's JVM is started with the first tier only."""
    options = spark.conf.get("spark.driver.extraJavaOptions") or ""
    assert "-XX:TieredStopAtLevel=1" in options.split()


def test_a_rounds_derived_rows_lose_their_copies_before_their_shuffle(spark: SparkSession) -> None:
    from datalog.io.spark.evaluate import fresh
    from datalog.io.spark.session import static_plan

    derived = spark.createDataFrame([(1, 2)] * 5 + [(2, 3)], "c0 long, c1 long")
    with static_plan(spark):  # as a round checkpoints a delta
        full = fresh(spark.createDataFrame([(2, 3)], "c0 long, c1 long"), None).localCheckpoint()
    new = fresh(derived, full)
    plan = io.StringIO()
    with no_broadcast(spark), static_plan(spark), contextlib.redirect_stdout(plan):
        new.explain()
    text = plan.getvalue()
    # one exchange (the derived rows'; `full` lies as they do), with the partial
    # aggregate that drops each task's copies below it
    assert text.count("Exchange") == 1, text
    assert text.index("Exchange") < text.rindex("HashAggregate"), text
    assert [tuple(r) for r in new.collect()] == [(1, 2)]


def test_a_local_session_maps_the_classes_an_earlier_one_archived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADR 0070: the first local session writes a class-data-sharing archive at exit
    under a name of its own; a later one adopts it once its writer is gone and has
    its JVM map it. Options only: no JVM starts here."""
    import os

    from datalog.io.spark.session import class_archive_options

    archive = tmp_path / "spark-k.jsa"
    first = class_archive_options(tmp_path, "k", pid=4242)
    assert first[0] == f"-XX:ArchiveClassesAtExit={archive}.4242.tmp"
    written = tmp_path / "spark-k.jsa.4242.tmp"
    written.write_bytes(b"archive")
    assert class_archive_options(tmp_path, "k", pid=1) == []  # being written: none
    os.utime(written, (1, 1))  # settled long ago, and no process 4242 here
    if not Path("/proc/4242").exists():
        assert class_archive_options(tmp_path, "k")[0] == f"-XX:SharedArchiveFile={archive}"
        assert archive.read_bytes() == b"archive" and not written.exists()
    live = tmp_path / f"spark-j.jsa.{os.getpid()}.tmp"  # its writer still runs
    live.write_bytes(b"archive")
    os.utime(live, (1, 1))
    assert class_archive_options(tmp_path, "j") == []
    assert live.exists()
    monkeypatch.setenv("DELTALOG_SPARK_CDS", "0")
    assert class_archive_options() == []


def test_a_local_sessions_python_workers_fork_from_a_warmed_engine(spark: SparkSession) -> None:
    """ADR 0070: a local session's PySpark daemon imports and runs the engine once
    before forking workers (each worker paid for it before)."""
    import subprocess
    import sys

    from datalog.io.spark.daemon import warm

    assert spark.conf.get("spark.python.daemon.module") == "datalog.io.spark.daemon"
    warm()  # the warm-up itself runs
    probe = "import datalog.io.spark.daemon as d; import pyspark.daemon; print(d.__file__)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip().endswith("daemon.py"), done.stderr


def test_without_a_cache_folder_to_write_a_session_has_no_archive(tmp_path: Path) -> None:
    from datalog.io.spark.session import class_archive_options

    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the folder would go: mkdir fails
    assert class_archive_options(blocked / "cache", "k", pid=1) == []


def test_the_daemon_moves_sparks_own_pyspark_zip_behind_the_installed_package(
    tmp_path: Path,
) -> None:
    """ADR 0074: Spark puts `pyspark.zip` first on a worker's path; inside a pip
    install it holds the package's own sources, uncompiled."""
    from datalog.io.spark.daemon import prefer_installed_pyspark

    package = tmp_path / "site" / "pyspark"
    (package / "python" / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    zipped = str(package / "python" / "lib" / "pyspark.zip")
    py4j = str(package / "python" / "lib" / "py4j-0.10.9.9-src.zip")
    elsewhere = str(tmp_path / "spark-home" / "python" / "lib" / "pyspark.zip")  # no package
    path = [zipped, py4j, elsewhere, str(tmp_path / "site")]
    prefer_installed_pyspark(path)
    assert path == [elsewhere, str(tmp_path / "site"), zipped, py4j]


def test_a_local_sessions_workers_import_the_installed_pyspark(spark: SparkSession) -> None:
    """The workers' PySpark is the installed package's (byte-compiled), not the
    sources in Spark's zip (compiled again by every daemon: ADR 0074)."""

    import pyarrow as pa

    from datalog.io.spark.transfer import map_in_arrow

    def where(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyspark

        for _ in batches:
            yield pa.RecordBatch.from_arrays([pa.array([pyspark.__file__])], names=["f"])

    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField("f", StringType())])
    frame = map_in_arrow(spark.range(1, numPartitions=1), where, schema)
    assert frame is not None
    (found,) = {row.f for row in frame.collect()}
    assert ".zip" not in found and found.endswith("__init__.py"), found
