"""The controller process: the I/O shell around ``ControllerLogic`` and the metadata log.

One asyncio loop. Every request (and every timer tick) runs the logic, then the records it
emitted are appended to the metadata log and fsynced, *then* the answer goes out and waiting
``fetch_metadata`` long polls are woken: brokers learn a change within one round trip of its
commit (pull, as KRaft brokers fetch the metadata log; no push channel to keep consistent).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from floodmark.controller import rpc
from floodmark.controller.image import MetadataImage, MetadataRecord, registration_to_record
from floodmark.controller.logic import ControllerConfig, ControllerLogic
from floodmark.controller.metadata_log import MetadataLog
from floodmark.errors import ErrorCode, KafkaError
from floodmark.replication.election import AlterPartitionRequest

log = logging.getLogger(__name__)

TICK_S = 0.1
MAX_FETCH_WAIT_MS = 5000
MAX_RECORDS_PER_FETCH = 10_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ControllerServer:
    def __init__(self, data_dir: str, config: ControllerConfig, node_id: int = 0) -> None:
        self.node_id = node_id
        self.data_dir = data_dir
        self.mlog = MetadataLog(data_dir)
        self.image = MetadataImage()
        self.records: list[MetadataRecord] = []  # index == metadata offset
        for offset, rec in self.mlog.read_all():
            self.image.apply_all([(offset, rec)])
            self.records.append(rec)
        self._changed: asyncio.Event | None = None  # created in serve() (needs the loop)
        self.logic = ControllerLogic(self.image, config)
        self.logic.bootstrap()
        self.logic.start(now_ms())
        self._persist()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._stopping: asyncio.Event | None = None
        self.bound_port = 0
        log.info("controller %d loaded metadata log: %d records, %d brokers, %d topics",
                 node_id, len(self.records), len(self.image.brokers), len(self.image.topics))

    # -- persistence ---------------------------------------------------------------------------
    def _persist(self) -> None:
        pending = self.logic.take_pending()
        if not pending:
            return
        self.mlog.append(pending)
        self.records.extend(rec for _, rec in pending)
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()

    def records_from(self, offset: int) -> list[list[Any]]:
        offset = max(0, offset)
        end = min(len(self.records), offset + MAX_RECORDS_PER_FETCH)
        return [[i, self.records[i]] for i in range(offset, end)]

    # -- serving -------------------------------------------------------------------------------
    async def serve(self, host: str, port: int, ready: Callable[[int], None] | None = None) -> None:
        self._changed = asyncio.Event()
        self._stopping = asyncio.Event()
        self._server = await asyncio.start_server(self._on_connection, host, port)
        self.bound_port = self._server.sockets[0].getsockname()[1]
        log.info("controller %d listening on %s:%d", self.node_id, host, self.bound_port)
        ticker = asyncio.create_task(self._ticker())
        if ready is not None:
            ready(self.bound_port)
        await self._stopping.wait()
        ticker.cancel()
        self._server.close()
        for writer in list(self._writers):
            writer.close()  # their handlers see EOF and end, even one that missed a cancel
        self.mlog.close()
        log.info("controller %d stopped", self.node_id)

    def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                self.logic.tick(now_ms())
            except Exception:
                # Records emitted before the failure are applied and consistent: persist them
                # and keep ticking (a dead ticker would never fence anyone again).
                log.exception("controller %d tick failed", self.node_id)
            self._persist()

    async def _on_connection(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while self._stopping is None or not self._stopping.is_set():
                req = await rpc.read_frame(reader)
                if req is None:
                    break
                answer = await self._handle(req)
                writer.write(rpc.encode(answer))
                await writer.drain()
        except (rpc.RpcError, ValueError, ConnectionError) as exc:
            log.warning("controller connection dropped: %s", exc)
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _handle(self, req: dict[str, Any]) -> dict[str, Any]:
        rid = req.get("id")
        method = str(req.get("method"))
        args = req.get("args") or {}
        if method != "fetch_metadata":
            return {"id": rid, **self.call(method, args)}
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
        try:
            result = handler(args)
            self._persist()
            if "from_offset" in args:
                result["records"] = self.records_from(int(args["from_offset"]))
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
        if offset >= len(self.records) and wait_ms > 0 and self._changed is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait_ms / 1000)
        return {"records": self.records_from(offset), "end": len(self.records)}

    # -- methods -------------------------------------------------------------------------------
    def _rpc_register(self, a: dict[str, Any]) -> dict[str, Any]:
        epoch = self.logic.register_broker(int(a["broker_id"]), str(a["host"]), int(a["port"]),
                                           str(a["incarnation"]), now_ms(),
                                           clean_shutdown=bool(a.get("clean_shutdown", True)))
        return {"broker_epoch": epoch}

    def _rpc_heartbeat(self, a: dict[str, Any]) -> dict[str, Any]:
        ans = self.logic.heartbeat(int(a["broker_id"]), int(a["broker_epoch"]), now_ms(),
                                   bool(a.get("want_shutdown", False)))
        return {"error": int(ans.error), "fenced": ans.fenced,
                "shutdown_ready": ans.shutdown_ready, "end": self.image.next_offset}

    def _rpc_alter_partition(self, a: dict[str, Any]) -> dict[str, Any]:
        request = AlterPartitionRequest(
            broker_id=int(a["broker_id"]), broker_epoch=int(a["broker_epoch"]),
            leader_epoch=int(a["leader_epoch"]), partition_epoch=int(a["partition_epoch"]),
            new_isr=tuple(int(r) for r in a["new_isr"]),
            new_isr_broker_epochs=tuple(int(e) for e in a["new_isr_broker_epochs"]),
            leader_recovered=bool(a.get("leader_recovered", False)),
        )
        topic, partition = str(a["topic"]), int(a["partition"])
        error, reg = self.logic.alter_partition(topic, partition, request)
        return {"error": int(error),
                "registration": registration_to_record(topic, partition, reg) if reg else None}

    def _rpc_create_topic(self, a: dict[str, Any]) -> dict[str, Any]:
        assignments = a.get("assignments")
        self.logic.create_topic(str(a["name"]), int(a["num_partitions"]),
                                int(a["replication_factor"]), dict(a.get("configs") or {}),
                                validate_only=bool(a.get("validate_only", False)),
                                assignments=None if assignments is None else [
                                    tuple(int(b) for b in r) for r in assignments])
        return {}

    def _rpc_delete_topic(self, a: dict[str, Any]) -> dict[str, Any]:
        self.logic.delete_topic(str(a["name"]))
        return {}

    def _rpc_create_partitions(self, a: dict[str, Any]) -> dict[str, Any]:
        assignments = a.get("assignments")
        self.logic.create_partitions(str(a["name"]), int(a["count"]),
                                     validate_only=bool(a.get("validate_only", False)),
                                     assignments=None if assignments is None else [
                                         tuple(int(b) for b in r) for r in assignments])
        return {}

    def _rpc_alter_topic_configs(self, a: dict[str, Any]) -> dict[str, Any]:
        self.logic.alter_topic_configs(str(a["name"]), dict(a["configs"]))
        return {}

    def _rpc_alter_broker_configs(self, a: dict[str, Any]) -> dict[str, Any]:
        self.logic.alter_broker_configs(str(a["resource"]), dict(a["configs"]))
        return {}

    def _rpc_alter_partition_reassignments(self, a: dict[str, Any]) -> dict[str, Any]:
        results = []
        for topic, partition, target in a["changes"]:
            err, message = self.logic.alter_partition_reassignment(
                str(topic), int(partition),
                None if target is None else tuple(int(b) for b in target))
            results.append([str(topic), int(partition), int(err), message])
        return {"results": results}

    def _rpc_elect_leaders(self, a: dict[str, Any]) -> dict[str, Any]:
        results = []
        for topic, partition in a["partitions"]:
            err, message = self.logic.elect_leader(str(topic), int(partition),
                                                   bool(a.get("unclean", False)))
            results.append([str(topic), int(partition), int(err), message])
        return {"results": results}

    def _rpc_allocate_producer_ids(self, a: dict[str, Any]) -> dict[str, Any]:
        first, count = self.logic.allocate_producer_ids()
        return {"first": first, "count": count}

    def _rpc_elect_preferred(self, a: dict[str, Any]) -> dict[str, Any]:
        return {"moved": self.logic.rebalance_preferred_leaders()}

    def _rpc_status(self, a: dict[str, Any]) -> dict[str, Any]:
        now = now_ms()
        brokers = [
            {"id": b.broker_id, "broker_epoch": b.broker_epoch, "host": b.host, "port": b.port,
             "fenced": b.fenced, "in_controlled_shutdown": b.in_controlled_shutdown,
             "last_heartbeat_ms_ago": now - self.logic.last_heartbeat_ms.get(b.broker_id, now)}
            for b in sorted(self.image.brokers.values(), key=lambda b: b.broker_id)
        ]
        topics = {
            name: {str(p): registration_to_record(name, p, reg)
                   for p, reg in sorted(t.partitions.items())}
            for name, t in sorted(self.image.topics.items())
        }
        return {"controller_id": self.node_id, "pid": os.getpid(),
                "cluster_id": self.image.cluster_id, "metadata_offset": self.image.next_offset,
                "brokers": brokers, "topics": topics,
                "unclean_elections": self.logic.unclean_elections}
