"""KIP-932's APIs spoken with floodmark's own client and kio's messages against a real broker
process (``group.share.enable=true``): ApiVersions advertises them, two members join one share
group and share one partition (ShareGroupHeartbeat, ShareGroupDescribe), each acquires
different records (ShareFetch), acknowledgements ride on the next ShareFetch, a RELEASE is
delivered again with a higher delivery count, ShareAcknowledge closes a session and gives back
what it held, a restart of the broker keeps what was acknowledged, and the offset APIs describe,
refuse to alter a group with members, then alter and delete; DeleteGroups removes the empty
group. A broker with share groups off
neither advertises nor serves them."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from floodmark.cli.main import main
from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode
from floodmark.records import Record, build_batch
from floodmark.wire.api_table import ApiKey

TOPIC, GROUP = "shared", "sg"
ON = ("--set", "group.share.enable=true", "--set", "share.auto.offset.reset=earliest")
ACCEPT, RELEASE = 1, 2


def produce(c: KafkaConnection, values: list[bytes]) -> None:
    """One batch per record: ShareFetch's max_records is a soft limit at batch boundaries (a
    batch is acquired whole, as Kafka's), and this test counts records one by one."""
    for v in values:
        batch = build_batch([Record(0, 0, None, v)])
        resp = c.request(ApiKey.PRODUCE, 9, {"acks": -1, "timeout": 10_000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
        assert resp.responses[0].partition_responses[0].error_code == 0


def create_topic(c: KafkaConnection) -> uuid.UUID:
    resp = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []}], "timeout": 10_000, "validate_only": False})
    assert resp.topics[0].error_code == 0, resp
    return resp.topics[0].topic_id


def heartbeat(c: KafkaConnection, member: str, epoch: int, **extra: Any) -> Any:
    return c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": GROUP, "member_id": member, "member_epoch": epoch, **extra})


def share_fetch(c: KafkaConnection, member: str, epoch: int, topic_id: uuid.UUID,
                acks: tuple[tuple[int, int, int], ...] = (), max_records: int = 2) -> Any:
    return c.request(ApiKey.SHARE_FETCH, 1, {
        "group_id": GROUP, "member_id": member, "share_session_epoch": epoch, "max_wait": 0,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": 10,
        "topics": [{"topic_id": topic_id, "partitions": [{
            "partition_index": 0, "acknowledgement_batches": [
                {"first_offset": f, "last_offset": last, "acknowledge_types": [t]}
                for f, last, t in acks]}]}],
        "forgotten_topics_data": []})


def acquired(resp: Any) -> list[tuple[int, int, int]]:
    assert resp.error_code == 0, resp
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0 and p.acknowledge_error_code == 0, p
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]


@pytest.mark.timeout(120)
def test_share_group_apis_on_a_real_broker(broker_factory: Any,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    b = broker_factory(*ON)
    with KafkaConnection(b.bootstrap, timeout_s=10) as c:
        keys = {k.api_key for k in c.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"}).api_keys}
        assert {76, 77, 78, 79, 90, 91, 92} <= keys
        topic_id = create_topic(c)
        produce(c, [b"r%d" % i for i in range(6)])
        a, bm = "member-a", "member-b"
        ha = heartbeat(c, a, 0, subscribed_topic_names=[TOPIC])
        assert ha.error_code == 0 and ha.member_epoch == 1
        hb = heartbeat(c, bm, 0, subscribed_topic_names=[TOPIC])
        assert hb.error_code == 0 and hb.assignment.topic_partitions[0].partitions == (0,)
        d = c.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": [GROUP], "include_authorized_operations": False}).groups[0]
        assert d.error_code == 0 and d.group_state == "Stable" and len(d.members) == 2
        # the two members acquire different records of the one partition
        assert acquired(share_fetch(c, a, 0, topic_id)) == [(0, 1, 1)]
        assert acquired(share_fetch(c, bm, 0, topic_id)) == [(2, 3, 1)]
        # a accepts 0, releases 1 (piggy-backed on its next fetch) and gets 1 again, count 2
        assert acquired(share_fetch(c, a, 1, topic_id, ((0, 0, ACCEPT), (1, 1, RELEASE)))) \
            == [(1, 1, 2), (4, 4, 1)]
        # acknowledging what another member holds is refused, nothing changes; b acquires 5
        bad = share_fetch(c, bm, 1, topic_id, ((4, 4, ACCEPT),))
        assert bad.responses[0].partitions[0].acknowledge_error_code == \
            ErrorCode.INVALID_RECORD_STATE
        assert [(x.first_offset, x.delivery_count) for x in
                bad.responses[0].partitions[0].acquired_records] == [(5, 1)]
        # b's session epoch 3 is out of order
        assert share_fetch(c, bm, 3, topic_id).error_code == \
            ErrorCode.INVALID_SHARE_SESSION_EPOCH
        # b closes its session accepting 2 and 3: 5 comes back
        ack = c.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": GROUP, "member_id": bm, "share_session_epoch": -1, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition_index": 0,
                 "acknowledgement_batches": [{"first_offset": 2, "last_offset": 3,
                                              "acknowledge_types": [ACCEPT]}]}]}]})
        assert ack.error_code == 0 and ack.responses[0].partitions[0].error_code == 0
        assert acquired(share_fetch(c, a, 2, topic_id, ((1, 1, ACCEPT), (4, 4, ACCEPT)),
                                    max_records=10)) == [(5, 5, 2)]
        offsets = c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [
            {"group_id": GROUP, "topics": [{"topic_name": TOPIC, "partitions": [0]}]}]})
        assert offsets.groups[0].topics[0].partitions[0].start_offset == 5
        # the CLI: floodmark share-group list|describe --json
        capsys.readouterr()
        assert main(["share-group", "list", "--json", "--bootstrap-server", b.bootstrap]) == 0
        assert json.loads(capsys.readouterr().out) == [{"group": GROUP, "state": "Stable"}]
        assert main(["share-group", "describe", GROUP, "--json",
                     "--bootstrap-server", b.bootstrap]) == 0
        described = json.loads(capsys.readouterr().out)
        assert sorted(m["member_id"] for m in described["members"]) == [a, bm]
        assert described["members"][0]["assignment"] == [f"{TOPIC}-0"]
        assert described["partitions"] == [{"topic": TOPIC, "partition": 0, "start_offset": 5,
                                            "log_end_offset": 6, "lag": 1, "error": None}]
        refused = c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": GROUP, "topics": [
            {"topic_name": TOPIC, "partitions": [{"partition_index": 0, "start_offset": 0}]}]})
        assert refused.error_code == ErrorCode.NON_EMPTY_GROUP
        epochs = {m.member_id: m.member_epoch for m in c.request(
            ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [GROUP],
                                             "include_authorized_operations": False}
        ).groups[0].members}
    b.restart()  # 5 is still acquired by a: the lock does not outlive the broker
    with KafkaConnection(b.bootstrap, timeout_s=10) as c:
        deadline = time.monotonic() + 30
        while True:  # the broker answers once it leads the partition again
            h = heartbeat(c, a, epochs[a])
            if h.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        # the membership was stored in __consumer_offsets: a and b go on with their epochs
        assert h.error_code == 0 and h.member_epoch == epochs[a], h
        h = heartbeat(c, "member-c", 0, subscribed_topic_names=[TOPIC])
        assert h.error_code == 0 and h.member_epoch == max(epochs.values()) + 1, h
        got = acquired(share_fetch(c, "member-c", 0, topic_id, max_records=10))
        assert got == [(5, 5, 3)], "the acknowledged records stay done after a restart"
        for member in ("member-c", a, bm):
            assert heartbeat(c, member, -1).error_code == 0
        assert c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": GROUP, "topics": [
            {"topic_name": TOPIC, "partitions": [{"partition_index": 0, "start_offset": 0}]}]}
            ).responses[0].partitions[0].error_code == 0
        assert acquired(share_fetch(c, "member-d", 0, topic_id, max_records=10)) == \
            [(0, 5, 1)]
        deleted = c.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {
            "group_id": GROUP, "topics": [{"topic_name": TOPIC}]})
        assert deleted.error_code == 0 and deleted.responses[0].error_code == 0
        # DeleteGroups removes the empty share group
        gone = c.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [GROUP]})
        assert gone.results[0].error_code == 0
        listed = c.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [],
                                                   "types_filter": ["share"]})
        assert listed.groups == ()


def test_share_groups_off_by_default(broker: Any) -> None:
    with KafkaConnection(broker.bootstrap, timeout_s=10) as c:
        keys = {k.api_key for k in c.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"}).api_keys}
        assert not keys & {76, 77, 78, 79, 90, 91, 92}
        h = heartbeat(c, "m", 0, subscribed_topic_names=["x"])
        assert h.error_code == ErrorCode.UNSUPPORTED_VERSION
