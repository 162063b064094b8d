"""`deltalog run --engine spark` on a real standalone cluster: a master and two
workers on 127.0.0.1, started with the scripts PySpark ships, writes exactly the
files the embedded engine writes, round by round (the default on a cluster) and
with local fixpoints and one task asked for (their Python tasks run on the
executors, which share this machine's venv; ADR 0070).

The JVMs run in process groups of their own and are killed, executors included,
whatever the test does; every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from datalog.cli.commands import EXAMPLES, main
from tests.spark.conftest import require_spark

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
EXTRA_RULES = """
.decl reached(a: symbol, n: number)
reached(a, n) :- person(a, _), n = count : { reach(a, _) }.
.decl alone(a: symbol)
alone(a) :- person(a, _), !reach(a, _).
.decl furthest(a: symbol, c: symbol)
furthest(a, c) :- person(a, _), c = max b : { reach(a, b) }.
.output reach
.output reached
.output alone
.output furthest
.output neighbours
.output greeting
.decl downstream(b: symbol)
downstream(b) :- follows("erin", b).
downstream(c) :- downstream(b), follows(b, c), !blocks(c, b).
.output downstream
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@contextmanager
def jvm(command: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A JVM started in its own process group; the whole group is killed on exit."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        yield process
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                continue


def alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as reply:
            return int(json.load(reply).get("aliveworkers", 0))
    except OSError:
        return 0


def wait_for(condition: object, what: str, logs: list[Path], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(1)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in logs)
    pytest.fail(f"timed out waiting for {what}\n{tails}")


def test_a_program_on_a_standalone_cluster_writes_the_embedded_engines_files(
    tmp_path: Path,
) -> None:
    require_spark()
    if shutil.which("bash") is None:
        pytest.skip("PySpark's spark-class needs bash")
    program = tmp_path / "program.dl"
    program.write_text((EXAMPLES / "social.dl").read_text() + EXTRA_RULES)
    home = spark_home()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": SHORT_JVM,
           "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}  # fmt: skip
    spark_class = ["bash", str(home / "bin" / "spark-class")]  # its exec bit may be lost
    port, ui = free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    logs = [tmp_path / n for n in ("master.log", "worker1.log", "worker2.log")]
    master_cmd = [*spark_class, "org.apache.spark.deploy.master.Master",
                  "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)]  # fmt: skip

    def worker(n: int) -> list[str]:
        work = str(tmp_path / f"work{n}")
        return [*spark_class, "org.apache.spark.deploy.worker.Worker", master_url,
                "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                "--webui-port", str(free_port()), "--work-dir", work]  # fmt: skip

    with (
        jvm(master_cmd, logs[0], env),
        jvm(worker(1), logs[1], env),
        jvm(worker(2), logs[2], env),
    ):
        wait_for(lambda: alive_workers(ui) == 2, "two workers", logs)
        ran = run_on(master_url, program, tmp_path, "spark", env)
        executors = list(tmp_path.glob("work*/app-*/*"))
        # local fixpoints (reach, pivot `a`) and one task (downstream: no pivot) run
        # Python and Deltalog on the executors, which share this machine's venv
        local = run_on(master_url, program, tmp_path, "spark-local", env, LOCAL_PLANS)
    assert len({p.parent.parent.name for p in executors}) == 2  # both workers ran executors
    assert (
        main(["run", str(program), "-F", str(EXAMPLES / "facts"), "-D", str(tmp_path / "embedded")])
        == 0
    )
    written = sorted(p.name for p in (tmp_path / "embedded").iterdir())
    assert len(written) == 9
    for folder in ("spark", "spark-local"):
        assert written == sorted(p.name for p in (tmp_path / folder).iterdir())
        for name in written:
            expected = (tmp_path / "embedded" / name).read_text()
            assert (tmp_path / folder / name).read_text() == expected, (folder, name)
    for done in (ran, local):
        assert done.stdout == "reach\t" + done.stdout.split("\t")[1]  # .printsize reach
    plans = {f: python_plans(tmp_path / f"events-{f}") for f in ("spark", "spark-local")}
    assert plans == {"spark": 0, "spark-local": 2}  # only the second ran Python tasks


LOCAL_PLANS = ["--spark-conf", "spark.deltalog.localRecursionBytes=67108864"]
# Every JVM of the test (master, workers, drivers, executors) lives a minute or two:
# the JIT's first tier only and one GC thread, as a local session runs (ADR 0059),
# instead of compiler and GC threads taking the cores the tasks need (ADR 0081).
SHORT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def run_on(
    master: str,
    program: Path,
    tmp_path: Path,
    out: str,
    env: dict[str, str],
    extra: list[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`deltalog run --engine spark` on the cluster at `master`, its outputs in
    `tmp_path / out` and its Spark event log in `tmp_path / events-<out>`."""
    events = tmp_path / f"events-{out}"
    events.mkdir()
    command = [sys.executable, "-m", "datalog.cli", "run", "--engine", "spark",
               "--spark-master", master,
               "--spark-conf", "spark.executor.memory=512m",
               "--spark-conf", "spark.executor.cores=1",
               "--spark-conf", "spark.sql.shuffle.partitions=4",
               "--spark-conf", "spark.eventLog.enabled=true",
               "--spark-conf", f"spark.eventLog.dir={events}",
               "--spark-conf", "spark.eventLog.compress=false",
               "--spark-conf", f"spark.driver.extraJavaOptions={SHORT_JVM}",
               "--spark-conf", f"spark.executor.extraJavaOptions={SHORT_JVM}",
               *(extra or []),
               str(program), "-F", str(EXAMPLES / "facts"), "-D", str(tmp_path / out)]  # fmt: skip
    ran = subprocess.run(
        command, cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    return ran


def python_plans(events: Path) -> int:
    """How many SQL executions of the event log in `events` ran a Python map over
    Arrow batches (the local plans' tasks, ADR 0065 and ADR 0070)."""
    found = 0
    for log in events.rglob("events_*"):  # a folder of rolled files (and Hadoop's .crc)
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if str(event.get("Event", "")).endswith("SparkListenerSQLExecutionStart"):
                found += "MapInArrow" in event.get("physicalPlanDescription", "")
    return found
