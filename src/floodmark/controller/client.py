"""A broker's handle on the remote controller; implements ``broker.metadata.Controller``.

The broker keeps a ``MetadataImage`` replayed from the controller's metadata log. Three kinds of
traffic, each on its own connection so a long poll never delays a heartbeat:

* ``fetch_metadata`` long poll (pull, KRaft style): records from the image's next offset; the
  controller answers as soon as anything new is committed, so a leader change reaches every
  broker within one round trip of the controller deciding it;
* control calls from the event loop: register, heartbeat, alter_partition;
* admin calls (create/delete topic, create partitions, configs, elections, reassignments,
  producer id blocks): awaited by the request handler on a connection of their own, so a slow or
  stopped controller delays only the request that needs it, never the broker's event loop; the
  answer carries the records since the image's offset, which are applied before the handler
  continues (so the handler sees the topic it just created).

``on_records`` (set by the broker) is called after every batch of applied records.

Which controller: the ``--controller`` list until the quorum says otherwise
(``controller_endpoints``): the committed voter set in the replayed metadata log names the
endpoints of controllers that moved (UpdateRaftVoter, KIP-853), and the client dials them
there, as Kafka's broker dials the voter set's endpoint of the KRaft leader.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from floodmark.address import parse_host_port
from floodmark.controller import alter_partition_wire, delegation_tokens, rpc, scram
from floodmark.controller.controller_endpoints import ControllerEndpoints
from floodmark.controller.image import (
    UNAPPLIED_KEPT,
    MetadataImage,
    MetadataRecord,
    Reassignment,
    UnappliedRecord,
    acl_to_record,
    quota_to_record,
    record_to_acl,
    topic_metas,
)
from floodmark.controller.quorum_view import QuorumView, from_controller, is_leader_answer
from floodmark.controller.snapshot import image_from_records
from floodmark.errors import ErrorCode, KafkaError
from floodmark.features import FinalizedFeatures
from floodmark.metadata import PartitionMeta, TopicMeta, deletable_topic
from floodmark.replication import AlterPartitionRequest
from floodmark.security import (
    PLAINTEXT,
    AclBinding,
    AclBindingFilter,
    AclStore,
    ClientSecurity,
    KafkaPrincipal,
    QuotaChanges,
    QuotaEntity,
    QuotaStore,
)

log = logging.getLogger(__name__)

ADMIN_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms for a request forwarded to the controller
APPLIED_KEPT = 16
"""How many of the image's latest advances (next offset, wall-clock ms) a broker keeps and
reports in its heartbeat (``cluster status``: when each broker applied each metadata offset)."""
ADMIN_ATTEMPT_TIMEOUT_S = 12.0
"""One attempt on one controller: past the quorum's commit wait (10 s), a controller that has
not answered is silent (stopped, cut off) and the call moves on to the next voter."""


class AsyncRpc:
    """One connection, one request at a time; reconnects on the next call after a failure."""

    def __init__(self, address: str, timeout_s: float = 10.0,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.security = security  # the controller channel's (``security.channel``)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)

    async def call(self, method: str, args: dict[str, Any],
                   timeout_s: float | None = None) -> dict[str, Any]:
        async with self._lock:
            try:
                return await asyncio.wait_for(self._call(method, args),
                                              timeout_s or self.timeout_s)
            except (OSError, TimeoutError, rpc.RpcError, ValueError) as exc:
                self.close()
                raise rpc.RpcError(f"{method} to controller {self.address}: {exc!r}") from exc

    async def _call(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        if self._writer is None:
            host, port = parse_host_port(self.address, what="controller address")
            self._reader, self._writer = await asyncio.open_connection(
                host, port, ssl=self.security.ssl_context(),
                server_hostname=self.security.server_hostname(host))
        assert self._reader is not None
        rid = next(self._ids)
        self._writer.write(rpc.encode({"id": rid, "method": method, "args": args}))
        await self._writer.drain()
        answer = await rpc.read_frame(self._reader)
        if answer is None:
            raise rpc.RpcError("connection closed")
        return answer

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


class LocalCall(Protocol):
    def call(self, method: str, args: dict[str, Any]) -> dict[str, Any]: ...


def _result(answer: dict[str, Any]) -> dict[str, Any]:
    if "error" in answer:
        raise KafkaError(ErrorCode(int(answer["error"])), str(answer.get("message") or ""))
    result = answer["result"]
    assert isinstance(result, dict)
    return result


class ControllerClient:
    def __init__(self, address: str, node_id: int, security: ClientSecurity = PLAINTEXT, *,
                 voters: Mapping[int, str] | None = None) -> None:
        """``address``: one controller, or a quorum's voters as ``host:port,host:port,...``
        (the client follows the active controller: a dead one or a NOT_CONTROLLER answer moves
        it to the controller named as leader, or to the next one; a controller the committed
        voter set places elsewhere is dialled there). ``voters``: whose each address is, when
        known (``controller.quorum.voters``)."""
        self.endpoints = ControllerEndpoints(
            [a.strip() for a in address.split(",") if a.strip()] or [address], voters)
        address = self.endpoints.bootstrap[0]
        self.address = address
        self.node_id = node_id
        self.incarnation = uuid.uuid4().hex
        self.image = MetadataImage()
        self.broker_epoch = -1
        self.session_timeout_ms: int | None = None  # broker.session.timeout.ms, as registered
        self.local_topics: dict[str, TopicMeta] = {}  # broker-local internal topics
        self.on_records: Callable[[list[MetadataRecord]], None] | None = None
        # Records that could not be applied (skipped; the rest applied): the newest few, and
        # how many in all. ``on_unapplied`` (set by the broker) counts them in its metrics.
        self.unapplied: collections.deque[UnappliedRecord] = collections.deque(
            maxlen=UNAPPLIED_KEPT)
        self.unapplied_total = 0
        self.on_unapplied: Callable[[UnappliedRecord], None] | None = None
        # When the image advanced: (its next offset, wall-clock ms), oldest first. A record at
        # offset X was applied at the time of the first entry whose offset is above X.
        self.applied: collections.deque[tuple[int, int]] = collections.deque(
            maxlen=APPLIED_KEPT)
        self.security = security
        self.control = AsyncRpc(address, security=security)
        # Heartbeats on their own connection, as Kafka's BrokerLifecycleManager has its own
        # channel: one request at a time per connection, so a heartbeat behind hundreds of
        # AlterPartition calls (each answered once committed) waited minutes, the controller
        # fenced the live broker, and the leader changes that followed stalled the quorum.
        self.beat = AsyncRpc(address, security=security)
        self.poll = AsyncRpc(address, timeout_s=30.0, security=security)
        self._topics_cache: dict[str, TopicMeta] | None = None
        self._pid_next = 0
        self._pid_limit = 0
        self.local: LocalCall | None = None  # combined mode: the in-process controller
        self.admin_timeout_s = ADMIN_TIMEOUT_S

    @property
    def addresses(self) -> list[str]:
        """The controllers to try, in order (``ControllerEndpoints.addresses``)."""
        return list(self.endpoints.addresses())

    def set_address(self, address: str) -> None:
        """Point at another controller address (combined mode learns its port at bind time)."""
        self.close()
        if address not in self.addresses:
            self.endpoints = ControllerEndpoints([address])
        self.address = address
        self.control = AsyncRpc(address, security=self.security)
        self.beat = AsyncRpc(address, security=self.security)
        self.poll = AsyncRpc(address, timeout_s=30.0, security=self.security)

    def restart_poll(self) -> None:
        """Drop the long poll's connection (a call on it fails): the next poll connects anew."""
        self.poll.close()
        self.poll = AsyncRpc(self.address, timeout_s=30.0, security=self.security)

    def _follow(self, leader: str | None, failed: str | None = None) -> None:
        """The current controller is gone or not active: go to the named leader, else the next
        voter in the list. ``failed``: the address a call failed on (a failure on a controller
        already left behind moves nothing)."""
        if (len(self.addresses) == 1 and not leader) or (failed and failed != self.address):
            return
        if leader and leader != self.address:
            target = leader
        elif leader:
            return
        else:
            at = self.addresses.index(self.address) if self.address in self.addresses else -1
            target = self.addresses[(at + 1) % len(self.addresses)]
        log.info("broker %d follows controller %s (was %s)", self.node_id, target, self.address)
        self._switch(target)

    def _switch(self, address: str) -> None:
        self.close()
        self.address = address
        self.control = AsyncRpc(address, security=self.security)
        self.beat = AsyncRpc(address, security=self.security)
        self.poll = AsyncRpc(address, timeout_s=30.0, security=self.security)

    async def _active_call(self, method: str, args: dict[str, Any],
                           timeout_s: float | None = None, *,
                           heartbeat: bool = False) -> dict[str, Any]:
        """A call the active controller must answer; follows it once on NOT_CONTROLLER.
        ``heartbeat``: on the heartbeats' own connection."""
        for attempt in range(2):
            control = self.beat if heartbeat else self.control
            try:
                answer = await control.call(method, args, timeout_s)
            except rpc.RpcError:
                self._follow(None, failed=control.address)
                raise
            self.endpoints.answered(control.address, answer.get("controller_id"))
            if answer.get("error") != int(ErrorCode.NOT_CONTROLLER) or attempt:
                return answer
            before = self.address
            self._follow(answer.get("leader"))
            if self.address == before:
                return answer
        return answer

    # -- the Controller protocol (synchronous, used by request handlers) ------------------------
    @property
    def cluster_id(self) -> str:
        return self.image.cluster_id or "floodmark"

    def topics(self) -> dict[str, TopicMeta]:
        if self._topics_cache is None:
            out = topic_metas(self.image)
            out.update(self.local_topics)
            self._topics_cache = out
        return self._topics_cache

    async def _admin(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        """An admin call on the active controller, awaited (the broker's event loop keeps
        serving everything else meanwhile); the answer's records are applied before it returns,
        so the caller sees what it changed. Bounded by ``admin_timeout_s``: REQUEST_TIMED_OUT
        when no controller answered, NOT_CONTROLLER when none was active."""
        full = {**args, "from_offset": self.image.next_offset}
        if self.local is not None:  # combined mode: the controller runs in this process
            answer = self.local.call(method, full)
        else:
            answer = await self._admin_on_active(method, full)
        if "result" in answer and "records" in answer["result"]:
            self.apply_records(answer["result"]["records"], answer["result"].get("snapshot"))
        return _result(answer)

    async def _admin_on_active(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        """Each attempt on its own connection (admin calls run side by side, never behind a
        heartbeat); a silent or inactive controller moves the call on to the leader it names,
        else to the next voter, until the deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.admin_timeout_s
        address = self.address
        last = "no controller answered"
        answer: dict[str, Any] = {}
        while (remaining := deadline - loop.time()) > 0:
            conn = AsyncRpc(address, security=self.security)
            followed = self.address
            attempt = asyncio.ensure_future(
                conn.call(method, args, min(remaining, ADMIN_ATTEMPT_TIMEOUT_S)))
            try:
                while not attempt.done():
                    await asyncio.wait({attempt}, timeout=0.2)
                    if not attempt.done() and self.address != followed:
                        # The heartbeats found this controller silent and moved on: so does
                        # the call (a stopped controller never answers; deposed, it commits
                        # nothing of what it was asked).
                        attempt.cancel()
                        raise rpc.RpcError(f"controller {address} is silent; the broker "
                                           f"follows {self.address}")
                answer = attempt.result()
                self.endpoints.answered(address, answer.get("controller_id"))
            except rpc.RpcError as exc:
                last = str(exc)
                answer = {}
                address = (self.address if self.address != followed
                           else self._next_voter(address))
                await asyncio.sleep(min(0.1, max(0.0, deadline - loop.time())))
                continue
            finally:
                attempt.cancel()  # (done already, unless this request itself was cancelled)
                conn.close()
            if answer.get("error") != int(ErrorCode.NOT_CONTROLLER) or len(self.addresses) < 2:
                return answer
            hint = answer.get("leader")
            if hint and hint != address:
                address = str(hint)
            else:
                await asyncio.sleep(0.1)  # an election is under way
        if answer:
            return answer  # NOT_CONTROLLER: no active controller within the time
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                         f"{method}: no controller answered within {self.admin_timeout_s:g} s "
                         f"({last})")

    async def change_raft_voters(self, add: bool, voter_id: int, directory_id: str) -> None:
        """AddRaftVoter / RemoveRaftVoter, forwarded to the active controller (the quorum
        leader), answered once the change is committed; Kafka's error otherwise."""
        await self._admin("add_raft_voter" if add else "remove_raft_voter",
                          {"voter_id": voter_id, "directory_id": directory_id})

    async def describe_quorum(self) -> QuorumView:
        """DescribeQuorum, answered by the controllers' Raft leader (Kafka's brokers forward it
        to the active controller): asked of the controller this broker follows (in process in
        combined mode), then of the leader it names, else the next voter.
        NOT_LEADER_OR_FOLLOWER when none leads within ``admin_timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.admin_timeout_s
        address = self.address
        last = "no controller answered"
        if self.local is not None:
            result = _result(self.local.call("describe_quorum", {}))
            if is_leader_answer(result):
                return from_controller(result, time.time_ns() // 1_000_000)
            address = str(result.get("leader_address") or self._next_voter(address))
        for _ in range(2 * len(self.addresses) + 1):
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            conn = AsyncRpc(address, security=self.security)
            try:
                result = _result(await conn.call("describe_quorum", {},
                                                 min(remaining, ADMIN_ATTEMPT_TIMEOUT_S)))
            except rpc.RpcError as exc:
                last = str(exc)
                address = self._next_voter(address)
                continue
            finally:
                conn.close()
            if is_leader_answer(result):
                return from_controller(result, time.time_ns() // 1_000_000)
            last = f"controller {address} is not the leader"
            leader = result.get("leader_address")
            if leader and leader != address:
                address = str(leader)
            else:
                address = self._next_voter(address)
                await asyncio.sleep(min(0.1, max(0.0, deadline - loop.time())))
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                         f"no controller leads the metadata quorum ({last})")

    def _next_voter(self, address: str) -> str:
        at = self.addresses.index(address) if address in self.addresses else -1
        return self.addresses[(at + 1) % len(self.addresses)]

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, Any], *, internal: bool = False,
                     validate_only: bool = False,
                     assignments: list[tuple[int, ...]] | None = None) -> TopicMeta:
        if internal:
            # Broker-local internal topic (the committed-offset store): RF=1, led by this node.
            parts = tuple(PartitionMeta(i, self.node_id, 0, (self.node_id,), (self.node_id,))
                          for i in range(num_partitions))
            meta = TopicMeta(name, uuid.uuid4(), parts, dict(configs), True)
            if not validate_only:
                self.local_topics[name] = meta
                self._topics_cache = None
            return meta
        await self._admin("create_topic", {"name": name, "num_partitions": num_partitions,
                                     "replication_factor": replication_factor,
                                     "configs": configs, "validate_only": validate_only,
                                     "assignments": None if assignments is None
                                     else [list(r) for r in assignments]})
        if validate_only:
            if assignments is not None:
                parts = tuple(PartitionMeta(i, r[0], 0, tuple(r), tuple(r))
                              for i, r in enumerate(assignments))
            else:
                parts = tuple(PartitionMeta(i, -1, 0, (), ()) for i in range(num_partitions))
            return TopicMeta(name, uuid.uuid4(), parts, dict(configs), False)
        return self.topics()[name]

    async def delete_topic(self, name: str, *, validate_only: bool = False) -> TopicMeta:
        meta = deletable_topic(self.topics(), name)
        if validate_only:
            return meta
        await self._admin("delete_topic", {"name": name})
        return meta

    async def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                                assignments: list[tuple[int, ...]] | None = None) -> TopicMeta:
        await self._admin("create_partitions", {"name": name, "count": count,
                                          "validate_only": validate_only,
                                          "assignments": None if assignments is None
                                          else [list(r) for r in assignments]})
        return self.topics()[name]

    async def alter_topic_configs(self, name: str, configs: dict[str, Any]) -> None:
        await self._admin("alter_topic_configs", {"name": name, "configs": configs})

    async def alter_broker_configs(self, resource: str, configs: dict[str, Any]) -> None:
        await self._admin("alter_broker_configs", {"resource": resource, "configs": configs})

    def broker_configs(self) -> dict[str, dict[str, Any]]:
        return self.image.broker_configs

    async def alter_group_configs(self, group: str, configs: dict[str, Any]) -> None:
        await self._admin("alter_group_configs", {"name": group, "configs": configs})

    def group_configs(self) -> dict[str, dict[str, Any]]:
        return self.image.group_configs

    async def create_delegation_token(self, owner: KafkaPrincipal, requester: KafkaPrincipal,
                                      renewers: list[KafkaPrincipal], max_lifetime_ms: int,
                                      settings: delegation_tokens.TokenSettings
                                      ) -> delegation_tokens.Decision:
        answer = await self._admin("create_delegation_token", {
            "principals": delegation_tokens.principals_to_json([owner, requester]),
            "renewers": delegation_tokens.principals_to_json(renewers),
            "max_lifetime_ms": max_lifetime_ms,
            "settings": delegation_tokens.settings_to_json(settings)})
        return delegation_tokens.decision_from_json(answer)

    async def renew_delegation_token(self, token_id: str, principal: KafkaPrincipal,
                                     period_ms: int, settings: delegation_tokens.TokenSettings
                                     ) -> delegation_tokens.Decision:
        answer = await self._admin("renew_delegation_token", {
            "token_id": token_id, "principals": delegation_tokens.principals_to_json([principal]),
            "period_ms": period_ms, "settings": delegation_tokens.settings_to_json(settings)})
        return delegation_tokens.decision_from_json(answer)

    async def expire_delegation_token(self, token_id: str, principal: KafkaPrincipal,
                                      period_ms: int) -> delegation_tokens.Decision:
        answer = await self._admin("expire_delegation_token", {
            "token_id": token_id, "principals": delegation_tokens.principals_to_json([principal]),
            "period_ms": period_ms})
        return delegation_tokens.decision_from_json(answer)

    def delegation_token_infos(self) -> delegation_tokens.Tokens:
        return self.image.delegation_tokens

    async def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker: KafkaError BROKER_ID_NOT_REGISTERED for an id not registered."""
        await self._admin("unregister_broker", {"broker_id": broker_id})

    async def alter_scram_credentials(self, deletions: list[scram.Deletion],
                                      upsertions: list[scram.Upsertion]
                                      ) -> list[scram.AlterResult]:
        answer = await self._admin("alter_scram_credentials",
                                   scram.alterations_to_json(deletions, upsertions))
        return scram.results_from_json(answer["results"])

    def scram_credentials(self) -> scram.Credentials:
        return self.image.scram_credentials

    async def alter_partition_reassignments(
        self, changes: list[tuple[str, int, tuple[int, ...] | None]]
    ) -> list[tuple[str, int, ErrorCode, str]]:
        answer = await self._admin("alter_partition_reassignments", {"changes": [
            [t, p, None if r is None else list(r)] for t, p, r in changes]})
        return [(str(t), int(p), ErrorCode(int(e)), str(m)) for t, p, e, m in answer["results"]]

    def reassignments(self) -> dict[tuple[str, int], Reassignment]:
        return self.image.reassignments

    async def create_acls(self, bindings: list[AclBinding]) -> None:
        await self._admin("create_acls", {"acls": [acl_to_record("", b) for b in bindings]})

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        answer = await self._admin("delete_acls", {"filters": [list(f.fields()) for f in filters]})
        return [[record_to_acl(r) for r in matched] for matched in answer["matched"]]

    def acls(self) -> AclStore:
        return self.image.acls

    async def alter_client_quotas(self, entries: list[tuple[QuotaEntity, QuotaChanges]]
                                  ) -> None:
        await self._admin("alter_client_quotas", {"entries": [
            quota_to_record(e, key, value) for e, changes in entries
            for key, value in changes.items()]})

    def client_quotas(self) -> QuotaStore:
        return self.image.client_quotas

    def finalized_features(self) -> FinalizedFeatures:
        return self.image.features

    async def update_features(self, updates: list[tuple[str, int, int]], validate_only: bool
                              ) -> list[tuple[str, str | None]]:
        answer = await self._admin("update_features", {
            "updates": [list(u) for u in updates], "validate_only": validate_only})
        return [(str(name), None if why is None else str(why))
                for name, why in answer["refusals"]]

    async def elect_leaders(self, partitions: list[tuple[str, int]], *, unclean: bool
                            ) -> list[tuple[str, int, ErrorCode, str]]:
        answer = await self._admin("elect_leaders", {"partitions": [list(p) for p in partitions],
                                               "unclean": unclean})
        return [(str(t), int(p), ErrorCode(int(e)), str(m)) for t, p, e, m in answer["results"]]

    async def allocate_producer_id(self) -> int:
        if self._pid_next >= self._pid_limit:
            block = await self._admin("allocate_producer_ids", {})
            self._pid_next = int(block["first"])
            self._pid_limit = self._pid_next + int(block["count"])
        pid = self._pid_next
        self._pid_next += 1
        return pid

    # -- records ---------------------------------------------------------------------------------
    def apply_records(self, records: list[list[Any]],
                      snapshot: dict[str, Any] | None = None) -> list[MetadataRecord]:
        """Apply fetched records; ``snapshot`` (the controller's answer to a fetch below its
        newest snapshot, KIP-630) first replaces the image."""
        applied: list[MetadataRecord] = []
        before = self.image.next_offset
        if snapshot is not None and int(snapshot["end_offset"]) > self.image.next_offset:
            snap_records = list(snapshot["records"])
            self.image = image_from_records(int(snapshot["end_offset"]), snap_records,
                                            self._unapplied)
            applied.extend(snap_records)
        applied += self.image.apply_all(((int(off), rec) for off, rec in records),
                                        self._unapplied)
        self._learn_endpoints()
        try:
            if applied:
                self._topics_cache = None
                if self.on_records is not None:
                    self.on_records(applied)
        finally:
            if self.image.next_offset > before:  # the broker has acted on them (on_records)
                self.applied.append((self.image.next_offset, time.time_ns() // 1_000_000))
        return applied

    def _learn_endpoints(self) -> None:
        """The committed voter set's endpoints (the image's ``voter_set``): a controller it
        moved is dialled where it listens now, the connections first (a call on the old ones
        fails once, and goes on from the new address)."""
        voter_set = self.image.voter_set
        if not self.endpoints.learn_voter_set(dict(voter_set.endpoints) if voter_set else {}):
            return
        log.info("broker %d: the controller quorum's voter set names %s", self.node_id,
                 ", ".join(f"{node}@{address}" for node, address
                           in sorted(self.endpoints.named.items())) or "no endpoint")
        moved = self.endpoints.current(self.address)
        if moved != self.address:
            log.info("broker %d follows controller %s (was %s): the voter set moved it",
                     self.node_id, moved, self.address)
            self._switch(moved)

    def _unapplied(self, bad: UnappliedRecord) -> None:
        """One record this broker cannot apply: say so loudly, keep it for the controller's
        status, count it, and go on with the records after it."""
        self.unapplied.append(bad)
        self.unapplied_total += 1
        log.error("broker %d SKIPPED metadata record at offset %d, it cannot be applied: %s "
                  "(applying the records after it; %d skipped in all)", self.node_id,
                  bad.offset, bad.reason, self.unapplied_total)
        if self.on_unapplied is not None:
            self.on_unapplied(bad)

    def metadata_progress(self) -> dict[str, Any]:
        """What the heartbeat tells the controller about this broker's image: its next offset
        (every record below it is applied) and when it reached it and the offsets before."""
        return {"metadata_offset": self.image.next_offset,
                "metadata_applied": [[offset, at_ms] for offset, at_ms in self.applied]}

    def metadata_errors(self) -> dict[str, Any]:
        """What the heartbeat tells the controller about records this broker skipped."""
        return {"total": self.unapplied_total,
                "recent": [[bad.offset, bad.reason] for bad in self.unapplied]}

    # -- control plane (async) ---------------------------------------------------------------
    async def register(self, host: str, port: int, *, clean_shutdown: bool = True,
                       listeners: list[dict[str, object]] | None = None,
                       rack: str | None = None) -> int:
        """``host:port``: the inter-broker listener; ``listeners``: every advertised listener
        (``Endpoint.to_record``), given when the broker sets listeners of its own; ``rack``:
        its ``broker.rack``."""
        args: dict[str, Any] = {
            "broker_id": self.node_id, "host": host, "port": port,
            "incarnation": self.incarnation, "clean_shutdown": clean_shutdown}
        if listeners:
            args["listeners"] = listeners
        if rack:
            args["rack"] = rack
        answer = await self._active_call("register", args)
        result = _result(answer)
        self.broker_epoch = int(result["broker_epoch"])
        timeout = result.get("session_timeout_ms")
        self.session_timeout_ms = int(timeout) if isinstance(timeout, int) else None
        return self.broker_epoch

    async def heartbeat(self, want_shutdown: bool = False,
                        timeout_s: float = 5.0,
                        offline_replicas: Sequence[tuple[str, int]] = (),
                        offline_log_dirs: Sequence[str] = ()) -> dict[str, Any]:
        """``timeout_s``: how long a silent controller may hold it before the broker tries the
        next voter (it must be well under the session timeout, or a new active controller
        fences the broker before it is found). ``offline_replicas``: this broker's replicas in
        a failed log directory (``offline_log_dirs``, their directory ids; KIP-858's
        heartbeat field), repeated in every heartbeat."""
        answer = await self._active_call("heartbeat", {
            "broker_id": self.node_id, "broker_epoch": self.broker_epoch,
            "want_shutdown": want_shutdown, "metadata_errors": self.metadata_errors(),
            "offline_replicas": [[t, p] for t, p in offline_replicas],
            "offline_log_dirs": list(offline_log_dirs),
            **self.metadata_progress()},
            timeout_s=timeout_s, heartbeat=True)
        return _result(answer)

    async def fetch_metadata(self, max_wait_ms: int) -> int:
        """One long poll; returns the number of records applied."""
        poll = self.poll
        try:
            answer = await poll.call("fetch_metadata", {"offset": self.image.next_offset,
                                                        "max_wait_ms": max_wait_ms,
                                                        "broker_id": self.node_id,
                                                        "broker_epoch": self.broker_epoch},
                                     timeout_s=max_wait_ms / 1000 + 10)
        except rpc.RpcError:
            # Any voter serves committed metadata: try the next one.
            self._follow(None, failed=poll.address)
            raise
        self.endpoints.answered(poll.address, answer.get("controller_id"))
        result = _result(answer)
        return len(self.apply_records(result["records"], result.get("snapshot")))

    async def catch_up(self) -> None:
        """Fetch until the image has everything the controller had when we asked."""
        while True:
            answer = _result(await self.poll.call("fetch_metadata",
                                                  {"offset": self.image.next_offset,
                                                   "max_wait_ms": 0}))
            self.apply_records(answer["records"], answer.get("snapshot"))
            if self.image.next_offset >= int(answer["end"]):
                return

    async def assign_replicas_to_dirs(self, directories: list[dict[str, object]]
                                      ) -> dict[str, Any]:
        """AssignReplicasToDirs (KIP-858): ``directories`` as ``dir_assignments`` builds it."""
        answer = await self._active_call("assign_replicas_to_dirs", {
            "broker_id": self.node_id, "broker_epoch": self.broker_epoch,
            "directories": directories})
        return _result(answer)

    async def alter_partition(
            self, proposals: Sequence[tuple[tuple[str, int], AlterPartitionRequest]]
    ) -> dict[tuple[str, int], alter_partition_wire.Answer]:
        """One AlterPartition request carrying ``proposals`` (one per partition), under this
        broker's current epoch; each partition's error and new registration. A failed call
        (no controller, a timeout, a refusal of the whole request) raises RpcError or
        KafkaError."""
        answer = await self._active_call("alter_partition", alter_partition_wire.encode_request(
            self.node_id, self.broker_epoch, proposals))
        return alter_partition_wire.decode_answer(_result(answer))

    def close(self) -> None:
        self.control.close()
        self.beat.close()
        self.poll.close()
