"""Shared fixtures: a real floodmark broker in a subprocess, on a free port.

- ``BrokerProcess``: start/stop/kill/restart a ``floodmark broker`` process over one data dir
  (``floodmark.cluster.single``, also behind ``floodmark.testing.EmbeddedBroker``). It binds
  ``127.0.0.1:0`` and reads the bound port from the broker's first stdout line, so concurrently
  running test sessions never collide on ports.
- ``broker`` (module scope): one broker per test module, ``broker.bootstrap`` is "127.0.0.1:PORT".
- ``broker_factory`` (function scope): start any number of brokers with extra flags; all are
  stopped at the end of the test.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from floodmark import dataclass_code
from floodmark.cluster import single
from tests import cpu_usage

REPO = Path(__file__).resolve().parents[1]

# What a floodmark process does at start and exit (floodmark/__init__.py), the test processes do
# too, each pytest process collecting the whole suite: the dataclasses of every test module and
# of floodmark compiled once across runs (their own file: the broker's and the CLI's stays small),
# 0.4-0.5 CPU s of a collection of tests/unit, cluster and integration; and no last garbage
# collections over everything collected when the process ends (0.3 s of the same collection).
dataclass_code.install(dataclass_code.cache_path("tests"))


class BrokerProcess(single.BrokerProcess):
    """``floodmark.cluster.single.BrokerProcess`` (the one single-broker launcher), run from the
    repository (a relative ``PYTHONPATH=src`` resolves there)."""

    def __init__(self, data_dir: Path, extra_args: list[str] | None = None,
                 log_path: Path | None = None) -> None:
        super().__init__(data_dir, extra_args, log_path, cwd=REPO)


# -- parallel runs (pytest-xdist, ``./dev test``) -------------------------------------------------
# Every test picks its own ports (bind to port 0) and data directories (tmp_path), so tests run
# on several workers at once. Tests that share one costly process per session are sent to one
# worker (``--dist loadgroup``), so a run starts it once, not once per worker: the fixture a test
# uses names its group.
SHARED_SESSION_GROUPS = {
    "spark": "spark",                    # one local SparkSession (a JVM, 2 GiB of driver memory)
    "kafka_broker": "kafka_reference",   # the real Apache Kafka (a JVM; tests/reference)
}


# The longest tests outside those groups (minutes of wall each on the 2-core CI machine), in
# the order they start. xdist hands tests out in collection order (after the groups, largest
# first), so a long test collected last (tests/test_demo.py sorts after tests/spark) would start
# when the others are done and keep one worker busy alone at the end. Modules move as a whole.
START_FIRST = (
    "tests/test_demo.py",                       # the Spark pipeline through a leader failure
    "tests/quix/",                              # Quix Streams exactly-once through SIGKILLs
    "tests/chaos/test_chaos_run.py",            # chaos runs of 12-60 s each, under faults
    "tests/chaos/test_chaos_txn_run.py",
    "tests/cluster/test_cluster_cli.py",        # clusters up and down through the CLI
    "tests/integration/test_fuzz.py",
    "tests/cluster/test_benchmark_controller_failover.py",
    "tests/cluster/test_combined_quorum.py",
    "tests/cluster/test_cluster_quorum_cli.py",
    # collected after two thirds of the suite (sim/ and ui/ sort late): 37 s and 22 s of wall
    # in the fresh-clone run of 21a2548, the longest there outside the modules above
    "tests/sim/test_explore.py",
    "tests/ui/test_dashboard.py",
)


def _start_rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return next((i for i, prefix in enumerate(START_FIRST) if path.startswith(prefix)),
                len(START_FIRST))


def _spark_session_rank(item: pytest.Item) -> int:
    """1 for a test of the "spark" group that does not ask for the ``spark`` fixture (tests/sim's
    runs on Spark, whose ``batch_session`` takes the process's session or starts one with
    Spark's defaults): after the group's fixture users, so the fixture starts the one JVM, with
    its options (tests/spark/conftest.py: driver memory, the short-run JVM options)."""
    grouped = any(m.args[:1] == ("spark",) for m in item.iter_markers("xdist_group"))
    return int(grouped and "spark" not in getattr(item, "fixturenames", ()))


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its own modifyitems)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # stable: the rest keep their order
    items.sort(key=lambda item: (_start_rank(item), _spark_session_rank(item)))
    for item in items:
        names = getattr(item, "fixturenames", ())
        for fixture, group in SHARED_SESSION_GROUPS.items():
            if fixture in names:
                item.add_marker(pytest.mark.xdist_group(group))


class _GroupNames:
    """``--dist loadgroup`` sends the tests whose node id ends in ``@<group>`` to one worker. A
    worker adds the suffix by assigning ``item._nodeid``, which pytest 9.2 no longer reads (the
    id is ``item._id``, a structured ``NodeId``): with pytest-xdist 3.8 every group was silently
    spread over all workers, each starting its own SparkSession. This adds the suffix where it
    is missing, in the form xdist's scheduler parses (after xdist's own hook)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        if not getattr(config.option, "loadgroup", False):
            return
        for item in items:
            groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                             for m in item.iter_markers("xdist_group")})
            tag = "@" + "_".join(groups)
            if not groups or item.nodeid.endswith(tag):
                continue  # no group, or a pytest whose node id xdist could set
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(item.nodeid + tag)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_GroupNames(), "floodmark-xdist-group-names")
    cpu_usage.register(config)  # FLOODMARK_TEST_CPU=DIR: CPU seconds per test (tests/cpu_usage.py)


def pytest_unconfigure(config: pytest.Config) -> None:
    gc.freeze()  # the run is over: the interpreter's teardown need not walk what it collected


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    yield b
    b.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[object]:
    started: list[BrokerProcess] = []

    def make(*extra_args: str, name: str = "data") -> BrokerProcess:
        b = BrokerProcess(tmp_path / f"{name}{len(started)}", list(extra_args)).start()
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()
