"""New partitions' logs opened off the event loop (``broker.log_opener``): rounds, the
partitions no longer wanted, failures, shutdown, placement of replicas being opened, and a log
handed over only once its files are durable."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path

import pytest

from floodmark.broker.config import BrokerConfig
from floodmark.broker.log_opener import LogOpener, Opened
from floodmark.broker.storage_glue import LogOpening, Storage
from floodmark.errors import ErrorCode, KafkaError
from floodmark.storage.fs import MemoryFileSystem
from floodmark.storage.partition_metadata import (
    read_partition_metadata,
    write_partition_metadata,
)

WAIT_S = 30.0


def _storage(tmp_path: Path, *dirs: str) -> Storage:
    overrides = [f"log.dirs={','.join(str(tmp_path / d) for d in dirs)}"] if dirs else []
    config = BrokerConfig.load(data_dir=tmp_path / "data", listen="127.0.0.1:0",
                               overrides=overrides)
    return Storage(tmp_path / "data", config)


class _Host:
    """What the membership does with a round: keeps it (and closes the logs at the end)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.rounds: list[list[Opened]] = []
        self.loop_thread = threading.get_ident()
        self.threads: set[int] = set()

    def on_opened(self, results: list[Opened]) -> None:
        self.threads.add(threading.get_ident())
        self.rounds.append(results)

    def close(self) -> None:
        for results in self.rounds:
            for r in results:
                if r.log is not None:
                    r.log.close()


async def _open(storage: Storage, host: _Host, keys: list[tuple[str, int]], *,
                batch: int = 4, wanted: set[tuple[str, int]] | None = None,
                topic_id: uuid.UUID | None = None) -> LogOpener:
    opener = LogOpener(storage, host.on_opened,
                       (lambda k: True) if wanted is None else wanted.__contains__,
                       threads=3, batch=batch)
    for topic, index in keys:
        opener.request(storage.begin_open(topic, index, {}, 0, topic_id), {})
    assert all(k in opener for k in keys)
    await asyncio.wait_for(opener.idle(), WAIT_S)
    return opener


def test_openings_come_back_in_rounds_on_the_loop_with_their_logs(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    host = _Host(storage)
    keys = [("t", i) for i in range(10)]
    topic_id = uuid.uuid4()

    async def main() -> LogOpener:
        return await _open(storage, host, keys, topic_id=topic_id)

    opener = asyncio.run(main())
    try:
        assert [len(r) for r in host.rounds] == [4, 4, 2]
        assert host.threads == {host.loop_thread}  # handed over on the loop
        results = [r for rnd in host.rounds for r in rnd]
        assert [r.opening.key for r in results] == keys  # in the order asked
        assert all(r.error is None and r.log is not None for r in results)
        assert len(opener) == 0 and not any(k in opener for k in keys)
        for r in results:
            assert r.log is not None
            plog, hw = storage.finish_open(r.opening, r.log)
            assert (plog.log_end_offset, hw) == (0, 0)
            part = Path(r.opening.path)
            assert (part / "00000000000000000000.log").exists()
            assert read_partition_metadata(storage.fs, str(part)) == topic_id
            assert storage.dir_of(*r.opening.key) is not None
        assert storage.unassigned == set(keys)
    finally:
        host.close()


def test_an_opening_no_longer_wanted_touches_no_file(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    host = _Host(storage)
    keys = [("t", i) for i in range(6)]
    wanted = {("t", 0), ("t", 3)}

    async def main() -> None:
        await _open(storage, host, keys, batch=2, wanted=wanted)

    asyncio.run(main())
    try:
        opened = [r.opening.key for rnd in host.rounds for r in rnd]
        assert opened == [("t", 0), ("t", 3)]
        data = tmp_path / "data"
        assert sorted(p.name for p in data.iterdir() if p.name.startswith("t-")) == [
            "t-0", "t-3"]
        assert storage._placing == {("t", 0): storage.dirs[0], ("t", 3): storage.dirs[0]}
        for rnd in host.rounds:
            for r in rnd:
                storage.abandon_open(r.opening)
        assert storage._placing == {}
    finally:
        host.close()


def test_a_failed_opening_is_reported_and_the_others_open(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    host = _Host(storage)
    topic_id = uuid.uuid4()
    other = tmp_path / "data" / "t-1"
    other.mkdir(parents=True)
    write_partition_metadata(storage.fs, str(other), uuid.uuid4())  # another topic's

    async def main() -> None:
        await _open(storage, host, [("t", 0), ("t", 1), ("t", 2)], topic_id=topic_id)

    asyncio.run(main())
    try:
        by_key = {r.opening.key: r for rnd in host.rounds for r in rnd}
        bad = by_key[("t", 1)]
        assert bad.log is None and isinstance(bad.error, KafkaError)
        assert bad.error.code is ErrorCode.INCONSISTENT_TOPIC_ID
        assert sorted(p.name for p in other.iterdir()) == ["partition.metadata"]  # left as is
        assert by_key[("t", 0)].log is not None and by_key[("t", 2)].log is not None
    finally:
        host.close()


def test_closing_drops_the_queue_and_closes_what_the_running_round_opens(
        tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    host = _Host(storage)
    release = threading.Event()
    started = threading.Event()
    opened_logs = []
    real_run = LogOpening.run

    def slow_run(opening: LogOpening) -> object:
        started.set()
        assert release.wait(WAIT_S)
        plog = real_run(opening)
        opened_logs.append(plog)
        return plog

    async def main() -> None:
        opener = LogOpener(storage, host.on_opened, lambda k: True, threads=2, batch=2)
        for i in range(5):
            opener.request(storage.begin_open("t", i, {}, 0), {})
        assert await asyncio.to_thread(started.wait, WAIT_S)
        opener.close()
        release.set()
        await asyncio.wait_for(opener.idle(), WAIT_S)
        opener.request(storage.begin_open("t", 9, {}, 0), {})  # closed: not opened
        assert ("t", 9) not in opener
        for _ in range(200):  # the running round's threads finish, its logs are closed
            if len(opened_logs) == 2 and all(p.closed for p in opened_logs):
                break
            await asyncio.sleep(0.05)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LogOpening, "run", slow_run)
        asyncio.run(main())
    assert host.rounds == []
    assert len(opened_logs) == 2 and all(p.closed for p in opened_logs)
    assert storage._placing == {}
    assert not (tmp_path / "data" / "t-4").exists()


def test_replicas_being_opened_count_in_placement(tmp_path: Path) -> None:
    storage = _storage(tmp_path, "a", "b")
    openings = [storage.begin_open("t", i, {}, 0) for i in range(4)]
    # One file system: a tie on space, so the fewest partitions (those being opened count).
    assert [o.where.path for o in openings] == [tmp_path / "a", tmp_path / "b",
                                                tmp_path / "a", tmp_path / "b"]
    plog = openings[0].run()
    storage.finish_open(openings[0], plog)
    for o in openings[1:]:
        storage.abandon_open(o)
    assert storage.begin_open("t", 5, {}, 0).where.path == tmp_path / "b"
    plog.close()


def test_a_log_whose_directory_failed_while_opening_is_not_hosted(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    opening = storage.begin_open("t", 0, {}, 0)
    plog = opening.run()
    storage.take_offline(opening.where, "I/O error")
    with pytest.raises(KafkaError) as err:
        storage.finish_open(opening, plog)
    assert err.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert plog.closed and storage.dir_of("t", 0) is None


def test_a_log_is_handed_over_only_once_its_files_are_durable(tmp_path: Path) -> None:
    """A power loss right after ``run`` returns keeps the new partition: its directory, its
    segment and ``partition.metadata`` (the simulator's disk, which drops what was not
    fsynced)."""
    storage = _storage(tmp_path)
    fs = MemoryFileSystem()
    fs.mkdirs(str(tmp_path / "data"))
    fs.fsync_dir(str(tmp_path / "data"))
    storage.fs = fs
    topic_id = uuid.uuid4()
    opening = storage.begin_open("t", 0, {}, 0, topic_id)
    assert opening.fs is fs
    plog = opening.run()
    fs.crash(lose_unsynced=True)
    part = opening.path
    assert fs.is_dir(part)
    assert set(fs.listdir(part)) >= {"00000000000000000000.log", "partition.metadata"}
    assert read_partition_metadata(fs, part) == topic_id
    assert plog.log_end_offset == 0
