"""AlterPartition of many partitions in one request (Kafka's ``AlterPartitionRequest``): the
controller decides every partition of the request in one call, writes their records as one
batch (one append to the metadata log, so one commit wait), and answers each partition with its
own error and registration; a malformed request changes nothing. Through a real socket with the
broker's ``ControllerClient``."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from floodmark.controller import alter_partition_wire
from floodmark.controller.client import ControllerClient
from floodmark.controller.logic import ControllerConfig
from floodmark.controller.server import ControllerServer
from floodmark.errors import ErrorCode
from floodmark.replication import AlterPartitionRequest

PARTITIONS = 12


def _server(path: Path) -> tuple[ControllerServer, dict[int, int]]:
    server = ControllerServer(str(path), ControllerConfig())
    epochs: dict[int, int] = {}
    for b in (1, 2, 3):
        answer = server.call("register", {"broker_id": b, "host": "127.0.0.1",
                                          "port": 9000 + b, "incarnation": f"i{b}"})
        epochs[b] = int(answer["result"]["broker_epoch"])
        server.call("heartbeat", {"broker_id": b, "broker_epoch": epochs[b]})
    assert "result" in server.call("create_topic", {
        "name": "t", "num_partitions": PARTITIONS, "replication_factor": 3,
        "assignments": [[1, 2, 3]] * PARTITIONS})
    return server, epochs


def _shrink(server: ControllerServer, epochs: dict[int, int], partition: int,
            topic: str = "t") -> tuple[tuple[str, int], AlterPartitionRequest]:
    reg = server.image.partition("t", partition)
    assert reg is not None and reg.isr == (1, 2, 3)
    return (topic, partition), AlterPartitionRequest(
        broker_id=1, broker_epoch=epochs[1], leader_epoch=reg.leader_epoch,
        partition_epoch=reg.partition_epoch, new_isr=(1, 2),
        new_isr_broker_epochs=(epochs[1], epochs[2]))


def _count_appends(server: ControllerServer) -> list[int]:
    appended: list[int] = []
    append = server.mlog.append

    def counting(records: Any) -> Any:
        appended.append(len(records))
        return append(records)

    server.mlog.append = counting  # type: ignore[method-assign]
    return appended


def test_one_request_of_many_partitions_is_one_batch_of_records(tmp_path: Path) -> None:
    server, epochs = _server(tmp_path)
    try:
        proposals = [_shrink(server, epochs, p) for p in range(PARTITIONS)]
        # One stale proposal (an old leader epoch) and one unknown partition: refused on
        # their own, the others accepted.
        key, stale = proposals[3]
        proposals[3] = key, dataclasses.replace(stale, leader_epoch=stale.leader_epoch - 1)
        proposals.append(_shrink(server, epochs, 0, topic="nope"))
        appended = _count_appends(server)
        offset = server.image.next_offset
        answer = server.call("alter_partition", alter_partition_wire.encode_request(
            1, epochs[1], proposals))
        answers = alter_partition_wire.decode_answer(answer["result"])
        assert appended == [PARTITIONS - 1]  # one append: one batch, one commit wait
        assert server.image.next_offset == offset + PARTITIONS - 1
        assert answers[("t", 3)] == (ErrorCode.FENCED_LEADER_EPOCH, None)
        assert answers[("nope", 0)] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        for p in set(range(PARTITIONS)) - {3}:
            error, reg = answers[("t", p)]
            assert error is ErrorCode.NONE and reg is not None and reg.isr == (1, 2)
            assert server.image.partition("t", p) == reg
        status = server.call("status", {})["result"]["alter_partition"]
        assert status == {"requests": 1, "partitions": PARTITIONS + 1,
                          "largest": PARTITIONS + 1}
    finally:
        server.mlog.close()


@pytest.mark.parametrize("bad", [
    {"broker_id": 1, "broker_epoch": 1},  # no topics
    {"broker_id": 1, "broker_epoch": 1, "topics": [{"topic_name": "t", "partitions": [
        {"partition_index": 0, "leader_epoch": 0, "partition_epoch": 0, "new_isr": [1, 2],
         "new_isr_broker_epochs": [1, 2]}] * 2}]},  # a partition twice
    {"broker_id": 1, "broker_epoch": 1, "topics": [{"topic_name": "t", "partitions": [
        {"partition_index": 0, "leader_epoch": 0, "partition_epoch": 0, "new_isr": [1, 2],
         "new_isr_broker_epochs": [1, 2]},
        {"partition_index": 1, "leader_epoch": "x", "partition_epoch": 0}]}]},
])
def test_a_malformed_request_is_refused_whole_and_writes_nothing(
        tmp_path: Path, bad: dict[str, Any]) -> None:
    server, epochs = _server(tmp_path)
    try:
        bad = {**bad, "broker_epoch": epochs[1]}
        offset = server.image.next_offset
        answer = server.call("alter_partition", bad)
        assert answer["error"] == int(ErrorCode.INVALID_REQUEST)
        assert server.image.next_offset == offset
        assert server.image.partition("t", 0).isr == (1, 2, 3)  # type: ignore[union-attr]
    finally:
        server.mlog.close()


def test_the_brokers_client_sends_one_request_over_a_socket(tmp_path: Path) -> None:
    server, epochs = _server(tmp_path)

    async def main() -> dict[tuple[str, int], alter_partition_wire.Answer]:
        bound = asyncio.get_running_loop().create_future()
        serving = asyncio.create_task(server.serve("127.0.0.1", 0, bound.set_result))
        port = await asyncio.wait_for(bound, 10)
        client = ControllerClient(f"127.0.0.1:{port}", 1)
        client.broker_epoch = epochs[1]
        try:
            return await client.alter_partition(
                [_shrink(server, epochs, p) for p in range(PARTITIONS)])
        finally:
            client.close()
            server.stop()
            await asyncio.wait_for(serving, 10)

    answers = asyncio.run(main())
    assert sorted(answers) == [("t", p) for p in range(PARTITIONS)]
    assert all(error is ErrorCode.NONE and reg is not None and reg.isr == (1, 2)
               for error, reg in answers.values())
    assert server.alter_partition_requests == 1
