"""The SparkSession the evaluator and the loaders expect.

Layer: datalog (Spark back end). Imports pyspark inside functions only.

Deltalog's integers wrap around (docs/adr/0004), so the session runs with ANSI
mode off: `+ - *` on longs wrap like Java, and division by zero yields NULL,
which the evaluator reads as "no value" (the binding is dropped).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REQUIRED_CONF = {"spark.sql.ansi.enabled": "false"}


def local_session(
    master: str = "local[*]", shuffle_partitions: int = 8, app: str = "deltalog"
) -> SparkSession:
    """A (shared) local session: no UI, no console progress bars, quiet logs."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this venv's pyarrow
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.memory", "2g")
    )
    for key, value in REQUIRED_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    prepare(spark)
    return spark


def prepare(spark: SparkSession) -> None:
    """Set the SQL options Deltalog's semantics need on an existing session."""
    for key, value in REQUIRED_CONF.items():
        spark.conf.set(key, value)
