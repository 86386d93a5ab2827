"""Several log directories (JBOD): placement, the start-up scan, directory ids, locks, and the
copy rounds of a replica move (pure storage rules over real temporary directories)."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from floodmark.broker.broker import Broker
from floodmark.broker.config import BrokerConfig
from floodmark.broker.storage_glue import Storage
from floodmark.client.connection import decode_response, encode_request
from floodmark.controller.image import MetadataImage
from floodmark.controller.logic import ControllerConfig, ControllerLogic
from floodmark.errors import ErrorCode
from floodmark.storage.checkpoints import TopicPartition
from floodmark.storage.clean_shutdown import CLEAN_SHUTDOWN_FILE
from floodmark.storage.data_dir import DataDirLockedError, lock_data_dirs
from floodmark.storage.fs import RealFileSystem
from floodmark.storage.log_dirs import (
    BadMetaPropertiesError,
    DirUsage,
    DuplicatePartitionError,
    choose_log_dir,
    load_or_create_directory_id,
    move_name,
    parse_log_dirs,
    parse_move_name,
    scan_log_dirs,
)
from floodmark.storage.replica_move import CopyState, sync_copy


def test_parse_log_dirs_keeps_order_and_drops_blanks_and_repeats() -> None:
    assert parse_log_dirs(" /a, /b/ ,,/a") == ["/a", "/b"]
    assert parse_log_dirs(None) == []
    assert parse_log_dirs("") == []


def test_broker_config_log_dirs_default_to_data_dir(tmp_path: Path) -> None:
    plain = BrokerConfig.load(data_dir=tmp_path, listen="127.0.0.1:0")
    assert plain.log_dirs == [tmp_path]
    jbod = BrokerConfig.load(data_dir=tmp_path, listen="127.0.0.1:0",
                             overrides=[f"log.dirs={tmp_path}/d1,{tmp_path}/d2"])
    assert jbod.log_dirs == [tmp_path / "d1", tmp_path / "d2"]


def test_placement_most_free_space_then_fewest_partitions_then_order() -> None:
    assert choose_log_dir([DirUsage(10, 0), DirUsage(20, 5)]) == 1
    assert choose_log_dir([DirUsage(20, 3), DirUsage(20, 2), DirUsage(20, 2)]) == 1
    assert choose_log_dir([DirUsage(5, 0)]) == 0
    with pytest.raises(ValueError):
        choose_log_dir([])


def _partition_dir(root: Path, name: str) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "00000000000000000000.log").write_bytes(b"x")
    return path


def test_scan_finds_each_partition_where_it_is(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _partition_dir(a, "t-0")
    _partition_dir(b, "t-1")
    _partition_dir(b, "other-topic-12")
    (a / "not-a-partition").mkdir()
    (a / "replication-offset-checkpoint").write_text("0\n0\n")
    found = scan_log_dirs(RealFileSystem(), [str(a), str(b)])
    assert found == {TopicPartition("t", 0): str(a), TopicPartition("t", 1): str(b),
                     TopicPartition("other-topic", 12): str(b)}


def test_scan_refuses_a_partition_in_two_directories_naming_both(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _partition_dir(a, "t-0")
    _partition_dir(b, "t-0")
    with pytest.raises(DuplicatePartitionError) as err:
        scan_log_dirs(RealFileSystem(), [str(a), str(b)])
    message = str(err.value)
    assert f"{a}/t-0" in message and f"{b}/t-0" in message and "\n" not in message


def test_broker_storage_places_scans_and_refuses_duplicates(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    config = BrokerConfig.load(data_dir=tmp_path / "data", listen="127.0.0.1:0",
                               overrides=[f"log.dirs={a},{b}"])
    storage = Storage(tmp_path / "data", config)
    logs = [storage.open_log("t", i, {}, now_ms=0)[0] for i in range(4)]
    homes = [storage.dir_of("t", i) for i in range(4)]
    # One file system: a tie on space, so the fewest partitions, then log.dirs' order.
    assert [h.path if h else None for h in homes] == [a, b, a, b]
    for plog in logs:
        plog.close()
    again = Storage(tmp_path / "data", config)
    found = [again.dir_of("t", i) for i in range(4)]
    assert [d.path if d else None for d in found] == [a, b, a, b]
    assert {d.directory_id for d in again.dirs} == {d.directory_id for d in storage.dirs}
    shutil.copytree(a / "t-0", b / "t-0")
    with pytest.raises(DuplicatePartitionError, match="t-0 is in two log directories"):
        Storage(tmp_path / "data", config)


def test_move_names_round_trip() -> None:
    name = move_name(("my-topic", 3), "abc123", "-future")
    assert name == "my-topic-3.abc123-future"
    assert parse_move_name(name) == (TopicPartition("my-topic", 3), "-future")
    assert parse_move_name("my-topic-3") is None


def test_scan_settles_leftovers_of_an_interrupted_move(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    # Crash before the swap: the source is live, the future copy is dropped.
    _partition_dir(a, "t-0")
    _partition_dir(b, move_name(("t", 0), "m1", "-future"))
    # Crash between the renames: only the -delete source is left: it becomes live again.
    _partition_dir(a, move_name(("t", 1), "m2", "-delete"))
    _partition_dir(b, move_name(("t", 1), "m2", "-future"))
    # Crash after the swap: the destination is live, the -delete source is dropped.
    _partition_dir(a, move_name(("t", 2), "m3", "-delete"))
    _partition_dir(b, "t-2")
    found = scan_log_dirs(RealFileSystem(), [str(a), str(b)])
    assert found == {TopicPartition("t", 0): str(a), TopicPartition("t", 1): str(a),
                     TopicPartition("t", 2): str(b)}
    assert sorted(os.listdir(a)) == ["t-0", "t-1"]
    assert sorted(os.listdir(b)) == ["t-2"]


def test_directory_id_made_once_and_kept(tmp_path: Path) -> None:
    fs = RealFileSystem()
    first = load_or_create_directory_id(fs, str(tmp_path))
    assert load_or_create_directory_id(fs, str(tmp_path)) == first
    assert f"directory.id={first}" in (tmp_path / "meta.properties").read_text()
    other = tmp_path / "other"
    other.mkdir()
    assert load_or_create_directory_id(fs, str(other)) != first
    (other / "meta.properties").write_text("version=1\n")
    with pytest.raises(BadMetaPropertiesError):
        load_or_create_directory_id(fs, str(other))


def test_every_log_dir_is_locked_once_and_a_second_holder_is_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    locks = lock_data_dirs([str(a), str(b), str(a)])
    try:
        assert len(locks) == 2
        with pytest.raises(DataDirLockedError) as err:
            lock_data_dirs([str(tmp_path / "c"), str(b)])
        assert str(b) in str(err.value) and "\n" not in str(err.value)
        # All or none: the lock on c taken before the refusal was released.
        lock_data_dirs([str(tmp_path / "c")])[0].release()
    finally:
        for lock in locks:
            lock.release()


def test_copy_rounds_follow_appends_truncation_and_deletion(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    seg = src / "00000000000000000000.log"
    seg.write_bytes(b"a" * 100)
    (src / "leader-epoch-checkpoint").write_text("0\n0\n")
    state = CopyState()
    assert sync_copy(str(src), str(dst), state, truncation_generation=0) > 100
    assert sync_copy(str(src), str(dst), state, truncation_generation=0) == 0
    with seg.open("ab") as fh:  # an append: only the tail is copied
        fh.write(b"b" * 10)
    assert sync_copy(str(src), str(dst), state, truncation_generation=0) == 10
    assert (dst / seg.name).read_bytes() == seg.read_bytes()
    seg.write_bytes(b"c" * 50)  # a truncation then new data: the whole file again
    assert sync_copy(str(src), str(dst), state, truncation_generation=1) == 50
    assert (dst / seg.name).read_bytes() == b"c" * 50
    (src / "leader-epoch-checkpoint").unlink()
    sync_copy(str(src), str(dst), state, truncation_generation=1,
              always=frozenset({seg.name}))
    assert sorted(os.listdir(dst)) == [seg.name]
    # a .log file of the same truncation generation only ever gets its tail, even "always"
    assert state.copied_bytes == 100 + 4 + 10 + 50


def test_controller_moves_replicas_of_a_failed_log_dir_and_nothing_else() -> None:
    """A heartbeat naming offline replicas (the broker's failed log dir, KIP-858): those
    partitions lose the broker from their ISR and, where it led, their leadership; its other
    partitions are untouched; repeating the heartbeat changes nothing more."""
    logic = ControllerLogic(MetadataImage(), ControllerConfig())
    logic.bootstrap()
    epochs = {b: logic.register_broker(b, "127.0.0.1", 9000 + b, f"i{b}", 0) for b in (1, 2, 3)}
    for b, epoch in epochs.items():
        logic.heartbeat(b, epoch, 0)
    logic.create_topic("t", 2, 3, {}, assignments=[(1, 2, 3), (1, 3, 2)])
    before = dict(logic.image.topics["t"].partitions)
    assert before[0].leader == 1 and before[1].leader == 1
    logic.heartbeat(1, epochs[1], 10, offline_replicas=[("t", 0), ("gone", 5)])
    after = logic.image.topics["t"].partitions
    assert after[0].leader in (2, 3) and 1 not in after[0].isr
    assert after[0].leader_epoch > before[0].leader_epoch
    assert after[1] == before[1]
    offset = logic.image.next_offset
    logic.heartbeat(1, epochs[1], 20, offline_replicas=[("t", 0)])
    assert logic.image.next_offset == offset  # repeated: no new record


def test_an_io_error_takes_only_its_log_dir_offline(tmp_path: Path) -> None:
    """One broker in this process, two log dirs: an I/O error met by a log in one of them
    takes that directory offline (its replicas refuse, DescribeLogDirs reports it, nothing is
    placed there, AlterReplicaLogDirs into it is refused); the other directory serves on."""
    a, b = tmp_path / "a", tmp_path / "b"
    config = BrokerConfig.load(data_dir=tmp_path / "data", listen="127.0.0.1:9999",
                               overrides=[f"log.dirs={a},{b}", "offsets.topic.num.partitions=1"])
    broker = Broker(config)
    broker.open()

    def call(api_key: int, version: int, body: dict[str, object]) -> Any:
        out = broker.dispatch(memoryview(encode_request(api_key, version, 7, body)[4:]),
                              None)  # type: ignore[arg-type]
        assert isinstance(out, list), "answered at once"
        return decode_response(b"".join(bytes(p) for p in out)[4:], api_key, version, 7)

    try:
        asyncio.run(broker.create_topic("t", 4, 1, {}))
        homes = {k[1]: broker.storage.dir_of(*k) for k in broker.partitions if k[0] == "t"}
        in_a = [p for p, d in homes.items() if d is not None and d.path == a]
        in_b = [p for p, d in homes.items() if d is not None and d.path == b]
        assert in_a and in_b
        broker.partitions[("t", in_a[0])].log.last_io_error = "appending: Input/output error"
        broker.check_log_dirs()
        assert all(broker.partitions[("t", p)].log.offline for p in in_a)
        assert not any(broker.partitions[("t", p)].log.offline for p in in_b)
        assert broker.storage.offline_partitions() == sorted(
            k for k in broker.partitions if broker.storage.dir_of(*k) is homes[in_a[0]])
        assert broker.storage.place().path == b
        described = {str(r.log_dir): r for r in call(35, 4, {"topics": None}).results}
        assert int(described[str(a.resolve())].error_code) == int(ErrorCode.KAFKA_STORAGE_ERROR)
        assert int(described[str(b.resolve())].error_code) == 0
        moved = call(34, 2, {"dirs": [{"path": str(a), "topics": [
            {"name": "t", "partitions": [in_b[0]]}]}]})
        assert int(moved.results[0].partitions[0].error_code) == int(
            ErrorCode.KAFKA_STORAGE_ERROR)
    finally:
        broker.close()
    # The healthy directory is marked clean at the stop; the failed one is not.
    assert (b / CLEAN_SHUTDOWN_FILE).exists()
    assert not (a / CLEAN_SHUTDOWN_FILE).exists()


def test_a_full_disk_is_retriable_and_never_fails_its_directory(tmp_path: Path) -> None:
    """ENOSPC/EDQUOT answer KAFKA_STORAGE_ERROR and leave the directory online (writes resume
    when space returns: tests/integration/test_disk_full.py); any other I/O error is
    remembered for the directory check, which takes the directory offline."""
    import errno

    from floodmark.storage.log import Log

    log = Log.open(str(tmp_path / "t-0"), now_ms=0)
    try:
        for code in (errno.ENOSPC, errno.EDQUOT):
            err = log._failed_write("appending", OSError(code, os.strerror(code)))
            assert err.code is ErrorCode.KAFKA_STORAGE_ERROR
            assert log.last_io_error is None
        err = log._failed_write("appending", OSError(errno.EIO, os.strerror(errno.EIO)))
        assert err.code is ErrorCode.KAFKA_STORAGE_ERROR
        assert log.last_io_error == "appending: Input/output error"
    finally:
        log.close()
