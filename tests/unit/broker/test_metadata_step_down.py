"""The Metadata answer of a broker that stepped down for clients (``replication/lease.py``):
no leader for the partitions it stepped down from, and itself left out of the broker list and
of ``controller_id``, so librdkafka drops its connection there and asks another broker. A fake
handler context: only what ``_metadata_answer`` reads."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any, cast

from floodmark.broker.handlers.admin import _metadata_answer
from floodmark.errors import ErrorCode
from floodmark.metadata import PartitionMeta, TopicMeta

BROKERS = [{"node_id": n, "host": "h", "port": 9092 + n, "rack": None} for n in (1, 2, 3)]


class Membership:
    def __init__(self, down: set[tuple[str, int]]) -> None:
        self.down = down

    def leadership_in_doubt(self) -> bool:
        return bool(self.down)

    def steps_down(self, core: Any, now_ms: int) -> bool:
        return core in self.down

    def listed_brokers(self, listener_name: str | None = None) -> list[dict[str, Any]]:
        return list(BROKERS)


def _answer(down: set[tuple[str, int]]) -> dict[str, Any]:
    topic = TopicMeta("t", uuid.uuid4(), (PartitionMeta(0, 1, 4, (1, 2, 3), (1, 2, 3)),
                                          PartitionMeta(1, 2, 4, (2, 3, 1), (2, 3, 1))))
    broker = SimpleNamespace(
        node_id=1, membership=Membership(down), now_ms=lambda: 0,
        partitions={key: SimpleNamespace(core=key) for key in (("t", 0), ("t", 1))},
        controller=SimpleNamespace(topics=lambda: {"t": topic}, cluster_id="c"),
        live_brokers=lambda: list(BROKERS))
    header = SimpleNamespace(api_version=12)
    req = SimpleNamespace(topics=None)
    return cast(dict[str, Any], _metadata_answer(cast(Any, broker), cast(Any, header),
                                                 cast(Any, req), {}, None))


def test_a_broker_in_its_session_answers_as_its_metadata_says() -> None:
    answer = _answer(set())
    (topic,) = answer["topics"]
    assert [p["leader_id"] for p in topic["partitions"]] == [1, 2]
    assert [b["node_id"] for b in answer["brokers"]] == [1, 2, 3]


def test_a_stepped_down_broker_names_no_leader_and_leaves_itself_out() -> None:
    for _ in range(20):  # controller_id is a random live broker
        answer = _answer({("t", 0)})
        (topic,) = answer["topics"]
        first, second = topic["partitions"]
        assert first["leader_id"] == -1
        assert first["error_code"] == int(ErrorCode.LEADER_NOT_AVAILABLE)
        assert first["leader_epoch"] == 4  # librdkafka keeps its cached epoch: no older one
        assert second["leader_id"] == 2 and second["error_code"] == 0
        assert [b["node_id"] for b in answer["brokers"]] == [2, 3]
        assert answer["controller_id"] in (2, 3)
