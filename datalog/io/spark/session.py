"""The SparkSession the evaluator and the loaders expect.

Layer: datalog (Spark back end). Imports pyspark inside functions only.

Deltalog's integers wrap around (docs/adr/0004), so the session runs with ANSI
mode off: `+ - *` on longs wrap like Java, and division by zero yields NULL,
which the evaluator reads as "no value" (the binding is dropped). Adaptive
query execution stays on (it is Spark's default; `prepare` insists).

`spark_session(master)` returns the process's session, creating it only if
none runs (`getOrCreate`), so the CLI, the loaders and the evaluator share one
JVM; `master` may be `local[N]`, `spark://host:port` (a standalone cluster) or
anything else `spark-submit --master` takes. No path here uses pandas
(ADR 0042).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REQUIRED_CONF = {"spark.sql.ansi.enabled": "false", "spark.sql.adaptive.enabled": "true"}
DEFAULT_MASTER = "local[*]"


def spark_session(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    *,
    shuffle_partitions: int | None = None,
    app: str = "deltalog",
) -> SparkSession:
    """The running session, or a new one on `master` (default `$DELTALOG_SPARK_MASTER`,
    else `local[*]`) with `conf` (`spark.*` options); no UI, no progress bars, quiet
    logs. `conf` and `shuffle_partitions` apply to a new session only (the SQL options
    to a running one too). A new local session's JVM compiles with the JIT's first
    tier only and maps a class archive (`spark.driver.extraJavaOptions`, which
    `conf` may replace), and its Python workers fork from a daemon that has warmed
    the engine (`spark.python.daemon.module`; ADR 0070)."""
    from pyspark.sql import SparkSession

    _quiet_pandas_probe()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this venv
    master = master or os.environ.get("DELTALOG_SPARK_MASTER") or DEFAULT_MASTER
    local = master.startswith("local")
    partitions = shuffle_partitions or default_partitions(master)
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
    )
    if local:
        builder = builder.config("spark.driver.memory", "2g")
        # the JIT's first tier only: a local run is short, and the optimizing tier's
        # compiler threads took the cores the tasks needed (ADR 0059); and the classes
        # an earlier run loaded, mapped from an archive (ADR 0070)
        options = " ".join(["-XX:TieredStopAtLevel=1", *class_archive_options()])
        builder = builder.config("spark.driver.extraJavaOptions", options)
        # Python workers forked with the engine imported and warmed (ADR 0070)
        builder = builder.config("spark.python.daemon.module", "datalog.io.spark.daemon")
    for key, value in {**REQUIRED_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    prepare(spark)
    return spark


def class_archive_options(
    folder: Path | None = None, key: str | None = None, pid: int | None = None
) -> list[str]:
    """JVM options that map the classes an earlier local session loaded from a
    class-data-sharing archive (AppCDS) instead of loading, parsing and verifying
    them again: a fresh JVM's first plans cost less (ADR 0070). The archive lives in
    `folder` (`$DELTALOG_SPARK_CDS`, else the user's cache; `0` turns it off), one
    per `key` (PySpark's version and jars, the `java` binary). Without it, this JVM
    writes one at exit under a name of its own (`.<pid>.tmp`), which a later session
    adopts once its writer is gone; the JVM checks an archive before it maps it and
    silently ignores one that does not match."""
    folder = folder or archive_folder()
    if folder is None:
        return []
    key = key or archive_key()
    archive = folder / f"spark-{key}.jsa"
    quiet = "-Xlog:cds=off,cds+dynamic=off"
    if not archive.exists():
        adopt_archive(archive)
    if archive.exists():
        return [f"-XX:SharedArchiveFile={archive}", quiet]
    if any(folder.glob(f"{archive.name}.*.tmp")):  # another JVM is writing it
        return []
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # no cache to write to (a read-only home): no archive
        return []
    return [f"-XX:ArchiveClassesAtExit={archive}.{pid or os.getpid()}.tmp", quiet]


def archive_folder() -> Path | None:
    found = os.environ.get("DELTALOG_SPARK_CDS")
    if found == "0":
        return None
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(found) if found else Path(cache) / "deltalog"


def archive_key() -> str:
    """What an archive depends on: PySpark's version and jars, and `java` itself."""
    import hashlib

    import pyspark

    java = shutil.which("java", path=os.environ.get("JAVA_HOME", "") + "/bin") or shutil.which(
        "java"
    )
    real = os.path.realpath(java) if java else ""
    jars = sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    stamp = os.stat(real).st_mtime_ns if real else 0
    text = "\n".join([pyspark.__version__, real, str(stamp), *jars])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def adopt_archive(archive: Path, *, settled: float = 60.0) -> None:
    """Rename to `archive` a temporary archive whose writer (the Python process that
    started the JVM) has exited and which has not changed for `settled` seconds: the
    JVM writes it as it exits, its header last, so a JVM killed while writing leaves
    a file whose header the next JVM rejects."""
    import time

    for tmp in sorted(archive.parent.glob(f"{archive.name}.*.tmp")):
        writer = tmp.name[len(archive.name) + 1 : -len(".tmp")]
        try:
            alive = writer.isdigit() and os.path.exists(f"/proc/{writer}")
            if not alive and time.time() - tmp.stat().st_mtime > settled:
                tmp.replace(archive)
                return
        except OSError:
            continue


def default_partitions(master: str) -> int:
    """Shuffle partitions for a new session: one per core of a `local[N]` master (a
    round of the evaluator runs a static plan, whose partitions are not coalesced,
    and on a few cores every further task is a fixed cost: docs/benchmarks.md,
    "Spark"), 32 on a cluster (adaptive execution coalesces them where it plans)."""
    found = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", master.strip())
    if found is None:
        return 32
    cores = found.group(1)
    if cores is None:
        return 1
    return os.cpu_count() or 1 if cores == "*" else max(1, int(cores))


def local_session(
    master: str = DEFAULT_MASTER, shuffle_partitions: int = 8, app: str = "deltalog"
) -> SparkSession:
    """A (shared) local session; `spark_session` with a master and partitions."""
    return spark_session(master, shuffle_partitions=shuffle_partitions, app=app)


def stop_session() -> None:
    """Stop the process's session, if one runs (its JVM's memory is released)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


def prepare(spark: SparkSession) -> None:
    """Set the SQL options Deltalog's semantics need on an existing session."""
    for key, value in REQUIRED_CONF.items():
        spark.conf.set(key, value)


@contextmanager
def static_plan(spark: SparkSession) -> Iterator[None]:
    """The job run inside planned statically, for a checkpoint that keeps its hash
    partitioning: adaptive execution off (an adaptive plan's checkpoint forgets it,
    Spark records it before the plan is final) and no inferred `IS NOT NULL` filters
    (heads have no NULLs; such a filter under the union of a relation's pieces makes
    Spark forget the union's partitioning, and shuffle `full` again). Restored after,
    whatever happens."""
    settings = {"spark.sql.adaptive.enabled": "false"}
    settings["spark.sql.constraintPropagation.enabled"] = "false"
    before = {key: spark.conf.get(key) or "true" for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)


def _quiet_pandas_probe() -> None:
    """PySpark imports `pyspark.testing.utils` the first time it converts a value
    for the JVM (creating the context does), and that module checks the pandas
    version on import: with pandas 3 installed it warns, whether or not anything
    uses pandas. Deltalog's paths never do (ADR 0042), so that one probe is
    silenced; PySpark's checks where pandas is used still warn."""
    with warnings.catch_warnings():
        message = "PySpark does not yet fully support pandas"
        warnings.filterwarnings("ignore", message=message, category=FutureWarning)
        import pyspark.testing.utils  # noqa: F401
