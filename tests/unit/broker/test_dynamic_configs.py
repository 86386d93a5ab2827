"""Dynamic broker configs taken into use from the metadata (``dynamic_configs.apply``): every
partition is reconfigured when what is in force changes, and only then -- not on every
metadata batch because the records hold text values or names only the controller reads."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from floodmark.broker import dynamic_configs
from floodmark.broker.config import BrokerConfig
from floodmark.storage.cleaner import LogCleaner


class Broker(SimpleNamespace):
    """What ``apply`` reads and changes of a broker; ``reconfigured`` counts the partitions it
    reconfigures."""

    def __init__(self, records: dict[str, dict[str, Any]]) -> None:
        super().__init__(
            node_id=1, config=BrokerConfig(Path("/nonexistent")),
            controller=SimpleNamespace(broker_configs=lambda: records),
            storage=SimpleNamespace(base_config=None, cleaner=SimpleNamespace(
                max_map_keys=0, keys_for=LogCleaner.keys_for)),
            partitions={("t", p): SimpleNamespace(topic_configs={}) for p in range(3)})
        self.reconfigured = 0

    def reconfigure_partition(self, ps: Any, topic_configs: Any, *, force: bool) -> None:
        self.reconfigured += 1


def test_partitions_are_reconfigured_only_when_the_configs_in_force_change() -> None:
    # as ``cluster up`` leaves them: a controller setting in the default, and a text value
    records: dict[str, dict[str, Any]] = {
        "": {"broker.session.timeout.ms": "9000", "log.retention.ms": "600000"}}
    broker = Broker(records)
    assert dynamic_configs.apply(broker) is True  # type: ignore[arg-type]
    assert broker.reconfigured == 3
    assert broker.config.dynamic.cluster_default == {"log.retention.ms": 600000}
    for _ in range(5):  # later metadata batches with the same configs: nothing to do
        assert dynamic_configs.apply(broker) is False  # type: ignore[arg-type]
    assert broker.reconfigured == 3
    records["1"] = {"log.retention.ms": "1000"}  # this broker's own: a change
    assert dynamic_configs.apply(broker) is True  # type: ignore[arg-type]
    assert broker.reconfigured == 6
    assert broker.config.dynamic.this_broker == {"log.retention.ms": 1000}
    records["1"] = {"log.retention.ms": 1000}  # the same value typed: no change
    assert dynamic_configs.apply(broker) is False  # type: ignore[arg-type]
    assert broker.reconfigured == 6
