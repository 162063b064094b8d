"""`deltalog serve` as a process: its program and facts, start-up errors, readiness and
stopping within its deadline whatever runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.client import Client, ServerError
from server.workers import fork_available

pytestmark = pytest.mark.server
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "datalog" / "cli" / "examples"


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "datalog.cli", "serve", "--port", "0", *args]


@contextlib.contextmanager
def _serving(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A `deltalog serve` process and the URL of its `ready` line; killed at the end."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        _command(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, env=env,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("ready ws://"), line
        yield process, line.split()[1]
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _fails(*args: str) -> str:
    """Run `deltalog serve` expecting it to refuse to start; its stderr."""
    done = subprocess.run(_command(*args), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done
    assert "ready" not in done.stdout
    return done.stderr


def test_the_program_and_its_facts_are_defined_at_start() -> None:
    program = str(EXAMPLES / "social.dl")
    with _serving("--program", program, "-F", str(EXAMPLES / "facts")) as (_, url):

        async def talk() -> None:
            async with Client.connect(url) as client:
                follows = await client.query("follows(x, y)")
                assert ("alice", "bob") in follows
                assert await client.query('reach("alice", "bob")') == [()]

        asyncio.run(talk())


def test_a_durable_database_is_not_given_its_program_twice(tmp_path: Path) -> None:
    program = tmp_path / "p.dl"
    program.write_text(".decl e(x: number)\ne(1).\n")
    for _ in range(2):
        with _serving("--db", str(tmp_path / "db"), "--program", str(program)) as (_, url):

            async def talk() -> None:
                async with Client.connect(url) as client:
                    assert await client.query("e(x)") == [(1,)]

            asyncio.run(talk())


def test_a_missing_or_bad_program_is_a_clear_start_up_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.dl"
    assert f"--program {missing}: No such file or directory" in _fails("--program", str(missing))
    bad = tmp_path / "bad.dl"
    bad.write_text(".decl e(x: number)\ne(x) :- f(x).\n")
    error = _fails("--program", str(bad))
    assert "unknown relation `f`" in error and "line 2" in error
    assert "-F" in _fails("-F", str(tmp_path))
    good = tmp_path / "good.dl"
    good.write_text(".decl e(x: number)\n.input e\n")
    assert "no such directory" in _fails("--program", str(good), "-F", str(tmp_path / "none"))
    (tmp_path / "e.facts").write_text("1\nnot a number\n")
    assert "e.facts" in _fails("--program", str(good), "-F", str(tmp_path))


def test_ready_is_said_on_stdout_and_in_the_ready_file(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    ready.write_text("stale\n")
    with _serving("--ready-file", str(ready)) as (process, url):
        assert ready.read_text() == url + "\n"

        async def talk() -> None:
            async with Client.connect(url) as client:
                assert await client.ping() >= 0

        asyncio.run(talk())
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    assert not ready.exists()


def test_sigterm_as_soon_as_ready_is_said_stops_gracefully() -> None:
    with _serving() as (process, _):
        process.send_signal(signal.SIGTERM)  # a supervisor may do it at once
        assert process.wait(30) == 0  # not killed by the signal (-15)


@pytest.mark.skipif(not fork_available(), reason="workers need os.fork")
def test_sigterm_kills_the_worker_computing_a_runaway_query() -> None:
    program = ".decl inf(x: number)\ninf(0).\ninf(x + 1) :- inf(x).\n"
    with _serving("--budget", "0") as (process, url):

        async def talk() -> int:
            async with Client.connect(url) as client:
                await client.define(program)
                asking = asyncio.ensure_future(client.query("inf(x), x < 0"))
                worker = await _child_of(process.pid)
                process.send_signal(signal.SIGTERM)
                with pytest.raises((ServerError, ConnectionError)):
                    await asyncio.wait_for(asking, 30)
                return worker

        worker = asyncio.run(talk())
        assert process.wait(30) == 0
        assert not Path(f"/proc/{worker}").exists()  # killed and reaped, not orphaned


async def _child_of(pid: int) -> int:
    """The process id of `pid`'s first child, once there is one."""
    while True:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    if int(fields[1]) == pid:
                        return int(entry.name)
        await asyncio.sleep(0.02)


def test_sigterm_stops_the_server_whose_engine_is_stuck_in_a_functor(tmp_path: Path) -> None:
    functors = tmp_path / "stuck.py"
    called = tmp_path / "called"
    functors.write_text(
        f"import pathlib, time\n\ndef stuck(x):\n    pathlib.Path({str(called)!r}).touch()\n"
        "    time.sleep(3600)\n    return x\n"
    )
    program = tmp_path / "p.dl"
    program.write_text(
        ".functor stuck(x: number): number\n.decl e(x: number)\ne(1).\n"
        ".decl f(x: number)\nf(@stuck(x)) :- e(x).\n"
    )
    args = ("--program", str(program), "--functors", str(functors), "--workers", "0")
    with _serving(*args) as (process, url):

        async def talk() -> None:
            async with Client.connect(url) as client:
                asking = asyncio.ensure_future(client.query("f(x)"))  # never returns
                while not called.exists():  # the engine is in the functor, for good
                    await asyncio.sleep(0.02)
                async with asyncio.timeout(30):  # connected and answered without the engine
                    async with Client.connect(url) as other:
                        assert await other.ping() >= 0
                process.send_signal(signal.SIGTERM)
                with pytest.raises((ServerError, ConnectionError)):
                    await asyncio.wait_for(asking, 30)

        asyncio.run(talk())
        assert process.wait(30) == 0
