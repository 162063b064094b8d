"""The Python daemon of a local Spark session: PySpark's own, with the modules every
worker imports loaded once, before it forks the workers.

Layer: datalog (Spark back end). Run by Spark as `python -m datalog.io.spark.daemon`
(`spark.python.daemon.module`, set for `local[...]` masters by
`datalog.io.spark.session`); nothing in Deltalog imports it.

PySpark's daemon forks one worker per concurrent task, and each worker then imports
`pyspark.worker` (and with it pyarrow) and, in a task of local fixpoints (ADR 0065),
the embedded engine: on two cores, seconds of CPU per worker. Imported here, the
forked workers share them. Without Deltalog on the path the daemon is PySpark's.
"""

from __future__ import annotations

import contextlib

import pyspark.worker  # noqa: F401  (each worker's own import, made once)
from pyspark.daemon import manager

with contextlib.suppress(ImportError):
    import datalog.db.database  # noqa: F401  (what a task of local fixpoints runs)

if __name__ == "__main__":
    manager()
