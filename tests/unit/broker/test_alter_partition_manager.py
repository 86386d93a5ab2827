"""The broker's AlterPartition sender (Kafka's ``AlterPartitionManager``): the proposals of many
partitions go in one request, one request in flight, what is proposed meanwhile in the next;
each answer goes to the partition that proposed it; retriable answers are sent again after the
backoff while the partition still waits for them. The controller is a function here (the
cluster test ``tests/cluster/test_alter_partition_batching.py`` runs the real one)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from floodmark.broker.alter_partition_manager import (
    MAX_PARTITIONS_PER_REQUEST,
    AlterPartitionManager,
    Answer,
    PartitionKey,
    ProposalQueue,
)
from floodmark.controller import RpcError
from floodmark.errors import ErrorCode, KafkaError
from floodmark.replication import AlterPartitionRequest, PartitionRegistration


def _req(isr: tuple[int, ...] = (1, 2), leader_epoch: int = 0) -> AlterPartitionRequest:
    return AlterPartitionRequest(broker_id=1, broker_epoch=5, leader_epoch=leader_epoch,
                                 partition_epoch=0, new_isr=isr,
                                 new_isr_broker_epochs=tuple(5 for _ in isr))


def _reg(isr: tuple[int, ...]) -> PartitionRegistration:
    return PartitionRegistration(replicas=(1, 2, 3), isr=isr, leader=1, leader_epoch=0,
                                 partition_epoch=1)


def test_the_queue_keeps_one_proposal_a_partition_and_backs_off_retries() -> None:
    q: ProposalQueue[str] = ProposalQueue()
    q.submit(("t", 0), "a", _req((1, 2)), 0)
    q.submit(("t", 1), "a", _req((1, 3)), 0)
    q.submit(("t", 0), "a", _req((1,)), 5)  # newer: replaces the waiting one
    assert len(q) == 2
    taken = q.take(10)
    assert [(p.key, p.request.new_isr) for p in taken] == [(("t", 0), (1,)), (("t", 1), (1, 3))]
    assert len(q) == 0 and q.next_due_ms() is None
    first = taken[0]
    # 100 ms a failure, at most 1 s.
    for failures, backoff in [(1, 100), (2, 200), (3, 300), (9, 900), (10, 1000), (12, 1000)]:
        first.failures = failures - 1
        now = 10_000 * failures
        due = now + backoff
        q.retry(first, now)
        assert first.failures == failures and q.next_due_ms() == due
        assert q.take(due - 1) == []
        assert q.take(due) == [first]
    # A newer proposal of the partition waits already: the retried older one is not kept.
    q.submit(("t", 1), "a", _req((1, 2, 3)), 2000)
    q.retry(taken[1], 2000)
    assert [p.request.new_isr for p in q.take(5000)] == [(1, 2, 3)]
    for i in range(MAX_PARTITIONS_PER_REQUEST + 5):
        q.submit(("u", i), "a", _req(), 0)
    assert len(q.take(0)) == MAX_PARTITIONS_PER_REQUEST and len(q) == 5


class Controller:
    """Answers each request after ``release`` is set; records every request."""

    def __init__(self) -> None:
        self.requests: list[list[PartitionKey]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.release = asyncio.Event()
        self.errors: dict[PartitionKey, ErrorCode] = {}
        self.fail_next: Exception | None = None

    async def send(self, proposals: Sequence[tuple[PartitionKey, AlterPartitionRequest]]
                   ) -> dict[PartitionKey, Answer]:
        keys = [k for k, _ in proposals]
        assert len(set(keys)) == len(keys)  # a partition at most once a request
        self.requests.append(keys)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.release.wait()
        finally:
            self.in_flight -= 1
        if self.fail_next is not None:
            failure, self.fail_next = self.fail_next, None
            raise failure
        out: dict[PartitionKey, Answer] = {}
        for key, req in proposals:
            error = self.errors.pop(key, ErrorCode.NONE)
            out[key] = (error, _reg(req.new_isr) if error is ErrorCode.NONE else None)
        return out


class Partitions:
    """What the partitions' cores would say: the proposal each waits for, answers received."""

    def __init__(self) -> None:
        self.pending: dict[str, AlterPartitionRequest] = {}
        self.answers: list[tuple[str, tuple[int, ...], ErrorCode]] = []

    def propose(self, manager: AlterPartitionManager[str], name: str,
                req: AlterPartitionRequest) -> None:
        self.pending[name] = req
        manager.submit(("t", int(name[1:])), name, req)

    def is_pending(self, owner: str, req: AlterPartitionRequest) -> bool:
        return self.pending.get(owner) == req

    def deliver(self, owner: str, req: AlterPartitionRequest, error: ErrorCode,
                reg: PartitionRegistration | None) -> None:
        assert self.pending.get(owner) == req
        self.answers.append((owner, req.new_isr, error))
        if error is ErrorCode.NONE:
            assert reg is not None and reg.isr == req.new_isr
            del self.pending[owner]


async def _until(what: str, pred: object, timeout_s: float = 5.0) -> None:
    assert callable(pred)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not pred():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def _setup() -> tuple[Controller, Partitions, AlterPartitionManager[str]]:
    controller, parts = Controller(), Partitions()
    loop = asyncio.get_running_loop()
    manager: AlterPartitionManager[str] = AlterPartitionManager(
        controller.send, parts.is_pending, parts.deliver, lambda: int(loop.time() * 1000))
    return controller, parts, manager


def test_a_burst_goes_in_one_request_and_what_comes_meanwhile_in_the_next() -> None:
    async def main() -> None:
        controller, parts, manager = _setup()
        runner = asyncio.create_task(manager.run())
        for i in range(30):
            parts.propose(manager, f"p{i}", _req((1, 2)))
        await _until("the first request", lambda: len(controller.requests) == 1)
        # In flight: new proposals wait, among them a newer one of a partition in flight.
        for i in (30, 31, 32, 33, 0):
            parts.propose(manager, f"p{i}", _req((1,)))
        await asyncio.sleep(0.05)
        assert len(controller.requests) == 1
        controller.release.set()
        await _until("every answer", lambda: not parts.pending)
        assert [len(r) for r in controller.requests] == [30, 5]
        assert controller.most_in_flight == 1
        # p0's first answer came when p0 waited for its newer proposal: not delivered.
        assert ("p0", (1, 2), ErrorCode.NONE) not in parts.answers
        assert sorted(parts.answers) == sorted(
            [(f"p{i}", (1, 2), ErrorCode.NONE) for i in range(1, 30)]
            + [(f"p{i}", (1,), ErrorCode.NONE) for i in (0, 30, 31, 32, 33)])
        assert (manager.requests_sent, manager.proposals_sent) == (2, 35)
        runner.cancel()

    asyncio.run(main())


def test_retriable_answers_are_sent_again_and_final_ones_delivered() -> None:
    async def main() -> None:
        controller, parts, manager = _setup()
        controller.release.set()
        runner = asyncio.create_task(manager.run())
        controller.errors = {("t", 0): ErrorCode.STALE_BROKER_EPOCH,
                             ("t", 1): ErrorCode.FENCED_LEADER_EPOCH,
                             ("t", 2): ErrorCode.NOT_CONTROLLER}
        for i in range(4):
            parts.propose(manager, f"p{i}", _req())
        # p1's answer is final (its core stays pending until new metadata); p0 and p2 come back.
        await _until("the retries", lambda: len(controller.requests) == 2)
        assert controller.requests == [[("t", i) for i in range(4)], [("t", 0), ("t", 2)]]
        await _until("the answers", lambda: set(parts.pending) == {"p1"})
        assert ("p1", (1, 2), ErrorCode.FENCED_LEADER_EPOCH) in parts.answers
        assert not any(e in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.NOT_CONTROLLER)
                       for _, _, e in parts.answers)

        # The whole request fails (no controller): every proposal is retried; one made moot
        # meanwhile (new metadata answered it) is dropped, not sent again.
        controller.fail_next = RpcError("connection refused")
        controller.release.clear()
        parts.propose(manager, "p5", _req())
        parts.propose(manager, "p6", _req())
        await _until("the failing request", lambda: len(controller.requests) == 3)
        controller.release.set()
        await asyncio.sleep(0)
        del parts.pending["p6"]
        await _until("p5 answered", lambda: "p5" not in parts.pending)
        assert controller.requests[3:] == [[("t", 5)]]
        await asyncio.sleep(0.15)  # past one backoff: nothing more is sent
        assert len(controller.requests) == 4

        # A refusal of the whole request that is not retriable reaches every partition of it.
        controller.fail_next = KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "disk full")
        parts.propose(manager, "p7", _req())
        await _until("p7's answer", lambda: ("p7", (1, 2), ErrorCode.KAFKA_STORAGE_ERROR)
                     in parts.answers)
        runner.cancel()

    asyncio.run(main())
