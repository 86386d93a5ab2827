"""``floodmark.ports.free_port``: ports below the kernel's ephemeral range, each handed out once,
never one that is in use, and never the same to two processes (each holds its own block)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from floodmark import ports


def _ephemeral_low() -> int:
    return int(ports.EPHEMERAL_RANGE.read_text().split()[0])


pytestmark = pytest.mark.skipif(not ports.EPHEMERAL_RANGE.exists(),
                                reason="no ephemeral port range file (not Linux)")


def test_ports_are_outside_the_kernel_choices_distinct_and_bindable() -> None:
    got = [ports.free_port() for _ in range(2 * ports.BLOCK_PORTS + 5)]  # crosses blocks
    assert len(set(got)) == len(got)
    assert all(ports.LOWEST_PORT <= p < _ephemeral_low() for p in got)
    with socket.create_server(("127.0.0.1", got[-1])):
        pass


def test_a_port_in_use_is_skipped() -> None:
    ports.free_port()  # a block is held
    busy = ports._POOL.next_port
    if busy >= ports._POOL.end_port:
        pytest.skip("the block just ran out")
    try:
        server = socket.create_server(("127.0.0.1", busy))
    except OSError:
        pytest.skip("someone else has that port")
    with server:
        assert ports.free_port() != busy


def test_two_processes_never_share_a_port() -> None:
    mine = {ports.free_port() for _ in range(10)}
    code = ("from floodmark import ports\n"
            "print(' '.join(str(ports.free_port()) for _ in range(10)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    theirs = {int(p) for p in proc.stdout.split()}
    assert len(theirs) == 10
    assert not mine & theirs
    blocks = {(p - ports.LOWEST_PORT) // ports.BLOCK_PORTS for p in mine}
    assert not blocks & {(p - ports.LOWEST_PORT) // ports.BLOCK_PORTS for p in theirs}


def test_without_a_range_file_the_kernel_chooses(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", tmp_path / "absent")
    port = ports.free_port()
    with socket.create_server(("127.0.0.1", port)):
        pass


def test_an_address_not_of_this_machine_is_an_error() -> None:
    with pytest.raises(OSError):
        ports.free_port("192.0.2.1")  # TEST-NET-1: never a local address
