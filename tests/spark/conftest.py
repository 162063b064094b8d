"""One local Spark session for the whole test run (`local[2]`, two shuffle
partitions, no UI), shared by every test in `tests/spark` (all run by one
pytest-xdist worker where the run is spread over cores: tests/conftest.py).

Tests that start Spark are marked `spark` and skipped when pyspark or Java is
missing. PySpark's deprecation and resource warnings are not ours and are
filtered; its warning about pandas versions is NOT: the paths Deltalog uses never
import pandas (ADR 0042), and a test that reaches pandas fails on that warning.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from bench.common import DATA_DIR

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LDBC = str(DATA_DIR / "ldbc-snb" / "vanilla")  # skipped where absent
SPARK_WARNINGS = (
    "ignore::DeprecationWarning:pyspark.*",
    "ignore::ResourceWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in item.nodeid.replace("\\", "/"):
            for spec in SPARK_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))


def require_spark() -> None:
    """Skip without pyspark or Java, unless CI said they are there
    (`DELTALOG_REQUIRE_SPARK=1`, set by .ci/run where Java is installed)."""
    missing = None if shutil.which("java") else "Spark needs Java"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        missing = "pyspark is not installed"
    if missing and os.environ.get("DELTALOG_REQUIRE_SPARK") == "1":
        pytest.fail(f"{missing}, and DELTALOG_REQUIRE_SPARK=1")
    if missing:
        pytest.skip(missing)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    require_spark()
    from datalog.io.spark.session import local_session

    session = local_session("local[2]", shuffle_partitions=2, app="deltalog-tests")
    yield session
    session.stop()
