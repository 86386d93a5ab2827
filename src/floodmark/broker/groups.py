"""The broker's driver of the classic group coordinator core (``classic_group.core``).

The rules are the core's; this turns its effects into asyncio: each JoinGroup or SyncGroup gets
a future under a request id, answered when the core emits its ``AnswerJoin``/``AnswerSync`` (at
once, or from a later call); a ``StoreGroup`` runs ``persist`` as a task (the ones with a token
report back with ``core.stored``); the core's timers (rebalance timeout, initial rebalance
delay, sessions) wake it through one ``call_later`` armed at ``core.next_deadline_ms()``. A
request whose client went away (its future cancelled) is ``abandon``ed in the core.

The handlers (``handlers.group_apis``) translate between the wire and these calls.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import random
import time
from collections.abc import Awaitable, Callable

from floodmark.broker.classic_group.core import ClassicGroupConfig, ClassicGroupCore
from floodmark.broker.classic_group.effects import (
    AnswerJoin,
    AnswerSync,
    ClassicEffect,
    GroupEmptied,
    StoreGroup,
)
from floodmark.broker.classic_group.messages import (
    GroupDescription,
    JoinGroup,
    JoinResult,
    MemberDescription,
    SyncGroup,
)
from floodmark.broker.classic_group.state import Group, GroupState, Member
from floodmark.broker.offsets import GroupRecord
from floodmark.errors import ErrorCode

log = logging.getLogger(__name__)

__all__ = [
    "Group",
    "GroupCoordinator",
    "GroupDescription",
    "GroupState",
    "JoinResult",
    "Member",
    "MemberDescription",
]

SyncAnswer = tuple[ErrorCode, bytes, GroupState | None]


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class GroupCoordinator:
    def __init__(
        self,
        *,
        initial_rebalance_delay_ms: int,
        min_session_timeout_ms: int,
        max_session_timeout_ms: int,
        max_size: int = 2**31 - 1,
        on_group_emptied: Callable[[str], None] | None = None,
        persist: Callable[[str, GroupRecord | None], Awaitable[ErrorCode]] | None = None,
        clock_ms: Callable[[], int] = monotonic_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.core = ClassicGroupCore(
            ClassicGroupConfig(initial_rebalance_delay_ms, min_session_timeout_ms,
                               max_session_timeout_ms, store_groups=persist is not None,
                               max_size=max_size),
            rng if rng is not None else random.SystemRandom())
        self._on_group_emptied = on_group_emptied
        self._persist = persist
        self._clock_ms = clock_ms
        self._request_ids = itertools.count(1)
        self._joins: dict[int, asyncio.Future[JoinResult]] = {}
        self._syncs: dict[int, asyncio.Future[SyncAnswer]] = {}
        self._stores: set[asyncio.Task[None]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at_ms: int | None = None

    @property
    def groups(self) -> dict[str, Group]:
        return self.core.groups

    # -- applying the core's effects -----------------------------------------------------------
    def apply(self, effects: list[ClassicEffect]) -> None:
        """Carry out effects of the core returned by a rule outside it (``group_routing``'s
        conversions between the classic and the consumer-group core)."""
        self._apply(effects)

    def _apply(self, effects: list[ClassicEffect]) -> None:
        for effect in effects:
            if isinstance(effect, AnswerJoin):
                join = self._joins.pop(effect.request_id, None)
                if join is not None and not join.done():
                    join.set_result(effect.result)
            elif isinstance(effect, AnswerSync):
                sync = self._syncs.pop(effect.request_id, None)
                if sync is not None and not sync.done():
                    sync.set_result((effect.error, effect.assignment, effect.state))
            elif isinstance(effect, StoreGroup):
                self._store(effect)
            elif isinstance(effect, GroupEmptied) and self._on_group_emptied is not None:
                self._on_group_emptied(effect.group_id)
        self._arm_timer()

    def _store(self, effect: StoreGroup) -> None:
        assert self._persist is not None, "the core stores only when told the driver persists"
        store = self._persist(effect.group_id, effect.record)

        async def run() -> None:
            try:
                err = await store
            except asyncio.CancelledError:
                raise
            except Exception:  # a store that failed oddly: answered as an error, logged
                log.exception("group %s: storing its metadata (%s) failed", effect.group_id,
                              effect.reason)
                err = ErrorCode.UNKNOWN_SERVER_ERROR
            if effect.token is not None:
                self._apply(self.core.stored(effect.token, err, self._clock_ms()))
            elif err is not ErrorCode.NONE:
                log.warning("group %s: storing its metadata (%s) failed: %s", effect.group_id,
                            effect.reason, err.name)

        task = asyncio.get_running_loop().create_task(run())
        self._stores.add(task)
        task.add_done_callback(self._stores.discard)

    def _arm_timer(self) -> None:
        """One wake-up at the core's next deadline (re-armed when it moves)."""
        deadline_ms = self.core.next_deadline_ms()
        if deadline_ms == self._timer_at_ms and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at_ms = deadline_ms
        if deadline_ms is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a test's direct call): the next call arms it
            self._timer_at_ms = None
            return
        delay_s = max(0, deadline_ms - self._clock_ms()) / 1000
        self._timer = loop.call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at_ms = None
        self._apply(self.core.tick(self._clock_ms()))

    def expire_sessions(self, now_ms: float | None = None) -> None:
        """Run the core's timers now (sessions, rebalance timeouts, the initial delay); the
        driver's own wake-up does this at each deadline, the broker's periodic loop as well."""
        self._apply(self.core.tick(self._clock_ms() if now_ms is None else int(now_ms)))

    def _abandoned(self, request_id: int, fut: asyncio.Future[JoinResult]
                   | asyncio.Future[SyncAnswer]) -> None:
        if fut.cancelled() and (self._joins.pop(request_id, None) is not None
                                or self._syncs.pop(request_id, None) is not None):
            self.core.abandon(request_id)

    # -- the group's record (GroupMetadataValue) -----------------------------------------------
    def record_of(self, g: Group) -> GroupRecord:
        return self.core.record_of(g, self._clock_ms())

    def load(self, group_id: str, rec: GroupRecord) -> Group:
        """A new coordinator takes the group as its last record left it (``core.load``)."""
        g, effects = self.core.load(group_id, rec, self._clock_ms())
        self._apply(effects)
        return g

    def unload(self, group_ids: list[str],
               error: ErrorCode = ErrorCode.NOT_COORDINATOR) -> None:
        """Another broker coordinates these groups now, or they became consumer groups
        (``core.unload``)."""
        self._apply(self.core.unload(group_ids, error))

    def rebalance(self, group_id: str, reason: str) -> None:
        """``core.rebalance``: a group a consumer group became rebalances."""
        self._apply(self.core.rebalance(group_id, reason, self._clock_ms()))

    # -- the APIs ------------------------------------------------------------------------------
    async def join(
        self, *, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], require_known_member_id: bool,
    ) -> JoinResult:
        request_id = next(self._request_ids)
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        self._joins[request_id] = fut
        fut.add_done_callback(functools.partial(self._abandoned, request_id))
        self._apply(self.core.join(JoinGroup(
            request_id, group_id, member_id, group_instance_id, client_id, client_host,
            session_timeout_ms, rebalance_timeout_ms, protocol_type, tuple(protocols),
            require_known_member_id), self._clock_ms()))
        return await fut

    async def sync(
        self, *, group_id: str, member_id: str, generation_id: int,
        assignments: list[tuple[str, bytes]], group_instance_id: str | None = None,
    ) -> SyncAnswer:
        request_id = next(self._request_ids)
        fut: asyncio.Future[SyncAnswer] = asyncio.get_running_loop().create_future()
        self._syncs[request_id] = fut
        fut.add_done_callback(functools.partial(self._abandoned, request_id))
        self._apply(self.core.sync(SyncGroup(request_id, group_id, member_id, generation_id,
                                             tuple(assignments), group_instance_id),
                                   self._clock_ms()))
        return await fut

    def fenced(self, group_id: str, member_id: str, group_instance_id: str | None) -> bool:
        return self.core.fenced(group_id, member_id, group_instance_id)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  group_instance_id: str | None = None) -> ErrorCode:
        return self.core.heartbeat(group_id, member_id, generation_id, group_instance_id,
                                   self._clock_ms())

    def leave(self, group_id: str, member_id: str,
              group_instance_id: str | None = None) -> ErrorCode:
        err, effects = self.core.leave(group_id, member_id, group_instance_id, self._clock_ms())
        self._apply(effects)
        return err

    def validate_commit(self, group_id: str, member_id: str, generation_id: int,
                        group_instance_id: str | None = None) -> ErrorCode:
        return self.core.validate_commit(group_id, member_id, generation_id, group_instance_id,
                                         self._clock_ms())

    def delete(self, group_id: str) -> ErrorCode:
        return self.core.delete(group_id)

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        return self.core.subscribed_topics(group_id)

    def describe(self, group_id: str) -> GroupDescription:
        return self.core.describe(group_id)

    def shutdown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._stores):
            task.cancel()
        futures: list[asyncio.Future[JoinResult] | asyncio.Future[SyncAnswer]] = [
            *self._joins.values(), *self._syncs.values()]
        self._joins.clear()
        self._syncs.clear()
        for fut in futures:
            if not fut.done():
                fut.cancel()
