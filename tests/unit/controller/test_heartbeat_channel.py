"""A broker's heartbeat does not wait behind its other calls to the controller: it has its own
connection (Kafka's BrokerLifecycleManager has its own channel). On one shared connection, one
request at a time, a heartbeat queued behind hundreds of AlterPartition calls (each answered
once the quorum commits it) waited minutes, and the controller fenced a live broker."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from floodmark.controller import rpc
from floodmark.controller.client import ControllerClient

SLOW_S = 3.0


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers ``heartbeat`` at once and every other call after ``SLOW_S``, one at a time per
    connection (as a real controller answers each connection's requests in order)."""
    while (request := await rpc.read_frame(reader)) is not None:
        if request["method"] != "heartbeat":
            await asyncio.sleep(SLOW_S)
        answer: dict[str, Any] = {"id": request["id"], "result": {"error": 0, "end": 0}}
        writer.write(rpc.encode(answer))
        await writer.drain()
    writer.close()


def test_a_heartbeat_is_answered_while_other_calls_wait() -> None:
    async def main() -> float:
        server = await asyncio.start_server(_serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = ControllerClient(f"127.0.0.1:{port}", 1)
        slow = [asyncio.create_task(client.control.call("alter_partition", {}, 30))
                for _ in range(3)]
        await asyncio.sleep(0.2)  # the first is on the wire, two queued behind it
        started = time.monotonic()
        answer = await client.heartbeat(timeout_s=SLOW_S / 2)
        took = time.monotonic() - started
        assert answer["error"] == 0
        assert not any(t.done() for t in slow)  # still queued on the other connection
        for t in slow:
            t.cancel()
        client.close()
        server.close()
        return took

    assert asyncio.run(main()) < SLOW_S / 2
