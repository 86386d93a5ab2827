"""The broker: the asyncio shell around the cores. Its server reads and writes Kafka frames,
its handlers translate each request between the wire and the cores' typed values (replication,
transactions, the group coordinators in ``classic_group``, ``consumer_group`` and
``share_group``), and ``cluster_member`` joins it to the controller quorum. See
docs/architecture.md and docs/broker.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.broker.broker import Broker
    from floodmark.broker.config import BrokerConfig
    from floodmark.broker.membership import LocalMembership

__all__ = [
    "Broker",
    "BrokerConfig",
    "LocalMembership",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
