"""floodmark for the test suites of Kafka applications: real brokers started in well under a
second or two, no JVM, no docker.

- ``EmbeddedBroker``: one ``floodmark broker`` process (broker and controller in one process).
- ``EmbeddedCluster``: a controller and N brokers, each its own process (``LocalCluster``).

Both are context managers with ``bootstrap_servers`` (what ``bootstrap.servers`` takes), fault
helpers (``kill`` with SIGKILL, ``restart``) and ``wait_serving`` (until clients are served
again: a wait on progress, never a sleep). Their processes die with the process that started
them, however it ends (``floodmark.lifeline``).

With pytest installed, the ``floodmark.testing.plugin`` module is a pytest plugin (registered
through the ``pytest11`` entry point) with fixtures of both in function, module and session
scope; see docs/testing.md. Importing this package does not import pytest, and imports the
rest of floodmark only when a name is first used (the plugin loads into every pytest run of an
environment with floodmark installed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.testing.embedded_broker import EmbeddedBroker
    from floodmark.testing.embedded_cluster import EmbeddedCluster
    from floodmark.testing.serving import NotServing

__all__ = [
    "EmbeddedBroker",
    "EmbeddedCluster",
    "NotServing",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)


_WHERE = {
    "EmbeddedBroker": "floodmark.testing.embedded_broker",
    "EmbeddedCluster": "floodmark.testing.embedded_cluster",
    "NotServing": "floodmark.testing.serving",
}
