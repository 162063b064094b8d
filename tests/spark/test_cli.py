"""The CLI's Spark options: `run --spark-master/--spark-conf` and `serve --spark-load`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalog import Database
from datalog.cli.commands import EXAMPLES, main, spark_preload

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_spark_options_of_run_need_the_spark_engine(capsys: pytest.CaptureFixture[str]) -> None:
    program = str(EXAMPLES / "social.dl")
    assert main(["run", program, "-D", "-", "--spark-master", "local[1]"]) == 2
    assert "need --engine spark" in capsys.readouterr().err


def test_a_spark_conf_is_key_equals_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", str(EXAMPLES / "social.dl"), "--engine", "spark", "--spark-conf", "x"])
    assert "expected KEY=VALUE" in capsys.readouterr().err


def test_serve_hands_the_server_every_option_but_spark_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--port", "0", "--spark-master", "local[1]", "--db", "d", "--spark-conf=a=b"]
    assert spark_preload(argv) == (["--port", "0", "--db", "d"], 2)  # master without a load
    assert "need --spark-load" in capsys.readouterr().err
    assert spark_preload(["--port", "0"]) == (["--port", "0"], 0)


def test_a_spark_load_needs_a_durable_database(capsys: pytest.CaptureFixture[str]) -> None:
    assert spark_preload(["--spark-load", "edge=e.parquet"]) == ([], 2)
    assert "needs --db" in capsys.readouterr().err


@pytest.mark.spark
def test_serve_spark_load_fills_the_database_before_the_server_opens_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "p.dl").write_text(
        ".decl edge(x: number, y: number)\n.decl name(x: number, s: symbol)\n"
    )
    pq.write_table(pa.table({"a": [1, 2], "b": [2, 3]}), tmp_path / "edge.parquet")
    (tmp_path / "name.facts").write_text("1\tone\n2\ttwo\n")
    argv = ["--db", str(tmp_path / "db"), "--program", str(tmp_path / "p.dl"), "--port", "0",
            "--spark-load", f"edge={tmp_path / 'edge.parquet'}",
            "--spark-load", f"name={tmp_path / 'name.facts'}"]  # fmt: skip
    assert spark_preload(argv) == (argv[:6], 0)
    with Database(tmp_path / "db") as db:
        assert sorted(db.query("edge(x, y)")) == [(1, 2), (2, 3)]
        assert sorted(db.query("name(x, s)")) == [(1, "one"), (2, "two")]
        assert db.epoch == 2  # the definition, then one transaction
