"""PySpark's worker daemon, with Deltalog's engine imported and used once before it
forks the Python workers of a local session.

Layer: datalog (Spark back end). Imports `datalog.db` and pyspark's daemon.

A task of local fixpoints or of one task (ADR 0065, ADR 0070) runs the embedded
engine in a Python worker, which PySpark forks from this daemon: each worker paid
for importing the engine and pyarrow and for the engine's first query (about half a
second of CPU each, docs/benchmarks.md). Done once here, the forked workers share
it; so is importing `pyspark.worker`, which each worker did after its fork, from the
installed package rather than from Spark's `pyspark.zip` (ADR 0074).
`spark_session` names this module (`spark.python.daemon.module`) on a `local`
master only: a cluster's executors may have no Deltalog.
"""

from __future__ import annotations

import sys
from pathlib import Path

from datalog.db.database import Database


def prefer_installed_pyspark(path: list[str]) -> None:
    """Move Spark's `pyspark.zip` (and its py4j zip) to the end of `path` when they
    lie inside an installed `pyspark` package (a pip install: the zip holds that
    package's own sources). Spark puts them first on a worker's path, and a zip
    holds no byte code, so every daemon compiled PySpark's modules from source
    (about 0.6 s of CPU); the installed package has them compiled (ADR 0074)."""
    for entry in list(path):
        zipped = Path(entry)
        package = zipped.parents[2] if len(zipped.parents) > 2 else None
        if zipped.suffix != ".zip" or package is None or package.name != "pyspark":
            continue
        if zipped.parent == package / "python" / "lib" and (package / "__init__.py").exists():
            path.remove(entry)
            path.append(entry)


def warm() -> None:
    """Run the engine once: a recursive rule inserted into and answered as Arrow."""
    db = Database()
    db.define(
        ".decl a(c0: number, c1: number)\n.decl b(c0: number, c1: number)\n"
        "b(x, z) :- b(x, y), a(y, z).\n"
    )
    with db.transaction() as tx:
        tx.insert("a", [(1, 2)])
        tx.insert("b", [(0, 1)])
    db.query_arrow("b(c0, c1)")


def main() -> None:
    """PySpark's daemon, after the warm-up (the workers it forks inherit both)."""
    prefer_installed_pyspark(sys.path)
    import pyarrow.ipc  # noqa: F401 (the tasks read and write IPC)
    import pyspark.worker  # noqa: F401 (each worker imported it after the fork: 0.2 s of CPU)
    from pyspark.daemon import manager

    warm()
    manager()


if __name__ == "__main__":
    main()
