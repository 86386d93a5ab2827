"""One metadata record no broker can apply never wedges a broker (issue 11, Build 3).

Real processes: a controller and two brokers. While the controller is stopped, records an older
or newer controller could have written are appended to its metadata log: a topic with
``min.insync.replicas=abc`` (the issue's own example) and a record type this version does not
know (applying it raised, and a broker fetched it again for ever). After the restart the
controller and every broker skip what cannot be applied loudly (the topic itself is kept,
without the value refused: a broker deletes the partitions of a topic it does not know) (log line, /metrics counter, ``floodmark cluster status`` text and ``--json``
with its offset and reason) and applies every record after it: a topic created afterwards is
served to a real client.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.controller.metadata_log import MetadataLog
from tests.cluster.helpers import start_cluster, wait_until


def _metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url, timeout=5) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "_total "):
                return float(line.split()[-1])
    return -1.0


def test_a_record_no_broker_can_apply_is_skipped_reported_and_the_rest_applied(
        tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, brokers=2, metrics=True)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("before", 1, 2)])["before"].result(30)
        ctl = cluster.controller_ids[0]
        cluster.kill(ctl, signal.SIGTERM)
        assert cluster.wait_dead(ctl, 20)
        mlog = MetadataLog(str(cluster.controller_dir(ctl)))
        bad_offset = mlog.log_end_offset
        mlog.append([
            (bad_offset, {"type": "topic", "name": "poisoned", "topic_id": str(uuid.uuid4()),
                          "configs": {"min.insync.replicas": "abc"}}),
            (bad_offset + 1, {"type": "partition", "topic": "poisoned", "partition": 0,
                              "replicas": [1, 2], "isr": [1, 2], "leader": 1,
                              "leader_epoch": 0, "partition_epoch": 0}),
            # A record type from a newer controller: applying it raised, and the broker fetched
            # the same records again for ever (every later change lost).
            (bad_offset + 2, {"type": "from_the_future", "what": 1}),
        ])
        mlog.close()
        cluster.start_node(ctl)

        def reported() -> list[dict[str, object]]:
            status = cluster.status()
            brokers = [n for n in status["nodes"] if n["role"] == "broker"]
            if all(n.get("unapplied_records_total") == 2 for n in brokers):
                return brokers
            return []

        brokers = wait_until(reported, 30, "every broker reports the record it skipped")
        for n in brokers:
            assert n["unapplied_records_total"] == 2
            bad, unknown = n["unapplied_records"]
            assert bad["offset"] == bad_offset and unknown["offset"] == bad_offset + 2
            assert "min.insync.replicas" in str(bad["reason"]) and "abc" in str(bad["reason"])
            assert "applied without the topic config values refused" in str(bad["reason"])
            assert "from_the_future" in str(unknown["reason"])
            assert _metric(str(n["metrics"]),
                           "kafka_server_broker_metadata_metrics_metadata_apply_error_count") == 2
            assert _metric(str(n["metrics"]),
                           "kafka_server_broker_metadata_metrics_last_applied_record_offset"
                           ) > bad_offset
            assert "SKIPPED metadata record at offset" in cluster.log_path(n["id"]).read_text()
        text = subprocess.run(
            [sys.executable, "-m", "floodmark.cli", "cluster", "status", "--data-dir",
             str(tmp_path)], capture_output=True, text=True, timeout=60, check=True).stdout
        assert f"offset {bad_offset}: " in text and "METADATA RECORDS NOT APPLIED" in text
        as_json = json.loads(subprocess.run(
            [sys.executable, "-m", "floodmark.cli", "cluster", "status", "--json", "--data-dir",
             str(tmp_path)], capture_output=True, text=True, timeout=60, check=True).stdout)
        assert all(n["unapplied_records"][0]["offset"] == bad_offset
                   for n in as_json["nodes"] if n["role"] == "broker")
        # The same heartbeats carry each broker's image offset: past the skipped record.
        assert all(n["metadata_offset"] > bad_offset and n["metadata_applied"]
                   for n in as_json["nodes"] if n["role"] == "broker")
        assert "metadata_offset=" in text

        # Every later record still applies: a new topic is created and served.
        admin.create_topics([NewTopic("after", 1, 2)])["after"].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True})
        acked: list[int] = []
        for i in range(20):
            producer.produce("after", str(i).encode(),
                             on_delivery=lambda err, msg: acked.append(msg.offset())
                             if err is None else None)
        assert producer.flush(30) == 0 and sorted(acked) == list(range(20))
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unapplied",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["after"])
        seen: list[bytes] = []

        def read_all() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(bytes(msg.value() or b""))
            return len(seen) >= 20

        wait_until(read_all, 60, "the 20 records of the topic created after the bad record",
                   step_s=0)
        consumer.close()
        assert seen == [str(i).encode() for i in range(20)]
        # The topic itself is kept (without the value refused): a broker never deletes the
        # partitions of a topic over one config value.
        status = cluster.controller_status()
        assert status is not None and "poisoned" in status["topics"]
        assert status["unapplied_records"][0]["offset"] == bad_offset
        poisoned = admin.list_topics(timeout=10).topics.get("poisoned")
        assert poisoned is not None and poisoned.error is None

        # A broker restarted over metadata it cannot wholly apply deletes no partition
        # directory as an orphan (its picture is incomplete).
        broker = cluster.broker_ids[0]
        cluster.kill(broker, signal.SIGTERM)
        assert cluster.wait_dead(broker, 30)
        ghost = cluster.data_dir / f"broker-{broker}" / "ghost-0"
        ghost.mkdir()
        (ghost / "00000000000000000000.log").write_bytes(b"")
        cluster.start_node(broker)
        wait_until(lambda: "keeps every partition directory" in
                   cluster.log_path(broker).read_text(), 30, "the restarted broker's line")
        assert ghost.is_dir()
    finally:
        cluster.stop()
