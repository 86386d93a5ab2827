"""The floodmark pytest plugin as a user runs it: pytester starts a fresh pytest (its own
process) on a small user test file that uses the fixtures with confluent-kafka, real broker
processes over real sockets.

Where floodmark is installed with its ``pytest11`` entry point, the plugin loads by itself (as
in a user's environment; ``tests/testing/test_wheel.py`` checks that from a built wheel); in a
checkout whose installed metadata predates the entry point, the run names it with ``-p``.
"""

from __future__ import annotations

import os
from importlib.metadata import entry_points

import pytest

from floodmark.cluster.node_env import IMPORT_ROOT
from tests.testing import user_tests

pytest_plugins = ["pytester"]

PLUGIN = "floodmark.testing.plugin"


def plugin_args() -> list[str]:
    installed = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", PLUGIN]


@pytest.fixture
def user_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    # The inner run imports this checkout's floodmark, whatever its working directory.
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([IMPORT_ROOT, *filter(None, [path])]))
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", "-q", *args)


def test_user_suite_with_confluent_kafka(user_run: pytest.Pytester) -> None:
    """A user's suite of two files: the function-scoped broker (produce/consume, SIGKILL and
    restart on the same port) and the 3-broker cluster (the partition leader SIGKILLed
    mid-test, writes go on through the survivors, the broker restarts and catches up, every
    acknowledged write is read back)."""
    user_run.makepyfile(test_user_broker=user_tests.BROKER_TESTS,
                        test_user_cluster=user_tests.CLUSTER_TESTS)
    result = run(user_run)
    result.assert_outcomes(passed=2)


def test_fixtures_are_listed(user_run: pytest.Pytester) -> None:
    """``pytest --fixtures`` shows every fixture with its docstring (no broker started)."""
    user_run.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = user_run.runpytest_inprocess(*plugin_args(), "-p", "no:cacheprovider",
                                          "--fixtures")
    for name in ("floodmark_broker", "floodmark_broker_module", "floodmark_broker_session",
                 "floodmark_cluster", "floodmark_cluster_module",
                 "floodmark_cluster_session"):
        result.stdout.fnmatch_lines([f"*{name}*"])


@pytest.mark.slow
def test_module_fixtures_shared_within_a_module(user_run: pytest.Pytester) -> None:
    """Module-scoped broker and cluster: one of each for the tests of a module."""
    user_run.makepyfile(test_user_module=user_tests.MODULE_TESTS)
    result = run(user_run)
    result.assert_outcomes(passed=4)


@pytest.mark.slow
def test_session_fixtures_shared_across_modules(user_run: pytest.Pytester) -> None:
    """Session-scoped broker and cluster: one of each for two modules."""
    user_run.makepyfile(test_a=user_tests.SESSION_TESTS.replace("{name}", "a"),
                        test_b=user_tests.SESSION_TESTS.replace("{name}", "b"))
    user_run.makeconftest(
        "import pytest\n"
        "SEEN = set()\n"
        "@pytest.fixture(autouse=True)\n"
        "def _record(request):\n"
        "    for name in ('floodmark_cluster_session', 'floodmark_broker_session'):\n"
        "        if name in request.fixturenames:\n"
        "            SEEN.add((name, request.getfixturevalue(name).bootstrap_servers))\n"
        "def pytest_sessionfinish(session):\n"
        "    assert len(SEEN) == 2, SEEN\n")
    result = run(user_run)
    result.assert_outcomes(passed=4)
