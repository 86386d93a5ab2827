"""The controller process: the I/O shell around ``ControllerLogic`` and the metadata log.

One asyncio loop. Every request (and every timer tick) runs the logic, then the records it
emitted are appended to the metadata log and fsynced, *then* the answer goes out and waiting
``fetch_metadata`` long polls are woken: brokers learn a change within one round trip of its
commit (pull, as KRaft brokers fetch the metadata log; no push channel to keep consistent).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from floodmark.address import format_host_port
from floodmark.controller import alter_partition_wire, delegation_tokens, placement, rpc, scram
from floodmark.controller.image import (
    UNAPPLIED_KEPT,
    MetadataImage,
    MetadataRecord,
    UnappliedRecord,
    acl_to_record,
    record_to_acl,
    record_to_quota,
    registration_to_record,
)
from floodmark.controller.liveness import ActivationSweep, BrokerConnections, Incarnation, speaker
from floodmark.controller.logic import ControllerConfig, ControllerLogic, ElectionCounts
from floodmark.controller.metadata_log import MetadataLog, MetadataLogConfig
from floodmark.controller.quorum.core import QuorumConfig
from floodmark.controller.quorum.effects import RoleChanged
from floodmark.controller.quorum.update_voter import UpdateVoterRequest, request_error
from floodmark.controller.quorum_node import QuorumNode
from floodmark.controller.snapshot import (
    SnapshotId,
    SnapshotStore,
    cut_log_before,
    encode_snapshot,
    image_from_records,
    image_records,
    open_with_snapshot,
    snapshot_epoch,
)
from floodmark.errors import ErrorCode, KafkaError
from floodmark.replication import PartitionRegistration
from floodmark.security import PLAINTEXT_CHANNEL, ChannelSecurity, Endpoint, TlsServer, new_filter
from floodmark.storage import RealFileSystem

log = logging.getLogger(__name__)

TICK_S = 0.1
MAX_FETCH_WAIT_MS = 5000
MAX_RECORDS_PER_FETCH = 10_000
COMMITS_KEPT = 64  # (committed end offset, wall-clock ms) pairs status reports


def now_ms() -> int:
    return time.time_ns() // 1_000_000


QUORUM_COMMIT_TIMEOUT_S = 10.0
LISTENER_PROBE_TIMEOUT_S = 1.0  # a broker's connections all closed: how long to try its port
# ... and when (seconds after they closed): a dying process closes its sockets one by one and
# may be preempted between them (a loaded machine), so its port can still accept just after
# its connections closed. A live broker's port never refuses, however often it is tried.
LISTENER_PROBES_S = (0.0, 0.01, 0.03, 0.1, 0.3, 0.6)
STALL_MS = 1000  # the ticker ran this late: the controller itself was not running
# Answered by every controller of a quorum; the rest only by the active one.
ANY_CONTROLLER = frozenset({"status", "describe_quorum", "quorum", "update_raft_voter"})


def _metadata_progress(args: dict[str, Any]) -> dict[str, Any] | None:
    """A heartbeat's ``metadata_offset`` and ``metadata_applied`` ([[next offset, wall-clock
    ms], ...]), checked; None when absent or malformed (an older broker: nothing to report)."""
    offset, applied = args.get("metadata_offset"), args.get("metadata_applied", [])
    if not isinstance(offset, int) or not isinstance(applied, list):
        return None
    pairs = [[o, t] for o, t in (p for p in applied if isinstance(p, list) and len(p) == 2)
             if isinstance(o, int) and isinstance(t, int)]
    return {"metadata_offset": offset, "metadata_applied": pairs}


async def _listener_refuses(host: str, port: int, timeout_s: float) -> bool:
    """True when ``host:port`` actively refuses a TCP connection (nothing listens there);
    False when it accepts or does not answer within ``timeout_s``."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False
    writer.close()
    return False


class ControllerServer:
    def __init__(self, data_dir: str, config: ControllerConfig, node_id: int = 0,
                 quorum: tuple[QuorumConfig, dict[int, tuple[str, int]]] | None = None,
                 metadata_log: MetadataLogConfig | None = None,
                 security: ChannelSecurity = PLAINTEXT_CHANNEL) -> None:
        self.security = security  # TLS of this server and of its calls to other voters
        """``quorum``: (settings, ``controller.quorum.voters``) to run as one voter of a
        controller quorum; without it the controller is alone (and always active)."""
        self.node_id = node_id
        self.data_dir = data_dir
        self.config = config
        self.mlog = MetadataLog(data_dir, metadata_log)
        self.snapshots = SnapshotStore(RealFileSystem(), self.mlog.path,
                                       on_installed=self._on_snapshot_fetched)
        self.image = MetadataImage()
        # The committed records since the newest snapshot: records[i] is at records_base + i.
        self.records: list[MetadataRecord] = []
        self.records_base = 0
        self.snapshot: tuple[SnapshotId, list[MetadataRecord]] | None = None
        self._bytes_since_snapshot = 0
        self.quorum_configured = quorum is not None
        self._load_newest_snapshot()
        self._changed: asyncio.Event | None = None  # created in serve() (needs the loop)
        self.quorum: QuorumNode | None = None
        self.logic: ControllerLogic | None = None  # set while this is the active controller
        # Elections this process decided, across every time it was active (/metrics).
        self.elections = ElectionCounts()
        self._commit_waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self.broker_connections = BrokerConnections()
        # AlterPartition requests decided, the proposals they carried and the most one carried
        # (status shows them).
        self.alter_partition_requests = 0
        self.alter_partition_proposals = 0
        self.alter_partition_largest = 0
        # What each broker's heartbeat says about metadata records it could not apply, and
        # the records this controller skipped replaying its own log (cluster status shows both).
        self.broker_metadata_errors: dict[int, dict[str, Any]] = {}
        self.unapplied: list[UnappliedRecord] = []
        # Each broker's image as its last heartbeat told it: next offset and when it got there.
        self.broker_metadata_progress: dict[int, dict[str, Any]] = {}
        # When records became visible (committed: the quorum's HW; alone: appended and
        # fsynced): (end offset, wall-clock ms), oldest first.
        self.commits: collections.deque[tuple[int, int]] = collections.deque(
            maxlen=COMMITS_KEPT)
        self._resumed_at_ms = 0
        self._probes: set[asyncio.Future[None]] = set()  # brokers whose connections all closed
        self._sweep = ActivationSweep()  # brokers with no connection just after activation
        if quorum is not None:
            # Records become visible (image, brokers) only once committed by the quorum; this
            # voter writes only while it is the active controller (the quorum leader).
            settings, voters = quorum
            self.quorum = QuorumNode(settings, voters, self.mlog.log, data_dir,
                                     self._on_high_watermark, self._on_role, self.snapshots,
                                     self._on_voters_record, security=security.client)
            if self.snapshot is not None:
                sid = self.snapshot[0]
                self.quorum.snapshot_written(sid.end_offset, sid.epoch, self.snapshots.size(sid))
        else:
            self._apply_committed(self.mlog.log_end_offset)
            self.logic = ControllerLogic(self.image, config, elections=self.elections)
            self.logic.bootstrap()
            self.logic.start(now_ms())
            self._sweep.activated(now_ms())
            self._persist()
        self._server: asyncio.Server | TlsServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._stopping: asyncio.Event | None = None
        self.bound_port = 0
        self.bound_host = ""
        log.info("controller %d loaded metadata: snapshot at %d, %d records after it, "
                 "%d brokers, %d topics", node_id, self.records_base, len(self.records),
                 len(self.image.brokers), len(self.image.topics))

    # -- snapshots (KIP-630) ---------------------------------------------------------------------
    def _load_newest_snapshot(self) -> None:
        """At start: the image from the newest intact snapshot (the log is replayed only after
        it)."""
        found = open_with_snapshot(self.snapshots, self.mlog.log,
                                   may_start_empty=self.quorum_configured)
        if found is not None:
            self.install_snapshot(*found)

    def install_snapshot(self, snapshot_id: SnapshotId, records: list[MetadataRecord]) -> None:
        """The image becomes the snapshot's (at start, or a follower given the leader's)."""
        self.snapshot = (snapshot_id, records)
        self.image = image_from_records(snapshot_id.end_offset, records, self._unapplied)
        self.records = []
        self.records_base = snapshot_id.end_offset
        self._bytes_since_snapshot = 0

    def _on_snapshot_fetched(self, snapshot_id: SnapshotId,
                             records: list[MetadataRecord]) -> None:
        """A voter loaded the leader's snapshot (FetchSnapshot): its log now restarts there."""
        log.info("controller %d loaded snapshot %s from the leader (%d records)", self.node_id,
                 snapshot_id.file_name, len(records))
        self.install_snapshot(snapshot_id, records)
        self._wake_fetchers()

    def _maybe_snapshot(self) -> None:
        """Snapshot the image once enough committed record bytes followed the last snapshot,
        when the image holds exactly the committed records (an active controller's image may
        run ahead of the quorum's HW)."""
        limit = self.mlog.config.max_record_bytes_between_snapshots
        end = self.visible_end
        if (limit <= 0 or self._bytes_since_snapshot < limit or self.image.next_offset != end
                or end <= self.records_base):
            return
        snapshot_id = SnapshotId(end, snapshot_epoch(self.mlog.log, end))
        records = image_records(self.image)
        self.snapshots.write(snapshot_id, encode_snapshot(snapshot_id, records))
        self.snapshots.prune()
        cut_log_before(self.mlog.log, self.snapshots.retained_start(), now_ms=now_ms())
        self.records = self.records[end - self.records_base:]
        self.records_base = end
        self.snapshot = (snapshot_id, records)
        self._bytes_since_snapshot = 0
        if self.quorum is not None:
            self.quorum.snapshot_written(snapshot_id.end_offset, snapshot_id.epoch,
                                         self.snapshots.size(snapshot_id))
        log.info("controller %d wrote snapshot %s (%d records); metadata log starts at %d",
                 self.node_id, snapshot_id.file_name, len(records),
                 self.mlog.log.log_start_offset)

    @property
    def records_end(self) -> int:
        return self.records_base + len(self.records)

    # -- persistence ---------------------------------------------------------------------------
    def _persist(self) -> None:
        """Append what the logic decided. The logic applied each record to the image as it
        decided (the next decision must see it); if the log does not take the records (too
        large, a full disk) the decision is rolled back: the image is rebuilt from the records
        the log did take, and KafkaError says why."""
        if self.logic is None:
            return
        pending = self.logic.take_pending()
        if not pending:
            return
        try:
            if self.quorum is not None:
                values = [json.dumps(rec, sort_keys=True).encode() for _, rec in pending]
                first, _ = self.quorum.append(values)
                if first != pending[0][0]:
                    raise RuntimeError(f"metadata log at {first}, records start at "
                                       f"{pending[0][0]}")
            else:
                self.mlog.append(pending)
        except (KafkaError, OSError, RuntimeError, ValueError) as exc:
            self._roll_back()
            code = exc.code if isinstance(exc, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR
            message = exc.message if isinstance(exc, KafkaError) else str(exc)
            log.error("controller %d: the metadata log refused %d record(s) at offset %d (%s): "
                      "the decision is undone", self.node_id, len(pending), pending[0][0],
                      message)
            raise KafkaError(code, f"the metadata log refused the change ({len(pending)} "
                                   f"record(s)): {message}") from exc
        if self.quorum is not None:
            self.records.extend(rec for _, rec in pending)
            self._bytes_since_snapshot += sum(len(v) for v in values)
            return  # visible once committed (_on_high_watermark)
        self.records.extend(rec for _, rec in pending)
        self._bytes_since_snapshot += sum(len(json.dumps(rec)) for _, rec in pending)
        self._wake_fetchers()
        self._maybe_snapshot()

    def _roll_back(self) -> None:
        """The image again exactly what the log holds: the newest snapshot and the records
        this controller appended after it."""
        image = (image_from_records(self.snapshot[0].end_offset, self.snapshot[1])
                 if self.snapshot is not None else MetadataImage())
        image.next_offset = self.records_base
        image.apply_all(((self.records_base + i, rec) for i, rec in enumerate(self.records)),
                        self._unapplied)
        self.image = image
        if self.logic is not None:
            self.logic.image = image

    def _wake_fetchers(self) -> None:
        end = self.visible_end
        if not self.commits or end > self.commits[-1][0]:
            self.commits.append((end, now_ms()))
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()

    @property
    def visible_end(self) -> int:
        """Records below this offset may be served: all of them alone, the committed ones (the
        quorum's high watermark) in a quorum."""
        if self.quorum is None:
            return self.records_end
        return min(self.records_end, self.quorum.core.high_watermark)

    def records_from(self, offset: int) -> list[list[Any]]:
        """Committed records from ``offset`` (from the snapshot's end when ``offset`` is below
        it: the caller sends ``snapshot_for`` with them)."""
        offset = max(self.records_base, offset)
        end = min(self.visible_end, offset + MAX_RECORDS_PER_FETCH)
        base = self.records_base
        return [[i, self.records[i - base]] for i in range(offset, end)]

    def snapshot_for(self, offset: int) -> dict[str, Any] | None:
        """A fetch below the newest snapshot (the log there is gone): the snapshot instead
        (Kafka's SnapshotId in the fetch answer; brokers load it, then the records after)."""
        if offset >= self.records_base or self.snapshot is None:
            return None
        snapshot_id, records = self.snapshot
        return {"end_offset": snapshot_id.end_offset, "epoch": snapshot_id.epoch,
                "records": records}

    # -- quorum ------------------------------------------------------------------------------------
    def _apply_committed(self, upto: int) -> None:
        """Replay committed records this voter did not write itself into the image."""
        for offset, rec, size in self.mlog.read_range_sized(self.records_end, upto):
            self.image.apply_all([(offset, rec)], self._unapplied)
            self.records.append(rec)
            self._bytes_since_snapshot += size

    def _unapplied(self, bad: UnappliedRecord) -> None:
        """A record in the metadata log (written by an older or buggier controller) that does
        not apply: skipped, loudly; the records after it are applied."""
        if any(seen.offset == bad.offset for seen in self.unapplied):
            return  # replayed again (a new role, a snapshot reloaded)
        self.unapplied = [*self.unapplied, bad][-UNAPPLIED_KEPT:]
        log.error("controller %d SKIPPED metadata record at offset %d, it cannot be applied: %s "
                  "(applying the records after it)", self.node_id, bad.offset, bad.reason)

    def _on_high_watermark(self, old: int, new: int) -> None:
        if self.logic is None:
            self._apply_committed(new)
        self._maybe_activate()
        self._maybe_snapshot()
        waiting, self._commit_waiters = self._commit_waiters, []
        for offset, future in waiting:
            if offset <= new:
                if not future.done():
                    future.set_result(True)
            else:
                self._commit_waiters.append((offset, future))
        self._wake_fetchers()

    def _on_voters_record(self, offset: int, value: bytes) -> None:
        """The quorum leader appended a ``voters`` record (a voter bound to its data dir): the
        active controller's image and records take its offset, so its next record follows it.
        Not yet active: it is replayed from the log with the committed records."""
        if self.logic is None:
            return
        if offset != self.records_end:
            log.error("controller %d: voters record at %d, records end at %d", self.node_id,
                      offset, self.records_end)
            return
        rec = json.loads(value)
        self.image.apply_all([(offset, rec)], self._unapplied)
        self.records.append(rec)

    def _on_role(self, change: RoleChanged) -> None:
        if change.role != "leader" and self.logic is not None:
            # No longer the active controller: forget what it wrote but nobody committed.
            log.info("controller %d is no longer the active controller (epoch %d)",
                     self.node_id, change.epoch)
            self.logic = None
            self._sweep.deactivated()
            assert self.quorum is not None
            committed = self.quorum.core.high_watermark
            if self.image.next_offset == self.records_end <= committed:
                # Every record it decided is committed (the image changes only through
                # records, ``ControllerLogic.emit``): its image is the committed image already.
                # Rebuilding it (the snapshot, then every record after it) is O(partitions)
                # on the loop, at a moment when the quorum is already short of time.
                pass
            elif self.snapshot is not None:
                self.install_snapshot(*self.snapshot)
            else:
                self.image = MetadataImage()
                self.records = []
            self._apply_committed(committed)
            for _, future in self._commit_waiters:
                if not future.done():
                    future.set_result(False)
            self._commit_waiters = []
        self._maybe_activate()

    def _maybe_activate(self) -> None:
        """The quorum leader becomes the active controller once its epoch's first record is
        committed: then its log's committed prefix is everything any controller ever decided."""
        quorum = self.quorum
        if quorum is None or self.logic is not None or not quorum.core.is_leader:
            return
        role = quorum.core.role
        if quorum.core.high_watermark <= getattr(role, "epoch_start_offset", 1 << 62):
            return
        self._apply_committed(quorum.core.high_watermark)
        self.logic = ControllerLogic(self.image, self.config, elections=self.elections)
        self.logic.bootstrap()
        self.logic.start(now_ms())
        self._sweep.activated(now_ms())
        log.info("controller %d is the active controller (epoch %d, %d records)", self.node_id,
                 quorum.core.epoch, self.records_end)
        with contextlib.suppress(KafkaError):  # refused and rolled back (logged)
            self._persist()

    async def _committed(self, offset: int) -> bool:
        """Wait until the quorum commits everything below ``offset``; False if this controller
        stopped being the active one first."""
        assert self.quorum is not None
        if self.quorum.core.high_watermark >= offset:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((offset, future))
        try:
            return await asyncio.wait_for(future, QUORUM_COMMIT_TIMEOUT_S)
        except TimeoutError:
            return False

    def _active(self) -> ControllerLogic:
        if self.logic is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, self._not_controller()["message"])
        return self.logic

    def _not_controller(self) -> dict[str, Any]:
        assert self.quorum is not None
        leader = self.quorum.core.leader_id
        address = self.quorum.address_of(leader)
        where = (f"the active controller is {leader} at {address}" if address
                 else "no active controller is known yet")
        return {"error": int(ErrorCode.NOT_CONTROLLER),
                "message": f"controller {self.node_id} is not the active controller; {where}",
                "leader": address}

    # -- serving -------------------------------------------------------------------------------
    async def serve(self, host: str, port: int, ready: Callable[[int], None] | None = None) -> None:
        self._changed = asyncio.Event()
        self._stopping = asyncio.Event()
        if self.security.server is not None:  # SSL: mTLS when ssl.client.auth=required
            def streams() -> asyncio.BaseProtocol:
                return asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._on_connection)

            server: asyncio.Server | TlsServer = await TlsServer.start(
                host, port, streams, self.security.server, f"controller {self.node_id}")
        else:
            server = await asyncio.start_server(self._on_connection, host, port)
        self._server = server
        self.bound_port = server.sockets[0].getsockname()[1]
        self.bound_host = host
        if self.quorum is not None:
            self.quorum.own_address = format_host_port(host, self.bound_port)
        log.info("controller %d listening on %s:%d (%s)", self.node_id, host, self.bound_port,
                 self.security.protocol.value)
        ticker = asyncio.create_task(self._ticker())
        if self.quorum is not None:
            self.quorum.start()
        if ready is not None:
            ready(self.bound_port)
        await self._stopping.wait()
        ticker.cancel()
        if self.quorum is not None:
            await self.quorum.stop()
        server.close()
        for writer in list(self._writers):
            writer.close()  # their handlers see EOF and end, even one that missed a cancel
        self.mlog.close()
        log.info("controller %d stopped", self.node_id)

    def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def _ticker(self) -> None:
        last = now_ms()
        while True:
            await asyncio.sleep(TICK_S)
            now = now_ms()
            if now - last > STALL_MS:
                # This process did not run (SIGSTOP, a starved machine): connections brokers
                # closed meanwhile say nothing about them (see _fence_if_gone).
                self._resumed_at_ms = now
            last = now
            if self.logic is None:
                continue
            for who in self._sweep.due(now, self.image.brokers, self.broker_connections):
                self._probe(who)  # it may have died with the previous active controller
            try:
                self.logic.tick(now_ms())
            except Exception:
                # Records emitted before the failure are applied and consistent: persist them
                # and keep ticking (a dead ticker would never fence anyone again).
                log.exception("controller %d tick failed", self.node_id)
            with contextlib.suppress(KafkaError):  # refused and rolled back (logged)
                self._persist()

    async def _on_connection(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while self._stopping is None or not self._stopping.is_set():
                req = await rpc.read_frame(reader)
                if req is None:
                    break
                answer = await self._answer_unless_gone(reader, req)
                if answer is None:
                    break  # the caller's process went away during its long poll
                args = req.get("args")
                who = speaker(str(req.get("method")), args if isinstance(args, dict) else {},
                              answer)
                if who is not None:
                    self.broker_connections.spoke(writer, who)
                # Who answered: a broker learns which controller its --controller entry is
                # (controller_endpoints: it follows that controller when the voter set moves it).
                answer["controller_id"] = self.node_id
                writer.write(rpc.encode(answer))
                await writer.drain()
        except (rpc.RpcError, ValueError, ConnectionError) as exc:
            log.warning("controller connection dropped: %s", exc)
        finally:
            self._writers.discard(writer)
            writer.close()
            gone = self.broker_connections.closed(writer)
            if gone is not None and (self._stopping is None or not self._stopping.is_set()):
                self._probe(gone)

    async def _answer_unless_gone(self, reader: asyncio.StreamReader,
                                  req: dict[str, Any]) -> dict[str, Any] | None:
        """The answer, or None when the connection ends first. Only the metadata long poll
        waits (up to seconds); its caller sends nothing meanwhile (one request at a time per
        connection), so the end of the stream is seen at once: a dead broker's last connection
        closes now, not when its poll would have ended, and it is fenced without that delay."""
        if req.get("method") != "fetch_metadata":
            return await self._handle(req)
        handled = asyncio.ensure_future(self._handle(req))
        gone = asyncio.ensure_future(reader.read(1))
        try:
            await asyncio.wait({handled, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            pending = [task for task in (handled, gone) if not task.done()]
            for task in pending:
                task.cancel()
            # Wait for the cancelled read to let go of the reader (the next frame is read next).
            await asyncio.gather(*pending, return_exceptions=True)
        if handled.done() and not handled.cancelled():
            if gone.done() and not gone.cancelled() and gone.result():
                raise ValueError("request bytes sent during a long poll")
            return handled.result()
        if gone.result():
            raise ValueError("request bytes sent during a long poll")
        return None

    def _probe(self, who: Incarnation) -> None:
        probe = asyncio.ensure_future(self._probe_then_fence(who))
        self._probes.add(probe)  # (held until done: the loop keeps weak references)
        probe.add_done_callback(self._probes.discard)

    async def _probe_then_fence(self, who: Incarnation) -> None:
        """A broker incarnation holds no connection to this controller (every one closed, or
        none came back since it became active): is its process gone? Its own
        listener answers. A dead process's port refuses a connection at once (the kernel closed
        it with the process); a live one accepts, even while stopped (the kernel completes the
        handshake), and an unreachable host does not answer. Only a refusal fences, at once;
        otherwise the session timeout stays the rule (a live broker that dropped its connections
        and is slow to come back is never fenced for it)."""
        started = time.monotonic()
        for at_s in LISTENER_PROBES_S:
            await asyncio.sleep(max(0.0, started + at_s - time.monotonic()))
            reg = self.image.brokers.get(who[0])
            if (self.logic is None or reg is None or reg.broker_epoch != who[1] or reg.fenced
                    or self.broker_connections.has_connection(who)):
                return  # not the active controller; it came back, or is fenced or replaced
            if await _listener_refuses(reg.host, reg.port, LISTENER_PROBE_TIMEOUT_S):
                self._fence_if_gone(who)
                return
        log.info("controller %d: broker %d (epoch %d) holds no connection but its port "
                 "still answers: left to the session timeout", self.node_id, who[0], who[1])

    def _fence_if_gone(self, who: tuple[int, int]) -> None:
        """A registered, unfenced broker incarnation holds no connection to this controller
        (they all closed, or none came since it became active) and its port refuses
        connections: its process is gone. Fence it now rather than after the session
        timeout (a stopped or partitioned broker keeps its connections open and is left to the
        timeout; one in controlled shutdown has already handed over)."""
        broker_id, broker_epoch = who
        reg = self.image.brokers.get(broker_id)
        if now_ms() - self._resumed_at_ms < STALL_MS * 2:
            return  # the controller itself was stalled: its brokers may have given up on it
        if (self.logic is None or self.broker_connections.has_connection(who) or reg is None
                or reg.broker_epoch != broker_epoch or reg.fenced or reg.in_controlled_shutdown):
            return
        log.info("controller %d: broker %d (epoch %d) holds no connection and its port "
                 "refuses connections: fencing it",
                 self.node_id, broker_id, broker_epoch)
        self.logic.fence_broker(broker_id, f"broker {broker_id} process gone (connections "
                                           "closed)")
        with contextlib.suppress(KafkaError):  # refused and rolled back (logged)
            self._persist()

    async def _handle(self, req: dict[str, Any]) -> dict[str, Any]:
        rid = req.get("id")
        method = str(req.get("method"))
        args = req.get("args") or {}
        if method != "fetch_metadata":
            answer = self.call(method, args)
            if self.quorum is not None and method not in ANY_CONTROLLER and \
                    answer.get("error") != int(ErrorCode.NOT_CONTROLLER):
                # Answer only once the quorum has committed what the call wrote; a refusal too,
                # once everything written before it is, as Kafka's controller does: it may rest
                # on records a new leader would truncate (TOPIC_ALREADY_EXISTS for a topic whose
                # creation is never committed).
                if not await self._committed(self.mlog.log_end_offset):
                    return {"id": rid, **self._not_controller()}
                if "result" in answer and "from_offset" in args:
                    answer["result"]["records"] = self.records_from(int(args["from_offset"]))
                    answer["result"]["snapshot"] = self.snapshot_for(int(args["from_offset"]))
            return {"id": rid, **answer}
        try:
            return {"id": rid, "result": await self._fetch_metadata(args)}
        except (KeyError, TypeError, ValueError) as exc:
            return {"id": rid, "error": int(ErrorCode.INVALID_REQUEST), "message": repr(exc)}

    def call(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        """Every method but the long poll, synchronously: ``{"result": ...}`` or ``{"error":
        code, "message": text}``. Combined mode calls this directly (no socket to itself)."""
        handler = getattr(self, f"_rpc_{method}", None)
        if handler is None:
            return {"error": int(ErrorCode.INVALID_REQUEST), "message": f"unknown method {method!r}"}
        if self.logic is None and method not in ANY_CONTROLLER:
            return self._not_controller()
        try:
            result = handler(args)
            self._persist()
            if "from_offset" in args:
                result["records"] = self.records_from(int(args["from_offset"]))
                result["snapshot"] = self.snapshot_for(int(args["from_offset"]))
            return {"result": result}
        except KafkaError as exc:
            self._persist()
            return {"error": int(exc.code), "message": exc.message}
        except (KeyError, TypeError, ValueError) as exc:
            self._persist()
            return {"error": int(ErrorCode.INVALID_REQUEST), "message": repr(exc)}

    async def _fetch_metadata(self, args: dict[str, Any]) -> dict[str, Any]:
        offset = int(args.get("offset", 0))
        wait_ms = min(int(args.get("max_wait_ms", 0)), MAX_FETCH_WAIT_MS)
        if offset >= self.visible_end and wait_ms > 0 and self._changed is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait_ms / 1000)
        return {"records": self.records_from(offset), "end": self.visible_end,
                "snapshot": self.snapshot_for(offset)}

    # -- methods -------------------------------------------------------------------------------
    def _rpc_register(self, a: dict[str, Any]) -> dict[str, Any]:
        listeners = a.get("listeners")
        if listeners is not None:  # checked here: a bad one is refused, not written
            try:
                listeners = [Endpoint.from_record(x).to_record() for x in listeners]
            except (TypeError, ValueError) as exc:
                raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        epoch = self._active().register_broker(int(a["broker_id"]), str(a["host"]), int(a["port"]),
                                           str(a["incarnation"]), now_ms(),
                                           clean_shutdown=bool(a.get("clean_shutdown", True)),
                                           listeners=listeners, rack=placement.broker_rack(a.get("rack")))
        return {"broker_epoch": epoch,
                "session_timeout_ms": self.config.broker_session_timeout_ms}

    def _rpc_heartbeat(self, a: dict[str, Any]) -> dict[str, Any]:
        offline = a.get("offline_replicas")
        ans = self._active().heartbeat(
            int(a["broker_id"]), int(a["broker_epoch"]), now_ms(),
            bool(a.get("want_shutdown", False)),
            offline_replicas=[(str(t), int(p)) for t, p in offline]
            if isinstance(offline, list) else (),
            offline_log_dirs=[str(d) for d in a.get("offline_log_dirs") or ()])
        errors = a.get("metadata_errors")
        if isinstance(errors, dict):
            self.broker_metadata_errors[int(a["broker_id"])] = errors
        progress = _metadata_progress(a)
        if progress is not None:
            self.broker_metadata_progress[int(a["broker_id"])] = progress
        return {"error": int(ans.error), "fenced": ans.fenced,
                "shutdown_ready": ans.shutdown_ready, "end": self.image.next_offset,
                "session_timeout_ms": self.config.broker_session_timeout_ms}

    def _rpc_assign_replicas_to_dirs(self, a: dict[str, Any]) -> dict[str, Any]:
        """AssignReplicasToDirs (API 73, KIP-858) in this control plane's JSON: ``directories``
        as Kafka's request has them, each ``{"id", "topics": [{"name", "partitions":
        [{"partition_index"}]}]}`` (topic names where Kafka has topic ids); the answer's
        ``directories`` the same shape with an ``error_code`` per partition."""
        assignments: dict[str, list[tuple[str, int]]] = {}
        for d in a.get("directories") or ():
            assignments.setdefault(str(d["id"]), []).extend(
                (str(t["name"]), int(p["partition_index"]))
                for t in d["topics"] for p in t["partitions"])
        error, per_partition = self._active().assign_replicas_to_dirs(
            int(a["broker_id"]), int(a["broker_epoch"]), assignments)
        return {"error_code": int(error), "directories": [
            {"id": directory_id, "topics": [
                {"name": name, "partitions": [
                    {"partition_index": p,
                     "error_code": int(per_partition.get((name, p), error))}
                    for t, p in keys if t == name]}
                for name in sorted({t for t, _ in keys})]}
            for directory_id, keys in sorted(assignments.items())]}

    def _rpc_alter_partition(self, a: dict[str, Any]) -> dict[str, Any]:
        """AlterPartition: every proposal of the request decided in this one call, so their
        PartitionChangeRecords are one batch for the metadata log and the answer waits for one
        commit (``_handle``), as Kafka's controller handles a request of many partitions. A
        malformed request changes nothing (decoded whole first)."""
        proposals = alter_partition_wire.decode_request(a)
        logic = self._active()
        answers: list[tuple[tuple[str, int], ErrorCode, PartitionRegistration | None]] = []
        for (topic, partition), request in proposals:
            try:
                error, reg = logic.alter_partition(topic, partition, request)
            except KafkaError as exc:
                error, reg = exc.code, None
            answers.append(((topic, partition), error, reg))
        self.alter_partition_requests += 1
        self.alter_partition_proposals += len(proposals)
        self.alter_partition_largest = max(self.alter_partition_largest, len(proposals))
        log.info("controller %d: AlterPartition from broker %d: %d partition(s), %d accepted",
                 self.node_id, int(a["broker_id"]), len(proposals),
                 sum(1 for _, error, _ in answers if error is ErrorCode.NONE))
        return alter_partition_wire.encode_answer(answers)

    def _rpc_create_topic(self, a: dict[str, Any]) -> dict[str, Any]:
        assignments = a.get("assignments")
        self._active().create_topic(str(a["name"]), int(a["num_partitions"]),
                                int(a["replication_factor"]), dict(a.get("configs") or {}),
                                validate_only=bool(a.get("validate_only", False)),
                                assignments=None if assignments is None else [
                                    tuple(int(b) for b in r) for r in assignments])
        return {}

    def _rpc_delete_topic(self, a: dict[str, Any]) -> dict[str, Any]:
        self._active().delete_topic(str(a["name"]))
        return {}

    def _rpc_create_partitions(self, a: dict[str, Any]) -> dict[str, Any]:
        assignments = a.get("assignments")
        self._active().create_partitions(str(a["name"]), int(a["count"]),
                                     validate_only=bool(a.get("validate_only", False)),
                                     assignments=None if assignments is None else [
                                         tuple(int(b) for b in r) for r in assignments])
        return {}

    def _rpc_alter_topic_configs(self, a: dict[str, Any]) -> dict[str, Any]:
        self._active().alter_topic_configs(str(a["name"]), dict(a["configs"]))
        return {}

    def _rpc_alter_broker_configs(self, a: dict[str, Any]) -> dict[str, Any]:
        self._active().alter_broker_configs(str(a["resource"]), dict(a["configs"]))
        return {}

    def _rpc_alter_group_configs(self, a: dict[str, Any]) -> dict[str, Any]:
        self._active().alter_group_configs(str(a["name"]), dict(a["configs"]))
        return {}

    def _rpc_create_delegation_token(self, a: dict[str, Any]) -> dict[str, Any]:
        owner, requester = delegation_tokens.principals_from_json(a["principals"])
        return delegation_tokens.decision_to_json(self._active().create_delegation_token(
            owner, requester, delegation_tokens.principals_from_json(a["renewers"]),
            int(a["max_lifetime_ms"]), delegation_tokens.settings_from_json(a["settings"]),
            now_ms()))

    def _rpc_renew_delegation_token(self, a: dict[str, Any]) -> dict[str, Any]:
        [principal] = delegation_tokens.principals_from_json(a["principals"])
        return delegation_tokens.decision_to_json(self._active().renew_delegation_token(
            str(a["token_id"]), principal, int(a["period_ms"]),
            delegation_tokens.settings_from_json(a["settings"]), now_ms()))

    def _rpc_expire_delegation_token(self, a: dict[str, Any]) -> dict[str, Any]:
        [principal] = delegation_tokens.principals_from_json(a["principals"])
        return delegation_tokens.decision_to_json(self._active().expire_delegation_token(
            str(a["token_id"]), principal, int(a["period_ms"]), now_ms()))

    def _rpc_unregister_broker(self, a: dict[str, Any]) -> dict[str, Any]:
        self._active().unregister_broker(int(a["broker_id"]))
        return {}

    def _rpc_alter_scram_credentials(self, a: dict[str, Any]) -> dict[str, Any]:
        deletions, upsertions = scram.alterations_from_json(a)
        return {"results": scram.results_to_json(
            self._active().alter_scram_credentials(deletions, upsertions))}

    def _rpc_alter_partition_reassignments(self, a: dict[str, Any]) -> dict[str, Any]:
        results = []
        for topic, partition, target in a["changes"]:
            err, message = self._active().alter_partition_reassignment(
                str(topic), int(partition),
                None if target is None else tuple(int(b) for b in target))
            results.append([str(topic), int(partition), int(err), message])
        return {"results": results}

    def _rpc_elect_leaders(self, a: dict[str, Any]) -> dict[str, Any]:
        results = []
        for topic, partition in a["partitions"]:
            err, message = self._active().elect_leader(str(topic), int(partition),
                                                   bool(a.get("unclean", False)))
            results.append([str(topic), int(partition), int(err), message])
        return {"results": results}

    def _rpc_update_features(self, a: dict[str, Any]) -> dict[str, Any]:
        refusals = self._active().update_features(
            [(str(n), int(level), int(kind)) for n, level, kind in a["updates"]],
            bool(a.get("validate_only", False)))
        return {"refusals": [[name, why] for name, why in refusals]}

    def _rpc_add_raft_voter(self, a: dict[str, Any]) -> dict[str, Any]:
        return self._change_voters(True, a)

    def _rpc_remove_raft_voter(self, a: dict[str, Any]) -> dict[str, Any]:
        return self._change_voters(False, a)

    def _change_voters(self, add: bool, a: dict[str, Any]) -> dict[str, Any]:
        """AddRaftVoter / RemoveRaftVoter (KIP-853) on the quorum leader: the core decides
        (``QuorumCore.add_voter``); the call is answered once the voter set record is committed
        (``_handle`` waits for the log end), as Kafka's leader answers."""
        self._active()
        if self.quorum is None:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "this controller runs alone, without "
                             "a metadata quorum (controller.quorum.voters): its voter set is "
                             "fixed")
        driver = self.quorum.driver
        change = driver.add_voter if add else driver.remove_voter
        error, message, _offset = change(int(a["voter_id"]), str(a.get("directory_id") or ""),
                                         now_ms())
        if error is not ErrorCode.NONE:
            raise KafkaError(error, message)
        return {}

    def _rpc_update_raft_voter(self, a: dict[str, Any]) -> dict[str, Any]:
        """UpdateRaftVoter (82, KIP-853), controller-only: a voter's new controller listener.
        Kafka's leader answers at the append, without waiting for the commit (any controller
        takes the call; a follower answers NOT_LEADER_OR_FOLLOWER, as Kafka's)."""
        if self.quorum is None:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "this controller runs alone, without "
                             "a metadata quorum (controller.quorum.voters)")
        req = UpdateVoterRequest.from_args(a)
        core = self.quorum.core
        refused = request_error(req, core.epoch, is_leader=core.is_leader)
        if refused is None:
            error, message, _offset = self.quorum.driver.update_voter(
                req.voter_id, req.voter_directory_id, req.endpoint, now_ms())
            refused = None if error is ErrorCode.NONE else (error, message)
        if refused is not None:
            raise KafkaError(refused[0], refused[1])
        self.quorum.endpoints_changed()
        return {"leader_id": core.leader_id, "leader_epoch": core.epoch}

    def _rpc_create_acls(self, a: dict[str, Any]) -> dict[str, Any]:
        self._active().create_acls([record_to_acl(r) for r in a["acls"]])
        return {}

    def _rpc_delete_acls(self, a: dict[str, Any]) -> dict[str, Any]:
        matched = self._active().delete_acls([new_filter(*f) for f in a["filters"]])
        return {"matched": [[acl_to_record("", b) for b in m] for m in matched]}

    def _rpc_alter_client_quotas(self, a: dict[str, Any]) -> dict[str, Any]:
        """``entries``: ``client_quota`` records of one alteration (a removal carries
        ``remove``); checked like every record when the logic emits them."""
        by_entity: dict[Any, dict[str, float | None]] = {}
        for rec in a["entries"]:
            e, key, value = record_to_quota(rec)
            by_entity.setdefault(e, {})[key] = value
        self._active().alter_client_quotas(list(by_entity.items()))
        return {}

    def _rpc_allocate_producer_ids(self, a: dict[str, Any]) -> dict[str, Any]:
        first, count = self._active().allocate_producer_ids()
        return {"first": first, "count": count}

    def _rpc_elect_preferred(self, a: dict[str, Any]) -> dict[str, Any]:
        return {"moved": self._active().rebalance_preferred_leaders()}

    def _rpc_quorum(self, a: dict[str, Any]) -> dict[str, Any]:
        if self.quorum is None:
            raise ValueError("this controller does not run a quorum")
        self.quorum.deliver(a)
        self._persist()
        return {}

    def _rpc_describe_quorum(self, a: dict[str, Any]) -> dict[str, Any]:
        if self.quorum is None:  # alone: the only voter, always the leader
            end = self.records_end
            return {"node_id": self.node_id, "role": "leader", "leader_id": self.node_id,
                    "leader_epoch": 0, "high_watermark": end, "log_end_offset": end,
                    "leader_address": None, "voters": [{"voter_id": self.node_id,
                                                        "log_end_offset": end, "lag": 0,
                                                        "last_fetch_ms_ago": None}],
                    "voter_ids": [self.node_id], "active": True, **self._snapshot_facts(),
                    "voter_endpoints": ({str(self.node_id): f"{self.bound_host}:{self.bound_port}"}
                                        if self.bound_port else {}),
                    "brokers": self._broker_progress()}
        return {**self.quorum.describe(), "active": self.logic is not None,
                **self._snapshot_facts(),
                "voter_endpoints": {str(v): address for v in sorted(self.quorum.voters)
                                    if (address := self.quorum.address_of(v)) is not None},
                "brokers": self._broker_progress()}

    def _broker_progress(self) -> list[dict[str, Any]]:
        """The active controller's brokers as DescribeQuorum's observers see them: the metadata
        offset each one's last heartbeat reported, and how long ago that was."""
        if self.logic is None:
            return []
        now = now_ms()
        beats = self.logic.last_heartbeat_ms
        return [{"broker_id": b, "metadata_offset": progress.get("metadata_offset"),
                 "last_heartbeat_ms_ago": now - beats[b] if b in beats else None}
                for b, progress in sorted(self.broker_metadata_progress.items())
                if b in self.image.brokers]

    def _snapshot_facts(self) -> dict[str, Any]:
        sid = self.snapshot[0] if self.snapshot is not None else None
        return {"log_start_offset": self.mlog.log.log_start_offset,
                "snapshot_end_offset": sid.end_offset if sid else None,
                "snapshot_epoch": sid.epoch if sid else None}

    def _rpc_status(self, a: dict[str, Any]) -> dict[str, Any]:
        now = now_ms()
        last_heartbeat = self.logic.last_heartbeat_ms if self.logic is not None else {}
        brokers = [
            {"id": b.broker_id, "broker_epoch": b.broker_epoch, "host": b.host, "port": b.port,
             **({"listeners": [ep.to_record() for ep in b.listeners]} if b.listeners else {}),
             "fenced": b.fenced, "in_controlled_shutdown": b.in_controlled_shutdown,
             "last_heartbeat_ms_ago": now - last_heartbeat.get(b.broker_id, now),
             **self._unapplied_by(b.broker_id),
             **self.broker_metadata_progress.get(b.broker_id, {})}
            for b in sorted(self.image.brokers.values(), key=lambda b: b.broker_id)
        ]
        topics = {
            name: {str(p): {**registration_to_record(name, p, reg),
                            "directories": t.directories_of(p)}
                   for p, reg in sorted(t.partitions.items())}
            for name, t in sorted(self.image.topics.items())
        }
        return {"controller_id": self.node_id, "pid": os.getpid(),
                "cluster_id": self.image.cluster_id, "metadata_offset": self.image.next_offset,
                "metadata_commits": [[end, at_ms] for end, at_ms in self.commits],
                "brokers": brokers, "topics": topics,
                "unclean_elections": self.elections.unclean_leader_elections,
                "active": self.logic is not None,
                "alter_partition": {"requests": self.alter_partition_requests,
                                    "partitions": self.alter_partition_proposals,
                                    "largest": self.alter_partition_largest},
                "unapplied_records": [{"offset": bad.offset, "reason": bad.reason}
                                      for bad in self.unapplied],
                "quorum": self._rpc_describe_quorum({})}

    def _unapplied_by(self, broker_id: int) -> dict[str, Any]:
        """The metadata records a broker reported it could not apply (its last heartbeat)."""
        errors = self.broker_metadata_errors.get(broker_id) or {}
        recent = errors.get("recent") or []
        return {"unapplied_records": [{"offset": int(off), "reason": str(reason)}
                                      for off, reason in recent],
                "unapplied_records_total": int(errors.get("total") or 0)}
