"""A share-partition leader's way to its state (Kafka's ``Persister``): Read, Write and
DeleteShareGroupState, and ReadShareGroupStateSummary (and the group coordinator's:
InitializeShareGroupState), sent to the share coordinator of each
share partition (the leader of the ``__share_group_state`` partition its key hashes to).

When that coordinator is this broker the request is the local service's call
(``state_service``); otherwise it goes over the inter-broker listener with floodmark's client.
A coordinator that moved, is loading, or cannot be reached is asked again after a short
backoff, for at most ``RETRY_FOR_MS``; after that the caller gets the retriable error (the
client's request is answered with it, and the client asks again).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from floodmark.broker.peer_connections import PeerConnections
from floodmark.broker.share_group.partition import RecordState, ShareState, StateBatch
from floodmark.broker.share_group.state_records import ShareKey, Snapshot, coordinator_key
from floodmark.broker.share_group.state_service import ShareStateService
from floodmark.client import RequestFailed
from floodmark.errors import ErrorCode
from floodmark.metadata import CoordinatorType
from floodmark.security import ClientSecurity

log = logging.getLogger(__name__)
API_INITIALIZE, API_READ, API_WRITE, API_DELETE, API_SUMMARY = 83, 84, 85, 86, 87
REQUEST_TIMEOUT_S = 10.0
RETRY_FOR_MS = 5_000
BACKOFF_MS = (20, 50, 100, 200, 400)
T = TypeVar("T")
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT})


class Routes(Protocol):
    """Who coordinates a key and where a broker listens (the broker's membership)."""

    def coordinator_for(self, key: str, key_type: CoordinatorType) -> int: ...

    def broker_address(self, node_id: int, listener_name: str | None = None
                       ) -> tuple[str, int] | None: ...


def state_of(start_offset: int, state_epoch: int, batches: Any) -> ShareState:
    """A wire state (Read's answer, Write's request): the batches cover the window, so the
    end is after the last. ValueError when the batches are out of order, overlap, start
    before the start offset or name an unknown state."""
    out = tuple(StateBatch(int(b.first_offset), int(b.last_offset),
                           RecordState(int(b.delivery_state)), int(b.delivery_count))
                for b in batches)
    end = start_offset
    for b in out:
        if b.first_offset < end or b.last_offset < b.first_offset or b.delivery_count < 0:
            raise ValueError(f"state batch [{b.first_offset}, {b.last_offset}] after {end}")
        end = b.last_offset + 1
    return ShareState(start_offset, end, out, state_epoch)


def _batches(state: ShareState) -> list[dict[str, int]]:
    return [{"first_offset": b.first_offset, "last_offset": b.last_offset,
             "delivery_state": int(b.state), "delivery_count": b.delivery_count}
            for b in state.batches]


class SharePersister:
    def __init__(self, node_id: int, routes: Routes, service: ShareStateService,
                 security: Callable[[], ClientSecurity]) -> None:
        self.node_id = node_id
        self.routes = routes
        self.service = service
        self._security = security
        self._conns = PeerConnections(f"floodmark-share-persister-{node_id}",
                                      routes.broker_address, security)

    # -- the operations --------------------------------------------------------------------
    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int
                         ) -> ErrorCode:
        """InitializeShareGroupState (the group coordinator, for a newly subscribed
        partition; ``start_offset`` -1: placed by the leader when it first loads it)."""
        async def local() -> tuple[ErrorCode, None]:
            err, _message = await self.service.initialize(key, state_epoch, start_offset)
            return err, None

        body = {"group_id": key[0], "topics": [{"topic_id": key[1], "partitions": [
            {"partition": key[2], "state_epoch": state_epoch,
             "start_offset": start_offset}]}]}
        return (await self._ask(key, local, API_INITIALIZE, body, _error_only, (None,)))[0]

    async def read(self, key: ShareKey, leader_epoch: int
                   ) -> tuple[ErrorCode, Snapshot | None]:
        """The stored state (None: never written; start offset -1: initialized, not placed
        yet); FENCED_LEADER_EPOCH when a later leader has read or written it."""
        async def local() -> tuple[ErrorCode, Snapshot | None]:
            err, snap, _message = await self.service.read(key, leader_epoch)
            return err, snap

        def remote(resp: Any) -> tuple[ErrorCode, Snapshot | None]:
            p = resp.results[0].partitions[0]
            err = ErrorCode(int(p.error_code))
            if err is not ErrorCode.NONE:
                return err, None
            if int(p.start_offset) < 0:  # never written, or initialized and not placed
                if int(p.state_epoch) <= 0:
                    return err, None
                return err, Snapshot(ShareState(-1, -1, (), int(p.state_epoch)), leader_epoch)
            state = state_of(int(p.start_offset), int(p.state_epoch), p.state_batches)
            return err, Snapshot(state, leader_epoch)

        return await self._ask(key, local, API_READ, {
            "group_id": key[0], "topics": [{"topic_id": key[1], "partitions": [
                {"partition": key[2], "leader_epoch": leader_epoch}]}]}, remote, (None,))

    async def write(self, key: ShareKey, state: ShareState, leader_epoch: int) -> ErrorCode:
        async def local() -> tuple[ErrorCode, None]:
            err, _message = await self.service.write(key, state, leader_epoch)
            return err, None

        body = {"group_id": key[0], "topics": [{"topic_id": key[1], "partitions": [
            {"partition": key[2], "state_epoch": state.state_epoch,
             "leader_epoch": leader_epoch, "start_offset": state.start_offset,
             "state_batches": _batches(state)}]}]}
        return (await self._ask(key, local, API_WRITE, body, _error_only, (None,)))[0]

    async def delete(self, key: ShareKey) -> ErrorCode:
        async def local() -> tuple[ErrorCode, None]:
            return await self.service.delete(key), None

        body = {"group_id": key[0], "topics": [{"topic_id": key[1], "partitions": [
            {"partition": key[2]}]}]}
        return (await self._ask(key, local, API_DELETE, body, _error_only, (None,)))[0]

    async def summary(self, key: ShareKey) -> tuple[ErrorCode, int]:
        """(error, the stored start offset; -1: never written)."""
        async def local() -> tuple[ErrorCode, int]:
            err, snap = self.service.summary(key)
            return err, (-1 if snap is None else snap.state.start_offset)

        def remote(resp: Any) -> tuple[ErrorCode, int]:
            p = resp.results[0].partitions[0]
            return ErrorCode(int(p.error_code)), int(p.start_offset)

        return await self._ask(key, local, API_SUMMARY, {
            "group_id": key[0], "topics": [{"topic_id": key[1], "partitions": [
                {"partition": key[2], "leader_epoch": -1}]}]}, remote, (-1,))

    # -- finding and asking the coordinator -------------------------------------------------
    async def _ask(self, key: ShareKey, local: Callable[[], Awaitable[tuple[ErrorCode, T]]],
                      api_key: int, body: dict[str, Any],
                      remote: Callable[[Any], tuple[ErrorCode, T]],
                      nothing: tuple[T]) -> tuple[ErrorCode, T]:
        deadline = time.monotonic() + RETRY_FOR_MS / 1000
        attempt = 0
        while True:
            err, value = await self._once(key, local, api_key, body, remote, nothing)
            if err not in RETRIABLE or time.monotonic() >= deadline:
                return err, value
            await asyncio.sleep(BACKOFF_MS[min(attempt, len(BACKOFF_MS) - 1)] / 1000)
            attempt += 1

    async def _once(self, key: ShareKey,
                       local: Callable[[], Awaitable[tuple[ErrorCode, T]]], api_key: int,
                       body: dict[str, Any], remote: Callable[[Any], tuple[ErrorCode, T]],
                       nothing: tuple[T]) -> tuple[ErrorCode, T]:
        node = self.routes.coordinator_for(coordinator_key(key), CoordinatorType.SHARE)
        if node == self.node_id:
            return await local()
        held = self._conns.get(node) if node >= 0 else None
        if held is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, nothing[0]
        conn, lock = held
        try:
            async with lock:
                resp = await conn.request(api_key, 0, body, REQUEST_TIMEOUT_S)
        except RequestFailed as exc:
            log.debug("share state of %s: request %d to broker %d failed: %s",
                      coordinator_key(key), api_key, node, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, nothing[0]
        return remote(resp)

    def close(self) -> None:
        self._conns.close()


def _error_only(resp: Any) -> tuple[ErrorCode, None]:
    return ErrorCode(int(resp.results[0].partitions[0].error_code)), None
