"""Issue 9, bug 2: Metadata with topic auto-creation on a cluster answered with a KeyError (the
handler kept the topic list read before it created the topic) and the connection was closed.
Now the answer is the topic or LEADER_NOT_AVAILABLE while the new topic propagates, and a
confluent-kafka producer writing to a topic that does not exist yet just works. At shutdown no
replica fetcher logs a traceback (bug 5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from floodmark.client import KafkaConnection
from floodmark.errors import ErrorCode
from tests.cluster.helpers import start_cluster

pytestmark = pytest.mark.integration


def test_metadata_auto_creates_topics_on_a_cluster(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c")
    try:
        with KafkaConnection(cluster.address(cluster.broker_ids[0])) as conn:
            resp = conn.request(3, 12, {"topics": [{"name": "auto-1"}],
                                        "allow_auto_topic_creation": True})
            code = int(resp.topics[0].error_code)
            assert code in (0, int(ErrorCode.LEADER_NOT_AVAILABLE)), code
            # The same connection keeps working.
            conn.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
        delivered: list[int] = []
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        p.produce("auto-2", value=b"hello",
                  on_delivery=lambda err, msg: delivered.append(msg.offset()) if err is None
                  else None)
        assert p.flush(60) == 0
        assert delivered == [0]
    finally:
        cluster.stop()
    # Issue 9, bug 5: replica fetchers stopped at shutdown used to log AttributeError
    # ('NoneType' ... readexactly) from a connection closed under a waiting request.
    log = "".join(path.read_text(errors="replace")
                  for path in (tmp_path / "c" / "logs").glob("broker-*.log"))
    assert "KeyError" not in log and "handler failed" not in log
    assert "AttributeError" not in log and "Traceback" not in log
