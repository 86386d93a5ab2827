"""The asyncio shell of one quorum voter in a controller process.

It carries the core's messages to the other voters over the controllers' RPC framing (method
``quorum``: ``{"src": id, "message": {...}, "records": base64}``, answered at once with ``{}``;
the answer to a request travels as another ``quorum`` call the other way, as in the simulator),
runs the core's timers, and hands committed-offset and role changes to the controller server.
Everything the quorum decides is in ``controller/quorum`` (the same code the simulator runs);
this file only moves bytes and time.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from floodmark.address import format_host_port, parse_host_port
from floodmark.constants import NO_LEADER
from floodmark.controller import rpc
from floodmark.controller.client import AsyncRpc
from floodmark.controller.quorum.codec import decode_message, encode_message
from floodmark.controller.quorum.core import QuorumConfig, QuorumCore
from floodmark.controller.quorum.directory_id import load_or_format
from floodmark.controller.quorum.driver import QuorumDriver, SnapshotFiles
from floodmark.controller.quorum.effects import RoleChanged
from floodmark.controller.quorum.messages import (
    QuorumFetchRequest,
    QuorumFetchResponse,
    QuorumMessage,
)
from floodmark.controller.quorum.state_file import QuorumStateFile
from floodmark.controller.quorum.update_voter import (
    DEFAULT_LISTENER,
    METHOD,
    SUPPORTED_KRAFT_VERSIONS,
    UpdateVoterRequest,
)
from floodmark.errors import ErrorCode
from floodmark.security import PLAINTEXT, ClientSecurity
from floodmark.storage import Log, RealFileSystem

log = logging.getLogger(__name__)

MAX_TICK_S = 0.05
MAX_QUEUED_PER_PEER = 256
MAX_LEARNED_PEERS = 16
"""Controllers outside ``controller.quorum.voters`` whose address this one learned from their
own messages (KIP-853 observers: a controller to be added), at most."""
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
"""Listen addresses that name no host another controller could dial."""
FETCH_MAX_WAIT_MS = 500
"""A caught-up voter's fetch waits on the leader this long for something new (a long poll,
as KRaft's leader holds a Fetch); the follower's request timeout must be longer."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class QuorumNode:
    def __init__(self, config: QuorumConfig, voters: dict[int, tuple[str, int]], metadata: Log,
                 data_dir: str, on_high_watermark: Callable[[int, int], None],
                 on_role: Callable[[RoleChanged], None],
                 snapshots: SnapshotFiles | None = None,
                 on_voters_record: Callable[[int, bytes], None] | None = None,
                 security: ClientSecurity = PLAINTEXT) -> None:
        """``security``: how this voter dials the others (the controller channel's)."""
        self.config = config
        self.security = security
        self.voters = dict(voters)  # the address book: controller.quorum.voters, then learned
        self._bootstrap = dict(voters)  # controller.quorum.voters as given
        self._endpoints: dict[int, str] = {}  # the voter set's endpoints last applied
        self.own_address: str | None = None
        """Where this controller listens (set once it does); sent with every message by a
        controller outside the address book, so the others can answer it."""
        self.on_high_watermark = on_high_watermark
        self.on_role = on_role
        fs = RealFileSystem()
        state_file = QuorumStateFile(fs, data_dir)
        core = QuorumCore(config, state_file.read(), random.Random(),
                          load_or_format(fs, data_dir))
        self.driver = QuorumDriver(core, metadata, state_file, self, snapshots=snapshots,
                                   on_voters_record=on_voters_record)
        self._peers = {v: AsyncRpc(f"{h}:{p}", timeout_s=max(1.0, config.request_timeout_ms
                                                              / 1000), security=security)
                       for v, (h, p) in voters.items() if v != config.node_id}
        self._queued = dict.fromkeys(self._peers, 0)
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake: asyncio.Event | None = None
        self._ticker: asyncio.Task[None] | None = None
        # Long polls: fetches from caught-up voters that know the HW, held until the log or
        # the HW moves, the role changes, or FETCH_MAX_WAIT_MS passes.
        self._parked: dict[int, tuple[QuorumFetchRequest, int]] = {}
        self._hw_sent: dict[int, int] = {}
        self._release_parked = False
        # A follower holds one idle connection to its leader: its close says the leader's
        # process is gone (reported once per epoch and leader; the core decides).
        self._watched: tuple[int, int] | None = None  # (epoch, leader id)
        self._watch: asyncio.Task[None] | None = None
        self._updater: asyncio.Task[None] | None = None

    @property
    def core(self) -> QuorumCore:
        return self.driver.core

    def address_of(self, node_id: int) -> str | None:
        if node_id == NO_LEADER or node_id not in self.voters:
            return None
        host, port = self.voters[node_id]
        return f"{host}:{port}"

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """In the running loop: the core's first decision (a single voter leads at once)."""
        self._wake = asyncio.Event()
        self.driver.start(now_ms())
        self.endpoints_changed()
        self._ticker = asyncio.create_task(self._tick_loop())
        self._updater = asyncio.create_task(self._keep_own_endpoint())

    async def stop(self) -> None:
        """Graceful: a leader resigns first (EndQuorumEpoch), so the others elect at once."""
        if self.core.is_leader:
            self.driver.resign(now_ms())
            await asyncio.sleep(0.05)  # let EndQuorumEpoch leave
        for task in (self._ticker, self._updater):
            if task is not None:
                task.cancel()
        if self._watch is not None:
            self._watch.cancel()
        for task in list(self._tasks):
            task.cancel()
        for peer in self._peers.values():
            peer.close()

    async def _tick_loop(self) -> None:
        assert self._wake is not None
        while True:
            deadline = min([self.core.next_deadline_ms(),
                            *(due for _, due in self._parked.values())])
            delay_ms = deadline - now_ms()
            if delay_ms > 0 and not self._release_parked:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), min(delay_ms / 1000, MAX_TICK_S))
            try:
                self._answer_parked(now_ms())
                self.driver.tick(now_ms())
                self.endpoints_changed()
            except Exception:  # a failed tick must not stop elections for good
                log.exception("controller %d quorum tick failed", self.config.node_id)
                await asyncio.sleep(MAX_TICK_S)

    def _answer_parked(self, now: int) -> None:
        release_all, self._release_parked = self._release_parked, False
        for src, (request, due) in list(self._parked.items()):
            if release_all or now >= due:
                del self._parked[src]
                self.driver.deliver(src, request, b"", now)

    def _wake_parked(self) -> None:
        if self._parked:
            self._release_parked = True
            if self._wake is not None:
                self._wake.set()

    def _can_park(self, src: int, request: QuorumFetchRequest) -> bool:
        core = self.core
        end = self.driver.log.log_end_offset
        return (core.is_leader and request.current_leader_epoch == core.epoch
                and request.fetch_offset == end == core.high_watermark
                and self._hw_sent.get(src) == end)

    # -- QuorumPorts ---------------------------------------------------------------------------------
    def snapshot_written(self, end_offset: int, epoch: int, size: int) -> None:
        self.core.snapshot_written(end_offset, epoch, size)

    def send(self, destination: int, message: QuorumMessage, records: bytes) -> None:
        if isinstance(message, QuorumFetchResponse):
            self._hw_sent[destination] = message.high_watermark
        peer = self._peers.get(destination)
        if peer is None or self._queued[destination] >= MAX_QUEUED_PER_PEER:
            return  # the core resends what matters
        args: dict[str, Any] = {"src": self.config.node_id, "message": encode_message(message)}
        if self.config.node_id not in self.config.voters and self.own_address is not None:
            args["address"] = self.own_address  # an observer: tell them where to answer
        if records:
            args["records"] = base64.b64encode(records).decode("ascii")
        self._queued[destination] += 1
        task = asyncio.create_task(self._send(destination, peer, args))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, destination: int, peer: AsyncRpc, args: dict[str, Any]) -> None:
        try:
            await peer.call("quorum", args)
        except rpc.RpcError as exc:
            log.debug("controller %d -> %d: %s", self.config.node_id, destination, exc)
        finally:
            self._queued[destination] -= 1

    def high_watermark_changed(self, old: int, new: int) -> None:
        self._wake_parked()
        self.on_high_watermark(old, new)

    def role_changed(self, change: RoleChanged) -> None:
        self._wake_parked()
        log.info("controller %d quorum: %s in epoch %d (leader %d)", self.config.node_id,
                 change.role, change.epoch, change.leader_id)
        self._watch_leader(change)
        self.on_role(change)

    # -- the leader's connection ---------------------------------------------------------------
    def _watch_leader(self, change: RoleChanged) -> None:
        if change.role != "follower" or change.leader_id not in self._peers:
            return
        key = (change.epoch, change.leader_id)
        if key == self._watched:
            return  # watched (and reported, if it closed) already in this epoch
        if self._watch is not None:
            self._watch.cancel()
        self._watched = key
        with contextlib.suppress(RuntimeError):  # no running loop (a unit test's driver)
            self._watch = asyncio.get_running_loop().create_task(self._watch_connection(key))

    async def _watch_connection(self, key: tuple[int, int]) -> None:
        """Hold an idle connection to the leader until it closes. Refused or closed: the
        leader's process is gone (a stopped leader's kernel keeps the connection open)."""
        host, port = self.voters[key[1]]
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_connection(
                host, port, ssl=self.security.ssl_context(),
                server_hostname=self.security.server_hostname(host))
            closed = await reader.read(1) == b""
        except OSError:
            closed = True
        finally:
            if writer is not None:
                writer.close()
        if closed and self._watched == key and (self.core.epoch, self.core.leader_id) == key:
            log.info("controller %d: connection to quorum leader %d closed (epoch %d)",
                     self.config.node_id, key[1], key[0])
            self.driver.leader_disconnected(key[1], now_ms())
            if self._wake is not None:
                self._wake.set()

    def _learn(self, node_id: int, address: str) -> None:
        """A controller outside the address book (an observer, KIP-853) said where it listens."""
        if len(self.voters) - len(self.config.voters) >= MAX_LEARNED_PEERS:
            raise ValueError(f"quorum message from {node_id}: already {MAX_LEARNED_PEERS} "
                             "controllers outside controller.quorum.voters")
        host, port = parse_host_port(address, min_port=1)
        self.voters[node_id] = (host, port)
        self._peers[node_id] = AsyncRpc(f"{host}:{port}", timeout_s=max(
            1.0, self.config.request_timeout_ms / 1000), security=self.security)
        self._queued[node_id] = 0
        log.info("controller %d: controller %d (outside controller.quorum.voters) listens on "
                 "%s", self.config.node_id, node_id, address)

    # -- the voters' endpoints (KIP-853 VotersRecord, UpdateRaftVoter) ------------------------
    def endpoints_changed(self) -> None:
        """Dial each voter where the voter set in force says it listens (a voter the set does
        not name: where ``controller.quorum.voters`` says)."""
        endpoints = self.core.voter_endpoints(self.driver.log)
        if endpoints == self._endpoints:
            return
        self._endpoints = endpoints
        for node_id, address in endpoints.items():
            if self.address_of(node_id) == address:
                continue
            host, port = parse_host_port(address, min_port=1)
            self.voters[node_id] = (host, port)
            if node_id == self.config.node_id:
                continue  # (it does not dial itself)
            old = self._peers.get(node_id)
            if old is not None:
                old.close()
            self._peers[node_id] = AsyncRpc(address, timeout_s=max(
                1.0, self.config.request_timeout_ms / 1000), security=self.security)
            self._queued.setdefault(node_id, 0)
            log.info("controller %d: voter %d listens on %s (voter set)", self.config.node_id,
                     node_id, address)

    def recorded_endpoint(self) -> str | None:
        """This voter's listener as the voter set in force records it."""
        own = self._endpoints.get(self.config.node_id)
        if own is None and self.config.node_id in self._bootstrap:
            host, port = self._bootstrap[self.config.node_id]
            own = format_host_port(host, port)
        return own

    def advertised_endpoint(self) -> str | None:
        """Where the others should dial this voter: where it listens, with the recorded host
        when it listens on a wildcard address (0.0.0.0, ::), which no one can dial."""
        if self.own_address is None:
            return None
        host, port = parse_host_port(self.own_address, min_port=1)
        recorded = self.recorded_endpoint()
        if host in WILDCARD_HOSTS and recorded is not None:
            return format_host_port(parse_host_port(recorded, min_port=1)[0], port)
        return self.own_address

    async def _keep_own_endpoint(self) -> None:
        """KIP-853: a voter whose listener differs from what the voter set records (restarted
        on another port) sends UpdateRaftVoter to the leader, as Kafka's voter does every few
        fetch timeouts while they differ. Its quorum messages' answers go to the recorded
        address until then, so it finds the leader by asking the others (DescribeQuorum).
        After an accepted request it waits Kafka's period (3 fetch timeouts) for the record
        to reach it; after a refusal or no leader, an election timeout."""
        retry_s = max(0.05, self.config.election_timeout_ms / 1000)
        period_s = max(retry_s, 3 * self.config.fetch_timeout_ms / 1000)
        while True:
            own, sent = self.advertised_endpoint(), False
            if own is not None and self.core.is_voter and self.recorded_endpoint() != own:
                with contextlib.suppress(rpc.RpcError):
                    sent = await self._update_own_endpoint(own)
            await asyncio.sleep(period_s if sent else retry_s)

    async def _update_own_endpoint(self, own: str) -> bool:
        """One UpdateRaftVoter; True when the leader took it."""
        host, port = parse_host_port(own, min_port=1)
        request = UpdateVoterRequest(
            self.core.epoch, self.config.node_id, self.core.directory_id,
            ((DEFAULT_LISTENER, host, port),), *SUPPORTED_KRAFT_VERSIONS)
        if self.core.is_leader:
            error, message, _ = self.driver.update_voter(
                request.voter_id, request.voter_directory_id, own, now_ms())
            self.endpoints_changed()
            log.info("controller %d: UpdateRaftVoter %s as leader: %s %s", self.config.node_id,
                     own, error.name, message)
            return error is ErrorCode.NONE
        leader, epoch = NO_LEADER, -1
        for node_id, peer in list(self._peers.items()):
            if node_id not in self.core.voters:
                continue
            answer = await peer.call("describe_quorum", {})
            found = answer.get("result") or {}
            if int(found.get("leader_epoch", -1)) > epoch and found.get("leader_id") is not None:
                leader, epoch = int(found["leader_id"]), int(found["leader_epoch"])
        target = self._peers.get(leader)
        if target is None:
            return False
        request = replace(request, current_leader_epoch=epoch)
        answer = await target.call(METHOD, request.to_args())
        log.info("controller %d: UpdateRaftVoter %s to leader %d (epoch %d): %s",
                 self.config.node_id, own, leader, epoch,
                 "NONE" if "result" in answer else
                 f"{ErrorCode(int(answer['error'])).name} {answer.get('message')}")
        return "result" in answer

    # -- incoming ----------------------------------------------------------------------------------
    def deliver(self, args: dict[str, Any]) -> None:
        """A ``quorum`` call from another voter. Raises ValueError on a malformed message."""
        src = int(args["src"])
        if src not in self.voters and src != self.config.node_id and args.get("address"):
            self._learn(src, str(args["address"]))
        if src not in self.voters or src == self.config.node_id:
            raise ValueError(f"quorum message from {src}, not another voter")
        message = decode_message(args.get("message"))
        records = base64.b64decode(args["records"]) if args.get("records") else b""
        now = now_ms()
        if isinstance(message, QuorumFetchRequest) and self._can_park(src, message):
            wait_ms = min(FETCH_MAX_WAIT_MS, self.config.fetch_timeout_ms // 2,
                          self.config.request_timeout_ms // 2)
            self._parked[src] = (message, now + wait_ms)
        else:
            self.driver.deliver(src, message, records, now)
        self.endpoints_changed()
        if self._wake is not None:
            self._wake.set()

    def append(self, values: list[bytes]) -> tuple[int, int]:
        written = self.driver.append_as_leader(values, now_ms())
        self._wake_parked()
        return written

    def describe(self) -> dict[str, Any]:
        desc = self.core.describe(self.driver.log)
        now = now_ms()
        hw = desc.high_watermark
        return {"node_id": desc.node_id, "role": desc.role, "leader_id": desc.leader_id,
                "leader_epoch": desc.leader_epoch, "high_watermark": hw,
                "leader_address": self.address_of(desc.leader_id),
                "log_end_offset": self.driver.log.log_end_offset,
                "voters": [{"voter_id": v.voter_id, "log_end_offset": v.log_end_offset,
                            "lag": max(0, self.driver.log.log_end_offset - v.log_end_offset)
                            if v.log_end_offset >= 0 else None,
                            "last_fetch_ms_ago": now - v.last_fetch_ms
                            if v.last_fetch_ms >= 0 else None,
                            "directory_id": v.directory_id or None}
                           for v in desc.voters],
                "voter_ids": list(self.core.voters),  # the voter set in force (KIP-853)
                # KIP-853: this voter's data dir, whether the quorum counts it, the committed
                # bindings, and (on the leader) voter ids fetching from a new data dir.
                "directory_id": desc.directory_id,
                "is_voter": desc.is_voter,
                "voter_directories": [{"voter_id": b.voter_id, "directory_id": b.directory_id,
                                       "bound_at": b.bound_at} for b in desc.directories],
                # (on the leader) controllers outside the voter set that fetch: added, removed,
                # or a voter id on a new data dir.
                "observers": [{"voter_id": o.voter_id, "directory_id": o.directory_id,
                               "log_end_offset": o.log_end_offset,
                               "last_fetch_ms_ago": now - o.last_fetch_ms
                               if o.last_fetch_ms >= 0 else None} for o in desc.observers]}
