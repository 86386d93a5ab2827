"""A broker's process dies while its metadata long poll waits at the controller: the controller
sees that connection end at once (not when the poll would have answered, up to 5 s later) and
fences the broker then. This was most of a SIGKILLed leader's failover time: the poll held the
broker's last connection open for the rest of its wait (0-2 s with the broker's 2 s polls).
A real controller server over real sockets; the session timeout is a minute, so only the closed
connections can fence."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from floodmark.controller import rpc
from floodmark.controller.logic import ControllerConfig
from floodmark.controller.server import MAX_FETCH_WAIT_MS, ControllerServer

pytestmark = pytest.mark.integration


async def _call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, rid: int,
                method: str, args: dict[str, Any]) -> dict[str, Any]:
    writer.write(rpc.encode({"id": rid, "method": method, "args": args}))
    await writer.drain()
    answer = await rpc.read_frame(reader)
    assert answer is not None
    return answer


async def _scenario(data_dir: Path) -> tuple[float, float]:
    server = ControllerServer(str(data_dir), ControllerConfig(broker_session_timeout_ms=60_000))
    ports: list[int] = []
    serving = asyncio.create_task(server.serve("127.0.0.1", 0, ports.append))
    try:
        while not ports:
            await asyncio.sleep(0.01)
        control = await asyncio.open_connection("127.0.0.1", ports[0])
        poll = await asyncio.open_connection("127.0.0.1", ports[0])
        reg = await _call(*control, 1, "register", {"broker_id": 1, "host": "127.0.0.1",
                                                    "port": 9, "incarnation": "ctl11",
                                                    "clean_shutdown": True})
        epoch = int(reg["result"]["broker_epoch"])
        beat = await _call(*control, 2, "heartbeat", {"broker_id": 1, "broker_epoch": epoch})
        assert "result" in beat, beat
        assert server.image.brokers[1].fenced is False
        # The poll connection speaks for the broker (an answered poll), then waits.
        first = await _call(*poll, 3, "fetch_metadata", {"offset": 0, "max_wait_ms": 0,
                                                         "broker_id": 1, "broker_epoch": epoch})
        end = int(first["result"]["end"])
        poll[1].write(rpc.encode({"id": 4, "method": "fetch_metadata", "args": {
            "offset": end, "max_wait_ms": MAX_FETCH_WAIT_MS, "broker_id": 1,
            "broker_epoch": epoch}}))
        await poll[1].drain()
        await asyncio.sleep(0.2)  # the poll is waiting at the controller
        # The process dies: the kernel closes both connections.
        closed_at = time.monotonic()
        control[1].close()
        poll[1].close()
        deadline = closed_at + MAX_FETCH_WAIT_MS / 1000 + 5
        while not server.image.brokers[1].fenced and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert server.image.brokers[1].fenced, "never fenced"
        return time.monotonic() - closed_at, MAX_FETCH_WAIT_MS / 1000 - 0.2
    finally:
        server.stop()
        await asyncio.wait_for(serving, 10)


def test_dead_broker_fenced_before_its_long_poll_would_answer(tmp_path: Path) -> None:
    fenced_after_s, poll_left_s = asyncio.run(_scenario(tmp_path / "ctl-ctl11"))
    # Before the fix the fence waited for the poll's answer: never sooner than poll_left_s.
    assert fenced_after_s < poll_left_s / 2, (fenced_after_s, poll_left_s)


async def _probe_scenario(data_dir: Path) -> tuple[bool, float]:
    """A broker whose connections all close while its port still accepts (alive: a client
    library reconnecting, a slow restart of its calls) is not fenced for it; once its port
    refuses (the process is gone) the next close fences it at once."""
    server = ControllerServer(str(data_dir), ControllerConfig(broker_session_timeout_ms=60_000))
    ports: list[int] = []
    serving = asyncio.create_task(server.serve("127.0.0.1", 0, ports.append))
    broker_port = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)
    try:
        while not ports:
            await asyncio.sleep(0.01)
        port = broker_port.sockets[0].getsockname()[1]
        control = await asyncio.open_connection("127.0.0.1", ports[0])
        reg = await _call(*control, 1, "register", {"broker_id": 1, "host": "127.0.0.1",
                                                    "port": port, "incarnation": "probe11",
                                                    "clean_shutdown": True})
        epoch = int(reg["result"]["broker_epoch"])
        assert "result" in await _call(*control, 2, "heartbeat",
                                       {"broker_id": 1, "broker_epoch": epoch})
        control[1].close()
        # Every probe of the schedule finds the port accepting (wait for the probe to end).
        deadline = time.monotonic() + 30
        while not server._probes and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        while server._probes and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        alive_fenced = server.image.brokers[1].fenced

        again = await asyncio.open_connection("127.0.0.1", ports[0])
        assert "result" in await _call(*again, 3, "heartbeat",
                                       {"broker_id": 1, "broker_epoch": epoch})
        broker_port.close()
        await broker_port.wait_closed()
        closed_at = time.monotonic()
        again[1].close()
        while not server.image.brokers[1].fenced and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert server.image.brokers[1].fenced, "never fenced"
        return alive_fenced, time.monotonic() - closed_at
    finally:
        broker_port.close()
        server.stop()
        await asyncio.wait_for(serving, 10)


def test_a_closed_connection_fences_only_a_broker_whose_port_refuses(tmp_path: Path) -> None:
    alive_fenced, fenced_after_s = asyncio.run(_probe_scenario(tmp_path / "probe-ctl11"))
    assert alive_fenced is False  # before: fenced 0.1 s after its connections closed
    assert fenced_after_s < 5, fenced_after_s  # not the 60 s session timeout
