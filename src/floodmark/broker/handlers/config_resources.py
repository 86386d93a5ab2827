"""ListConfigResources (key 74): the resources DescribeConfigs / AlterConfigs can name, as
Kafka 4.1's ``KafkaApis.handleListConfigResources`` lists them. v0 is KIP-714's
ListClientMetricsResources (client-metrics subscriptions only); v1 (KIP-1142) takes the
resource types to list, every supported one when none is given.

* Listed, in Kafka's order: groups with configs, client-metrics subscriptions, broker loggers
  and brokers (one per registered broker, by id), topics. Groups are those with a config of
  their own (set with IncrementalAlterConfigs / AlterConfigs on a GROUP resource, in the
  metadata image). floodmark has no client-metrics subscriptions (no client telemetry): none
  is listed.
* A type outside the version's supported set: UNSUPPORTED_VERSION, nothing listed.
* Authorization (dispatch): DescribeConfigs on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.errors import ErrorCode
from floodmark.wire import RequestHeader

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext


class ConfigResourceType(enum.IntEnum):
    """Kafka's ``ConfigResource.Type`` codes."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


# The types each version lists (Kafka's ListConfigResourcesRequest.supportedResourceTypes).
SUPPORTED_V0 = frozenset({ConfigResourceType.CLIENT_METRICS})
SUPPORTED_V1 = frozenset(ConfigResourceType)


def list_config_resources(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                          conn: ClientConnection | None = None) -> WireResponse:
    supported = SUPPORTED_V0 if header.api_version == 0 else SUPPORTED_V1
    asked = [int(t) for t in getattr(req, "resource_types", ())] or sorted(supported)
    if any(t not in supported for t in asked):
        return {"throttle_time": 0, "error_code": int(ErrorCode.UNSUPPORTED_VERSION),
                "config_resources": []}
    listener = conn.listener_name if conn is not None else None
    broker_ids = sorted({b["node_id"] for b in (*broker.membership.listed_brokers(listener),
                                                 *broker.membership.fenced_brokers(listener))})
    found: list[tuple[str, ConfigResourceType]] = []
    if ConfigResourceType.GROUP in asked:
        found += [(group, ConfigResourceType.GROUP)
                  for group, configs in sorted(broker.controller.group_configs().items())
                  if configs]
    # CLIENT_METRICS: no subscriptions.
    for kind in (ConfigResourceType.BROKER_LOGGER, ConfigResourceType.BROKER):
        if kind in asked:
            found += [(str(i), kind) for i in broker_ids]
    if ConfigResourceType.TOPIC in asked:
        found += [(name, ConfigResourceType.TOPIC) for name in sorted(broker.controller.topics())]
    if header.api_version == 0:
        return {"throttle_time": 0, "error_code": 0,
                "config_resources": [{"resource_name": n} for n, _ in found]}
    return {"throttle_time": 0, "error_code": 0,
            "config_resources": [{"resource_name": n, "resource_type": int(k)}
                                 for n, k in found]}
