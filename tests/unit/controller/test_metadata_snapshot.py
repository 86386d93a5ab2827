"""Metadata snapshots (KIP-630): the format, the store, and the load-or-replay choice at start."""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.controller.image import MetadataImage, topic_metas
from floodmark.controller.logic import ControllerConfig, ControllerLogic
from floodmark.controller.metadata_log import MetadataLogConfig
from floodmark.controller.server import ControllerServer
from floodmark.controller.snapshot import (
    IMAGE_FIELDS,
    CorruptSnapshotError,
    SnapshotId,
    SnapshotStore,
    decode_snapshot,
    encode_snapshot,
    image_from_records,
    image_records,
    parse_file_name,
)
from floodmark.security.acl import AclBindingFilter, new_binding
from floodmark.security.quotas import entity
from floodmark.storage.fs import MemoryFileSystem


def _picture(image: MetadataImage) -> dict[str, Any]:
    """Everything an image says, compared field by field (not through the snapshot code)."""
    return {"next_offset": image.next_offset, "cluster_id": image.cluster_id,
            "brokers": dict(image.brokers), "topics": topic_metas(image),
            "partitions": {n: dict(t.partitions) for n, t in image.topics.items()},
            "next_producer_id": image.next_producer_id,
            "broker_configs": image.broker_configs, "reassignments": image.reassignments,
            "acls": dict(image.acls.items()), "client_quotas": dict(image.client_quotas.items())}


def test_every_image_field_is_snapshotted() -> None:
    # A new MetadataImage field must be written by image_records (and listed in IMAGE_FIELDS).
    assert set(vars(MetadataImage())) == IMAGE_FIELDS


OPS = st.lists(st.tuples(st.sampled_from(["register", "heartbeat", "create", "delete", "fence",
                                          "shutdown", "pids", "config", "broker_config",
                                          "reassign", "acl", "remove_acl", "quota"]),
                         st.integers(0, 4), st.integers(1, 3)), max_size=40)


def _run_ops(ops: list[tuple[str, int, int]]) -> MetadataImage:
    image = MetadataImage()
    logic = ControllerLogic(image, ControllerConfig())
    logic.bootstrap()
    logic.start(0)
    now = 0
    for kind, a, b in ops:
        now += 10
        try:
            if kind == "register":
                logic.register_broker(a, "127.0.0.1", 9000 + a, uuid.uuid4().hex, now,
                                      rack=f"r{b}" if b < 3 else None)
            elif kind == "heartbeat" and a in image.brokers:
                logic.heartbeat(a, image.brokers[a].broker_epoch, now)
            elif kind == "create":
                logic.create_topic(f"t{a}", b, 1, {"retention.ms": str(1000 * b)})
            elif kind == "delete":
                logic.delete_topic(f"t{a}")
            elif kind == "fence":
                logic.fence_broker(a, "test")
            elif kind == "shutdown" and a in image.brokers:
                logic.heartbeat(a, image.brokers[a].broker_epoch, now, want_shutdown=True)
            elif kind == "pids":
                logic.allocate_producer_ids()
            elif kind == "config":
                logic.alter_topic_configs(f"t{a}", {"cleanup.policy": "compact"})
            elif kind == "reassign":
                logic.alter_partition_reassignment(f"t{a}", 0, tuple(sorted({a, b})))
            elif kind == "acl":
                logic.create_acls([new_binding(2 + a % 3, f"t{b}", 3 + a % 2, f"User:u{a}", "*",
                                               3 + b, 3 - a % 2)])
            elif kind == "remove_acl":
                logic.delete_acls([AclBindingFilter(principal=f"User:u{a}")])
            elif kind == "quota":
                logic.alter_client_quotas([(entity(f"u{a}" if a else None, f"c{b}"), {
                    "producer_byte_rate": None if b == 3 else float(1000 * a + b)})])
            elif kind == "broker_config":
                logic.alter_broker_configs(str(a) if b > 1 else "",
                                           {"log.retention.ms": 1000 * b})
        except Exception:  # refused requests (unknown topic, no brokers): change nothing
            pass
    return image


@settings(max_examples=60, deadline=None)
@given(OPS, st.integers(0, 50))
def test_snapshot_round_trip_rebuilds_the_image(ops: list[tuple[str, int, int]],
                                                epoch: int) -> None:
    image = _run_ops(ops)
    sid = SnapshotId(image.next_offset, epoch)
    data = encode_snapshot(sid, image_records(image))
    found, records = decode_snapshot(data)
    assert found == sid
    assert _picture(image_from_records(found.end_offset, records)) == _picture(image)


@settings(max_examples=40, deadline=None)
@given(OPS, st.data())
def test_torn_or_flipped_snapshot_is_refused(ops: list[tuple[str, int, int]],
                                             data: st.DataObject) -> None:
    encoded = encode_snapshot(SnapshotId(7, 1), image_records(_run_ops(ops)))
    # Positions as fractions: topic ids are random, so the length varies between runs.
    cut = int(data.draw(st.floats(0, 1, exclude_max=True)) * len(encoded))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(encoded[:cut])  # torn anywhere
    header_end = encoded.index(b"\n") + 1
    if len(encoded) > header_end:
        at = header_end + int(data.draw(st.floats(0, 1, exclude_max=True))
                              * (len(encoded) - header_end))
        flipped = bytearray(encoded)
        flipped[at] ^= data.draw(st.integers(1, 255))
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(bytes(flipped))


def test_file_names_are_kafkas() -> None:
    sid = SnapshotId(1234, 5)
    assert sid.file_name == "00000000000000001234-0000000005.checkpoint"
    assert parse_file_name(sid.file_name) == sid
    assert parse_file_name("00000000000000001234.log") is None


def test_store_skips_a_corrupt_newest_snapshot_with_one_line(
        caplog: pytest.LogCaptureFixture) -> None:
    fs = MemoryFileSystem()
    store = SnapshotStore(fs, "/m")
    image = _run_ops([("register", 1, 1), ("heartbeat", 1, 1), ("create", 1, 2)])
    older, newer = SnapshotId(3, 1), SnapshotId(image.next_offset, 2)
    store.write(older, encode_snapshot(older, [{"type": "cluster_id", "cluster_id": "x"}]))
    data = encode_snapshot(newer, image_records(image))
    store.write(newer, data[: len(data) // 2])  # torn
    with caplog.at_level(logging.WARNING):
        found = store.latest()
    assert found is not None and found[0] == older
    assert len([r for r in caplog.records if "ignoring snapshot" in r.message]) == 1
    assert store.retained_start() == older.end_offset
    store.write(SnapshotId(99, 2), data)
    store.prune()
    assert store.ids() == [newer, SnapshotId(99, 2)]


def test_chunked_transfer_installs_only_a_whole_intact_snapshot() -> None:
    leader, follower = SnapshotStore(MemoryFileSystem(), "/l"), SnapshotStore(MemoryFileSystem(),
                                                                              "/f")
    image = _run_ops([("register", i, 1) for i in range(5)] + [("create", 1, 3)])
    sid = SnapshotId(image.next_offset, 3)
    data = encode_snapshot(sid, image_records(image))
    leader.write(sid, data)
    size, position, whole = len(data), 0, None
    # A chunk that does not continue the transfer is dropped.
    assert follower.receive_chunk(sid.end_offset, sid.epoch, 5, size, b"xx") == (0, None)
    restarted = False
    while whole is None:
        chunk = leader.read_chunk(sid.end_offset, sid.epoch, position, 100)
        position, whole = follower.receive_chunk(sid.end_offset, sid.epoch, position, size, chunk)
        if position >= 300 and not restarted:  # asked again from 0: what is held is kept
            restarted = True
            assert follower.receive_chunk(sid.end_offset, sid.epoch, 0, size,
                                          leader.read_chunk(sid.end_offset, sid.epoch, 0, 100)
                                          ) == (position, None)
    assert whole == data and follower.ids() == [sid]
    # A corrupted transfer installs nothing and starts over.
    bad = SnapshotStore(MemoryFileSystem(), "/b")
    broken = data[:-3] + b"zz\n"
    assert bad.receive_chunk(sid.end_offset, sid.epoch, 0, size, broken) == (0, None)
    assert bad.ids() == []


# -- load or replay (a real controller, alone, on a real disk) ------------------------------------
def _controller(path: Path, snapshot_bytes: int) -> ControllerServer:
    return ControllerServer(str(path), ControllerConfig(), 0, None,
                            MetadataLogConfig(segment_bytes=4096,
                                              max_record_bytes_between_snapshots=snapshot_bytes))


def _fill(server: ControllerServer, topics: int) -> None:
    answer = server.call("register", {"broker_id": 1, "host": "127.0.0.1", "port": 9092,
                                      "incarnation": "a"})
    epoch = answer["result"]["broker_epoch"]
    server.call("heartbeat", {"broker_id": 1, "broker_epoch": epoch})
    for i in range(topics):
        assert "result" in server.call("create_topic", {"name": f"topic-{i}",
                                                        "num_partitions": 2,
                                                        "replication_factor": 1})


def test_restart_loads_the_newest_snapshot_and_replays_only_the_log_after_it(
        tmp_path: Path) -> None:
    server = _controller(tmp_path, 2000)
    _fill(server, 60)
    before = _picture(server.image)
    assert len(server.snapshots.ids()) == 2
    newest = server.snapshots.ids()[-1]
    assert server.mlog.log.log_start_offset == server.snapshots.ids()[0].end_offset > 0
    assert server.mlog.log.segment_base_offsets()[0] > 0  # whole segments below it deleted
    server.mlog.close()

    again = _controller(tmp_path, 2000)
    assert again.records_base == newest.end_offset  # loaded from the snapshot...
    assert len(again.records) == again.image.next_offset - newest.end_offset  # ...+ the rest
    assert _picture(again.image) == before
    again.mlog.close()

    # The newest snapshot torn: the previous one and the log after it give the same image.
    path = os.path.join(again.mlog.path, newest.file_name)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    third = _controller(tmp_path, 0)
    assert third.records_base == third.snapshots.ids()[0].end_offset < newest.end_offset
    assert _picture(third.image) == before
    third.mlog.close()


def test_without_snapshots_the_whole_log_is_replayed(tmp_path: Path) -> None:
    server = _controller(tmp_path, 0)
    _fill(server, 20)
    before = _picture(server.image)
    assert server.snapshots.ids() == [] and server.mlog.log.log_start_offset == 0
    server.mlog.close()
    again = _controller(tmp_path, 0)
    assert again.records_base == 0 and _picture(again.image) == before
    again.mlog.close()


def test_a_fetch_below_the_snapshot_gets_the_snapshot(tmp_path: Path) -> None:
    server = _controller(tmp_path, 2000)
    _fill(server, 40)
    result = server.call("status", {"from_offset": 0})["result"]
    snapshot = result["snapshot"]
    assert snapshot["end_offset"] == server.records_base
    from floodmark.controller.client import ControllerClient

    client = ControllerClient("127.0.0.1:1", 7)
    client.apply_records(result["records"], snapshot)
    assert _picture(client.image) == _picture(server.image)
    client.close()
    server.mlog.close()


def test_a_decision_over_one_mib_is_one_batch_in_the_metadata_log(tmp_path: Path) -> None:
    # Creating (or fencing the broker of) thousands of partitions is one decision, one batch
    # well over a partition's 1 MiB max.message.bytes: the metadata log takes it (8 MiB), and a
    # restart rebuilds the same image.
    server = _controller(tmp_path, 0)
    _fill(server, 0)
    answer = server.call("create_topic", {"name": "wide", "num_partitions": 8000,
                                          "replication_factor": 1, "configs": {
                                              "retention.ms": "1" * 200}})
    assert "result" in answer, answer
    assert server.mlog.log.size_bytes > 1 << 20
    before = _picture(server.image)
    server.mlog.close()
    again = _controller(tmp_path, 0)
    assert _picture(again.image) == before
    again.mlog.close()


def test_a_reassignment_in_progress_survives_a_snapshot() -> None:
    image = _run_ops([("register", b, 1) for b in range(5)]
                     + [("heartbeat", b, 1) for b in range(5)]
                     + [("create", 1, 2), ("reassign", 1, 3)])
    assert image.reassignments
    sid = SnapshotId(image.next_offset, 1)
    found, records = decode_snapshot(encode_snapshot(sid, image_records(image)))
    assert _picture(image_from_records(found.end_offset, records)) == _picture(image)


def test_a_change_the_metadata_log_refuses_leaves_the_image_as_the_log_is(
        tmp_path: Path) -> None:
    # A decision whose records the log does not take (here one record over the 8 MiB batch
    # limit: a topic config value nobody bounds) changed the image before the append failed:
    # the topic existed for the controller and no broker, and every later decision failed
    # ('metadata log at N, records start at M'). Now it is refused and undone.
    server = _controller(tmp_path, 0)
    _fill(server, 1)
    before = _picture(server.image)
    huge = server.call("create_topic", {"name": "huge", "num_partitions": 1,
                                        "replication_factor": 1,
                                        "configs": {"message.timestamp.difference.max.ms":
                                                    "x" * (9 << 20)}})
    assert huge.get("error") is not None, huge
    assert _picture(server.image) == before
    assert "refused" in huge["message"], huge
    assert server.logic is not None and server.logic.image is server.image
    later = server.call("create_topic", {"name": "later", "num_partitions": 2,
                                         "replication_factor": 1})
    assert "result" in later, later
    after = _picture(server.image)
    assert "later" in after["topics"] and "huge" not in after["topics"]
    server.mlog.close()
    again = _controller(tmp_path, 0)
    assert _picture(again.image) == after
    again.mlog.close()
