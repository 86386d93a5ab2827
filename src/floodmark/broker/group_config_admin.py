"""Group configs (ConfigResource type GROUP) on a broker: a change is checked here against the
broker's bounds (``floodmark.group_configs``), written by the controller (a ``group_configs``
metadata record per group) and taken into use by every broker from its metadata, live and again
after a restart (``apply``): the KIP-848 consumer groups' session timeout and heartbeat
interval, the share groups' session, heartbeat, locks, delivery count limit, start-offset
strategy and isolation level. DescribeConfigs answers every group config of a group, its own
value (source DYNAMIC_GROUP_CONFIG) or the broker's (DEFAULT_CONFIG), as Kafka does."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from floodmark.broker.config import Configs, ConfigSource
from floodmark.broker.context import BrokerCore, HandlerContext
from floodmark.errors import ErrorCode, KafkaError
from floodmark.group_configs import GROUP_CONFIGS, effective, validate
from floodmark.settings import render

if TYPE_CHECKING:  # (the coordinators' modules load with the coordinators, at first use)
    from floodmark.broker.share_group.driver import ShareSettings
    from floodmark.groups import CoreConfig

log = logging.getLogger(__name__)
_LOGGED = 10  # groups named per change in the log; the rest are counted


def _check_name(group: str) -> None:
    if not group:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")


async def alter(broker: HandlerContext, group: str, configs: Configs, *,
                validate_only: bool) -> None:
    """Replace ``group``'s whole config set with ``configs`` (text or typed values)."""
    _check_name(group)
    typed = validate(configs, broker.config.get)
    if validate_only:
        return
    await broker.controller.alter_group_configs(group, typed)
    apply(broker)


def current(broker: BrokerCore, group: str) -> Configs:
    """The group's own configs (a copy)."""
    return dict(broker.controller.group_configs().get(group, {}))


def describe(broker: BrokerCore, group: str, synonyms: bool) -> list[dict[str, object]]:
    """DescribeConfigs' entries for ``group``: every group config, sorted by name. Kafka lists
    one synonym, the entry itself (its group value, or the default it runs with)."""
    if not group:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    own = broker.controller.group_configs().get(group, {})
    values = effective(own, broker.config.get)
    out: list[dict[str, object]] = []
    for name in sorted(GROUP_CONFIGS):
        source = ConfigSource.DYNAMIC_GROUP_CONFIG if name in own \
            else ConfigSource.DEFAULT_CONFIG
        value = render(values[name])
        out.append({
            "name": name, "value": value, "read_only": False,
            "is_default": source is ConfigSource.DEFAULT_CONFIG,
            "config_source": int(source), "is_sensitive": False,
            "synonyms": [{"name": name, "value": value, "source": int(source)}]
            if synonyms else [],
            "config_type": int(GROUP_CONFIGS[name].type), "documentation": None,
        })
    return out


def apply(broker: HandlerContext) -> bool:
    """Take the group configs in the metadata into use; True when something changed."""
    from floodmark.broker.share_group.driver import share_settings
    from floodmark.groups import CoreConfig

    every = broker.controller.group_configs()
    consumer: dict[str, CoreConfig] = {}
    share: dict[str, ShareSettings] = {}
    base = broker.consumer_groups.config
    enabled = broker.share_groups.settings.enabled
    for group, own in every.items():
        try:
            values = effective(own, broker.config.get)
            consumer[group] = CoreConfig(
                session_timeout_ms=int(str(values["consumer.session.timeout.ms"])),
                heartbeat_interval_ms=int(str(values["consumer.heartbeat.interval.ms"])),
                assignors=base.assignors)
            share[group] = share_settings(enabled, values)
        except (KafkaError, ValueError) as exc:
            log.error("broker %d: group %s: cannot apply its group configs %s (%s); it runs "
                      "with the broker's", broker.node_id, group, own, exc)
    before_consumer = broker.consumer_groups.group_configs
    before_share = broker.share_groups.group_settings
    changed = sorted(g for g in set(consumer) | set(before_consumer)
                     if consumer.get(g) != before_consumer.get(g)
                     or share.get(g) != before_share.get(g))
    if not changed:
        return False
    broker.consumer_groups.group_configs = consumer
    broker.share_groups.set_group_settings(share)
    for group in changed[:_LOGGED]:
        log.info("broker %d: group %s now runs with its group configs %s", broker.node_id,
                 group, every.get(group, {}))
    if len(changed) > _LOGGED:
        log.info("broker %d: and %d more groups' configs changed", broker.node_id,
                 len(changed) - _LOGGED)
    return True
