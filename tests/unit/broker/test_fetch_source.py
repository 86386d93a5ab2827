"""Who a Fetch comes from, as the consumer read rule sees it (``handlers.data.fetch_source``),
and the answer for a partition this broker does not host (KIP-392: NOT_LEADER_OR_FOLLOWER when
the cluster knows it, so a consumer sent to a replica that just lost it returns to the
leader). Pure: a stand-in for the handler context."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from floodmark.broker.config import BrokerConfig
from floodmark.broker.handlers.data import FetchSource, _read_partition, fetch_source
from floodmark.constants import RACK_AWARE_REPLICA_SELECTOR
from floodmark.errors import ErrorCode


class Context:
    def __init__(self, selector: str | None) -> None:
        self.config = SimpleNamespace(
            value=lambda key: {"replica.selector.class": selector}[key.name])
        self.listeners: list[str | None] = []

    def live_brokers(self, listener: str | None = None) -> list[dict[str, Any]]:
        self.listeners.append(listener)
        return [{"node_id": 1, "host": "h", "port": 1, "rack": "a"},
                {"node_id": 2, "host": "h", "port": 2, "rack": None}]

    def now_ms(self) -> int:
        return 1234


def request(rack_id: str | None) -> SimpleNamespace:
    return SimpleNamespace(rack_id=rack_id)


def test_consumers_from_fetch_v11_may_read_from_followers() -> None:
    ctx: Any = Context(None)
    assert fetch_source(ctx, 10, request(None), -1, "PLAIN") == FetchSource(-1, True, None)
    assert fetch_source(ctx, 11, request("a"), -1, "PLAIN") == FetchSource(-1, False, None)
    assert fetch_source(ctx, 17, request("a"), 2, "PLAIN") == FetchSource(2, True, None)
    assert not ctx.listeners  # no selector: the brokers are not even looked at


def test_selection_only_with_a_selector_and_a_rack() -> None:
    ctx: Any = Context(RACK_AWARE_REPLICA_SELECTOR)
    assert fetch_source(ctx, 12, request(""), -1, "PLAIN").selection is None
    source = fetch_source(ctx, 12, request("a"), -1, "PLAIN")
    assert not source.leader_only and source.selection is not None
    assert source.selection.client_rack == "a"
    assert dict(source.selection.broker_racks) == {1: "a", 2: None}
    assert source.selection.now_ms == 1234 and ctx.listeners == ["PLAIN"]


def test_a_partition_not_hosted_here() -> None:
    p = SimpleNamespace(partition=3)
    known = _read_partition(None, p, FetchSource(), 100, known=True)
    assert known.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    unknown = _read_partition(None, p, FetchSource(), 100)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_replica_selector_class_is_kafkas_rack_aware_one_or_unset(tmp_path: Any) -> None:
    ok = BrokerConfig.load(data_dir=tmp_path, overrides=[
        f"replica.selector.class={RACK_AWARE_REPLICA_SELECTOR}"])
    assert ok.get("replica.selector.class") == RACK_AWARE_REPLICA_SELECTOR
    assert BrokerConfig.load(data_dir=tmp_path).get("replica.selector.class") is None
    with pytest.raises(ValueError, match=re.escape(
            "Invalid value com.example.Nearest for configuration replica.selector.class")):
        BrokerConfig.load(data_dir=tmp_path,
                          overrides=["replica.selector.class=com.example.Nearest"])
