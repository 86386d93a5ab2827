"""Ports chosen before a server starts, for the servers that must be told theirs in advance (a
controller quorum's voters, a real Kafka node's listeners, a Prometheus server in a test).

Binding port 0, reading the port and closing the socket is racy: the kernel may hand the same
port to any other socket that asks for "any port" (another test's broker bound to port 0, an
outgoing connection) before our server binds it. ``free_port`` avoids both kinds of neighbour:

- it hands out ports *below* the kernel's ephemeral range
  (``/proc/sys/net/ipv4/ip_local_port_range``), which the kernel never picks on its own;
- each process takes a block of ``BLOCK_PORTS`` ports under an exclusive ``flock`` on a file
  named after the block (held until the process ends), so two processes using this module
  (parallel test workers, the helpers' test runs on one machine) never share a block;
- inside its blocks a process hands out each port once, skipping any that is already bound.

A server that can bind port 0 itself and report the port (``floodmark broker --listen :0``
prints ``listening on HOST:PORT``) needs none of this. Where the platform has no ephemeral
range file or no ``flock``, ``free_port`` falls back to the kernel's choice (port 0).
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
import threading
from pathlib import Path
from typing import IO

BLOCK_PORTS = 100
LOWEST_PORT = 10_000
"""Below this are well-known services' customary ports; the pool is LOWEST_PORT up to the
ephemeral range."""
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


class _Pool:
    """This process's blocks and the next port in the current one."""

    def __init__(self) -> None:
        self.pid = os.getpid()  # a forked child starts a pool of its own
        self.lock = threading.Lock()
        self.held: list[IO[bytes]] = []  # one open, flocked file per block (kept: the lock)
        self.next_port = 0
        self.end_port = 0  # exclusive end of the current block
        self.tried_blocks: set[int] = set()


_POOL = _Pool()


def _pool_range() -> tuple[int, int] | None:
    """[low, high) of the ports below the ephemeral range, or None when there is no room."""
    try:
        ephemeral_low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if ephemeral_low - LOWEST_PORT < BLOCK_PORTS:
        return None
    return LOWEST_PORT, ephemeral_low


def _lock_dir() -> Path:
    path = Path(tempfile.gettempdir()) / f"floodmark-ports-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _take_block(low: int, high: int) -> bool:
    """Lock a block no other process holds; start handing out its ports. False: none left."""
    import fcntl

    blocks = (high - low) // BLOCK_PORTS
    start = (os.getpid() * 7919) % blocks  # spread processes over the pool; the lock decides
    for i in range(blocks):
        block = (start + i) % blocks
        if block in _POOL.tried_blocks:
            continue
        _POOL.tried_blocks.add(block)
        first = low + block * BLOCK_PORTS
        handle = open(_lock_dir() / f"{first}", "ab")  # noqa: SIM115 - held for the process
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _POOL.held.append(handle)
        _POOL.next_port, _POOL.end_port = first, first + BLOCK_PORTS
        return True
    return False


def _bindable(host: str, port: int) -> bool:
    """Can a server bind ``host:port`` now (as servers do, with SO_REUSEADDR)? False when the
    port is in use; ``OSError`` when the host cannot be bound at all."""
    family, _type, _proto, _name, sockaddr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM)[0]
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            return False
        raise
    return True


def _kernel_choice(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that no server listens on and that this machine hands to nobody else
    (see the module's notes). ``OSError`` when ``host`` cannot be bound at all."""
    global _POOL
    span = _pool_range()
    if span is None:
        return _kernel_choice(host)
    if _POOL.pid != os.getpid():  # the parent's blocks stay the parent's (its flocks hold)
        _POOL = _Pool()
    with _POOL.lock:
        while True:
            if _POOL.next_port >= _POOL.end_port:
                try:
                    took = _take_block(*span)
                except (ImportError, OSError):  # no flock, or no lock directory: the kernel's
                    return _kernel_choice(host)
                if not took:  # every block taken or handed out: the kernel's choice
                    return _kernel_choice(host)
            port = _POOL.next_port
            _POOL.next_port += 1
            if _bindable(host, port):
                return port
