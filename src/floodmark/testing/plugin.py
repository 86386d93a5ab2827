"""The floodmark pytest plugin (``pytest11`` entry point ``floodmark``): real brokers as
fixtures.

============================  =========  ===================================================
fixture                       scope      what it gives
============================  =========  ===================================================
``floodmark_broker``          function   a new ``EmbeddedBroker`` (one process) per test
``floodmark_broker_module``   module     one ``EmbeddedBroker`` shared by a module's tests
``floodmark_broker_session``  session    one ``EmbeddedBroker`` for the whole run
``floodmark_cluster``         function   a new 3-broker ``EmbeddedCluster`` per test
``floodmark_cluster_module``  module     one 3-broker ``EmbeddedCluster`` per module
``floodmark_cluster_session`` session    one 3-broker ``EmbeddedCluster`` for the whole run
============================  =========  ===================================================

Each has ``bootstrap_servers``. Data and logs live under pytest's ``tmp_path_factory`` (kept
for the last few runs, so a failed test's broker logs can be read). Shared (module, session)
brokers keep their topics between tests: give each test its own topic names, and crash or
restart brokers only in the function-scoped fixtures (the next test gets a fresh one). With
pytest-xdist, each worker starts its own session fixtures.

A test that needs other settings builds its own: ``with EmbeddedCluster(brokers=5,
broker_settings={...}) as cluster:``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from floodmark.testing.embedded_broker import EmbeddedBroker
    from floodmark.testing.embedded_cluster import EmbeddedCluster

CLUSTER_BROKERS = 3

# Every pytest run of an environment with floodmark installed loads this module: it imports
# nothing of floodmark until a test asks for a fixture (no start-up cost for other runs, and
# kio's Hypothesis strategies are not registered before Hypothesis's own plugin loads).


def _broker(factory: pytest.TempPathFactory, name: str) -> Iterator[EmbeddedBroker]:
    from floodmark.testing.embedded_broker import EmbeddedBroker

    with EmbeddedBroker(data_dir=factory.mktemp(name)) as broker:
        yield broker


def _cluster(factory: pytest.TempPathFactory, name: str) -> Iterator[EmbeddedCluster]:
    from floodmark.testing.embedded_cluster import EmbeddedCluster

    with EmbeddedCluster(CLUSTER_BROKERS, data_dir=factory.mktemp(name)) as cluster:
        yield cluster


@pytest.fixture
def floodmark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """A single floodmark broker (broker and controller in one process) for this test."""
    yield from _broker(tmp_path_factory, "floodmark-broker")


@pytest.fixture(scope="module")
def floodmark_broker_module(tmp_path_factory: pytest.TempPathFactory
                            ) -> Iterator[EmbeddedBroker]:
    """A single floodmark broker shared by the tests of one module."""
    yield from _broker(tmp_path_factory, "floodmark-broker-module")


@pytest.fixture(scope="session")
def floodmark_broker_session(tmp_path_factory: pytest.TempPathFactory
                             ) -> Iterator[EmbeddedBroker]:
    """A single floodmark broker shared by every test of the run."""
    yield from _broker(tmp_path_factory, "floodmark-broker-session")


@pytest.fixture
def floodmark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """A 3-broker floodmark cluster (plus its controller) for this test: kill and restart
    brokers freely."""
    yield from _cluster(tmp_path_factory, "floodmark-cluster")


@pytest.fixture(scope="module")
def floodmark_cluster_module(tmp_path_factory: pytest.TempPathFactory
                             ) -> Iterator[EmbeddedCluster]:
    """A 3-broker floodmark cluster shared by the tests of one module."""
    yield from _cluster(tmp_path_factory, "floodmark-cluster-module")


@pytest.fixture(scope="session")
def floodmark_cluster_session(tmp_path_factory: pytest.TempPathFactory
                              ) -> Iterator[EmbeddedCluster]:
    """A 3-broker floodmark cluster shared by every test of the run."""
    yield from _cluster(tmp_path_factory, "floodmark-cluster-session")
