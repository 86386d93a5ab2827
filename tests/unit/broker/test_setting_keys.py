"""The broker reads its settings through typed keys (``broker.setting_keys``,
``BrokerConfig.value``): a key names a setting of the registry and is checked against its type
when made; the value read is the one in force, typed."""

from __future__ import annotations

from pathlib import Path

import pytest

from floodmark.broker import setting_keys
from floodmark.broker.config import BrokerConfig
from floodmark.broker.setting_keys import (
    AUTO_CREATE_TOPICS_ENABLE,
    GROUP_CONSUMER_MIGRATION_POLICY,
    NUM_PARTITIONS,
    BoolKey,
    IntKey,
    RawKey,
)


def test_a_key_names_a_known_setting_of_its_type() -> None:
    with pytest.raises(ValueError, match="not a setting"):
        IntKey("num.partition")
    with pytest.raises(ValueError, match="BOOLEAN"):
        IntKey("auto.create.topics.enable")
    with pytest.raises(ValueError, match="INT"):
        BoolKey("num.partitions")
    RawKey("super.users")


def test_every_key_of_the_module_is_named_after_its_setting() -> None:
    keys = {name: key for name, key in vars(setting_keys).items()
            if isinstance(key, IntKey | BoolKey | RawKey)}
    assert len(keys) > 40
    for name, key in keys.items():
        assert name == key.name.replace(".", "_").upper()


def test_the_value_in_force_comes_back_typed(tmp_path: Path) -> None:
    config = BrokerConfig.load(data_dir=tmp_path, listen="127.0.0.1:9999",
                               overrides=["num.partitions=3"])
    assert config.value(NUM_PARTITIONS) == 3
    assert config.value(AUTO_CREATE_TOPICS_ENABLE) is True
    assert config.value(GROUP_CONSUMER_MIGRATION_POLICY) == "bidirectional"
    config.dynamic.cluster_default["auto.create.topics.enable"] = "false"  # as text
    config.dynamic.this_broker["num.partitions"] = 5
    assert config.value(AUTO_CREATE_TOPICS_ENABLE) is False
    assert config.value(NUM_PARTITIONS) == 5
