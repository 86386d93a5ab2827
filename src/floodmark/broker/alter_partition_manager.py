"""The broker's ISR proposals to the controller, batched (Kafka's ``AlterPartitionManager``).

A leader's core proposes an ISR change (``propose_isr``) and keeps it pending until the answer
(``Partition.is_proposal_pending``, ``on_alter_partition_response``). The proposals of all the
broker's partitions go to the controller in one AlterPartition request, **at most one request
in flight**: what is proposed meanwhile waits and goes in the next one. So a partition is never
twice in one request, and never in two requests at once. Each partition gets its own answer
(error code, new registration), delivered to the partition that proposed it, as before batching.

One partition had one call of its own before, each answered once the quorum committed it, one
at a time over the broker's connection: at 5,000 partitions thousands of shrinks and expansions
queued there. Now one request carries them all and the controller writes their records together
(one commit wait).

Retries are per proposal, as before: a retriable answer (the whole request failed, no active
controller, a stale broker epoch) keeps the proposal (the HW rules stay safe with the maximal
ISR) and sends it again after a backoff growing 100 ms a try up to 1 s, as long as its partition
still has it pending; an answer that is not retriable goes to the partition, which decides
(commit, revert, or stay pending until new metadata).

``ProposalQueue`` is the rule (sans-I/O, ``now_ms``); ``AlterPartitionManager`` the loop that
sends what the queue says, through the ``send`` it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from floodmark.controller import RpcError
from floodmark.errors import ErrorCode, KafkaError
from floodmark.replication import AlterPartitionRequest, PartitionRegistration

log = logging.getLogger("floodmark.broker.alter_partition_manager")

PartitionKey = tuple[str, int]
Answer = tuple[ErrorCode, PartitionRegistration | None]
Owner = TypeVar("Owner")

RETRIABLE_ALTER_PARTITION = frozenset({ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER,
                                       ErrorCode.STALE_BROKER_EPOCH})
RETRY_BACKOFF_STEP_MS = 100
RETRY_BACKOFF_MAX_MS = 1000
MAX_PARTITIONS_PER_REQUEST = 250
"""A bound on one request (Kafka has none): the controller decides a request's partitions in one
go on its loop, and its quorum's fetch timeout is 1 s in ``LocalCluster``; what is left goes in
the next request. At 10,000 partitions requests of 1,000 took the controller 0.2 to 0.8 s each
(load 11) before the records were even appended."""


@dataclass
class Proposal(Generic[Owner]):
    key: PartitionKey
    owner: Owner  # the partition that proposed it (a re-created one is another owner)
    request: AlterPartitionRequest
    failures: int = 0  # retriable answers so far
    due_ms: int = 0


class ProposalQueue(Generic[Owner]):
    """The proposals waiting for the next request: at most one a partition (a partition's core
    has one proposal at a time, so a newer one replaces a waiting older one, which is moot)."""

    def __init__(self) -> None:
        self._waiting: dict[PartitionKey, Proposal[Owner]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def submit(self, key: PartitionKey, owner: Owner, request: AlterPartitionRequest,
               now_ms: int) -> None:
        self._waiting[key] = Proposal(key, owner, request, due_ms=now_ms)

    def take(self, now_ms: int, limit: int = MAX_PARTITIONS_PER_REQUEST
             ) -> list[Proposal[Owner]]:
        """The due proposals (oldest submitted first, at most ``limit``), out of the queue."""
        due = [p for p in self._waiting.values() if p.due_ms <= now_ms][:limit]
        for p in due:
            del self._waiting[p.key]
        return due

    def retry(self, proposal: Proposal[Owner], now_ms: int) -> None:
        """A retriable answer: back in the queue after the backoff, unless its partition has
        proposed again meanwhile (the newer one goes instead)."""
        if proposal.key in self._waiting:
            return
        proposal.failures += 1
        proposal.due_ms = now_ms + min(RETRY_BACKOFF_MAX_MS,
                                       RETRY_BACKOFF_STEP_MS * proposal.failures)
        self._waiting[proposal.key] = proposal

    def next_due_ms(self) -> int | None:
        return min((p.due_ms for p in self._waiting.values()), default=None)


Send = Callable[[Sequence[tuple[PartitionKey, AlterPartitionRequest]]],
                Awaitable[dict[PartitionKey, Answer]]]


class AlterPartitionManager(Generic[Owner]):
    """Sends the queue's proposals, one request at a time, and hands each answer over.

    ``send``: one AlterPartition request (RpcError or KafkaError when the whole request
    failed); ``is_pending(owner, request)``: does the partition still wait for this proposal
    (else it is dropped, unsent or unanswered); ``deliver(owner, request, error, registration)``:
    a final answer; ``now_ms``: the broker's clock."""

    def __init__(self, send: Send,
                 is_pending: Callable[[Owner, AlterPartitionRequest], bool],
                 deliver: Callable[[Owner, AlterPartitionRequest, ErrorCode,
                                    PartitionRegistration | None], None],
                 now_ms: Callable[[], int]) -> None:
        self._send = send
        self._is_pending = is_pending
        self._deliver = deliver
        self._now_ms = now_ms
        self.queue: ProposalQueue[Owner] = ProposalQueue()
        self._wake = asyncio.Event()
        self.requests_sent = 0  # AlterPartition requests, and the proposals they carried
        self.proposals_sent = 0

    def submit(self, key: PartitionKey, owner: Owner, request: AlterPartitionRequest) -> None:
        self.queue.submit(key, owner, request, self._now_ms())
        self._wake.set()

    async def run(self) -> None:
        """Until cancelled (the broker stops)."""
        while True:
            self._wake.clear()
            now = self._now_ms()
            batch = [p for p in self.queue.take(now) if self._is_pending(p.owner, p.request)]
            if batch:
                await self._send_one(batch)
                continue
            due = self.queue.next_due_ms()
            timeout_s = None if due is None else max(0, due - now) / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout_s)

    async def _send_one(self, batch: list[Proposal[Owner]]) -> None:
        failed: tuple[ErrorCode, str] | None = None
        self.requests_sent += 1
        self.proposals_sent += len(batch)
        try:
            answers = await self._send([(p.key, p.request) for p in batch])
        except RpcError as exc:
            answers, failed = {}, (ErrorCode.REQUEST_TIMED_OUT, str(exc))
        except KafkaError as exc:
            answers, failed = {}, (exc.code, exc.message)
        now = self._now_ms()
        retried: dict[ErrorCode, int] = {}
        for p in batch:
            # A partition missing from the answer is retried, as a failed request.
            error, reg = answers.get(p.key, (failed[0] if failed else
                                             ErrorCode.REQUEST_TIMED_OUT, None))
            if not self._is_pending(p.owner, p.request):
                continue  # answered meanwhile by new metadata, or a newer proposal
            if error in RETRIABLE_ALTER_PARTITION:
                retried[error] = retried.get(error, 0) + 1
                self.queue.retry(p, now)
            else:
                self._deliver(p.owner, p.request, error, reg)
        if retried:
            log.warning("AlterPartition of %d partition(s): %s retried%s", len(batch),
                        ", ".join(f"{n} {e.name}" for e, n in retried.items()),
                        f" ({failed[1]})" if failed else "")
