"""Shared test configuration: hypothesis profiles.

Profiles: `ci` (derandomized, so a CI failure reproduces; the CI budget of
`tests.budget`: half the examples, no exhaustive twins), `dev` (the default locally:
everything at full count) and `debug` (prints every example). `HYPOTHESIS_PROFILE`
picks one explicitly; otherwise `ci` when the `CI` environment variable is set
(and not "0"/"false"), else `dev`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Verbosity, settings

from differential.tuning import TUNING, tuned
from tests.budget import EXHAUSTIVE, PROFILE, examples

settings.register_profile(
    "ci", derandomize=True, deadline=None, max_examples=examples(60), print_blob=True
)
settings.register_profile("dev", deadline=None, max_examples=100)
settings.register_profile("debug", settings.get_profile("dev"), verbosity=Verbosity.verbose)
settings.load_profile(PROFILE)


@pytest.fixture(scope="module", params=["python", "numpy"])
def small_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs a module's tests twice: with the small-batch Python kernels on (as the
    engine runs by default) and forced off, so both paths meet the same oracle.

    Module-scoped, so hypothesis tests may use it (`pytestmark = usefixtures(...)`).
    """
    limit = TUNING.few if request.param == "python" else 0
    with tuned(TUNING.but(few=limit)):
        yield request.param


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Exhaustive twins are skipped under the CI budget (`tests.budget`). Under
    pytest-xdist the tests marked `slow` start first (their order is kept
    otherwise), so a long one does not start last and run alone while the other
    workers idle (ADR 0081). A serial run keeps the files' order."""
    if not EXHAUSTIVE:
        skip = pytest.mark.skip(
            reason="an exhaustive twin: the CI budget runs its sampled twin "
            "(DELTALOG_EXHAUSTIVE=1 or a profile other than ci runs it; docs/adr/0087)"
        )
        for item in items:
            if item.get_closest_marker("exhaustive") is not None:
                item.add_marker(skip)
    if getattr(config, "workerinput", None) is not None:
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _shares_spark_session(nodeid: str) -> bool:
    """The tests of the one local Spark session (tests/spark/conftest.py): all of
    tests/spark but the standalone cluster's, which starts JVMs of its own."""
    return nodeid.startswith("tests/spark/") and not nodeid.startswith("tests/spark/test_cluster")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` (`make check`, ADR 0081): the tests that share the Spark
    session are one unit, run by one worker, so the run starts one session JVM;
    every other test is a unit of its own. Larger units go first (xdist's reorder).

    pytest-xdist's own loadgroup puts a test's `xdist_group` into its node id, which
    pytest 9 no longer lets it change: its groups were silently ignored."""
    if config.getvalue("dist") != "loadgroup":
        return None
    scopes: Any = getattr(importlib.import_module("xdist.scheduler"), "LoadScopeScheduling", None)
    if scopes is None:  # another pytest-xdist: its own scheduling (slower, not wrong)
        return None

    class SparkSessionUnit(scopes):
        def _split_scope(self, nodeid: str) -> str:
            return "tests/spark (one session)" if _shares_spark_session(nodeid) else nodeid

    return SparkSessionUnit(config, log)


_PROJECT_PACKAGES = ("datalog", "differential", "joins", "server")


def _outside(root: Path) -> list[str]:
    """The project modules this process imported from outside `root`."""
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in _PROJECT_PACKAGES
        and getattr(module, "__file__", None)
        and not Path(str(module.__file__)).resolve().is_relative_to(root)
    )


_WORKERS_OUTSIDE: set[str] = set()  # what pytest-xdist's workers reported (controller)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """Under pytest-xdist the tests import in the workers: collect what each found."""
    _WORKERS_OUTSIDE.update(getattr(node, "workeroutput", {}).get("outside", ()))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fails the run when a project module was imported from outside this checkout.

    An editable install of another checkout (a worktree's shared virtualenv) makes
    Python fall back to that checkout for a module this one lacks, so a stale import
    path would pass here and fail on a clean machine. A pytest-xdist worker hands its
    list to the controller (`workeroutput`), which fails the run.
    """
    root = Path(__file__).resolve().parents[1]
    outside = sorted(set(_outside(root)) | _WORKERS_OUTSIDE)
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["outside"] = outside
        return
    if outside:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"modules imported from outside {root}: {', '.join(outside)}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
