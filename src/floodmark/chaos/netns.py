"""A small lab of network namespaces: one host per node on a private bridge, and network faults
between them with iptables inside each host's own namespace (the machine's own network is never
touched).

    with Lab(["c", "n0", "n1", "n2", "n3"]) as lab:      # needs root
        proc = lab.popen("n1", [sys.executable, "-m", ...])
        lab.isolate("n1", ["n0", "n2", "n3"])            # n1 still reaches and is reached by c
        lab.heal("n1")

Every host gets ``10.<net>.0.<k>`` on a bridge that lives in a namespace of its own; names are
unique per lab (an optional prefix, the process id and a counter), so concurrent labs do not
collide, and ``close``
removes every namespace (and with them veths, the bridge and the iptables rules) even after a
failure. A partition drops packets in both directions in the isolated host's namespace (INPUT by
source, OUTPUT by destination), so connections stall as in a real network split rather than being
refused.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import itertools
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from floodmark.errors import FloodmarkError

_COUNTER = itertools.count(1)
_CLONE_NEWNET = 0x40000000


class LabError(FloodmarkError, RuntimeError):
    """The lab cannot be built here (not root, no iproute2/iptables)."""


def _run(*args: str) -> None:
    done = subprocess.run(list(args), capture_output=True, text=True)
    if done.returncode != 0:
        raise LabError(f"{' '.join(args)}: {done.stderr.strip() or done.returncode}")


def check_available() -> None:
    """Raise LabError with a one-line reason if namespaces cannot be made here."""
    if os.geteuid() != 0:
        raise LabError("network namespaces need root")
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            raise LabError(f"{tool} is not installed (apt-get install iproute2 iptables)")


class Lab:
    def __init__(self, hosts: Sequence[str], prefix: str = "fm") -> None:
        check_available()
        # FLOODMARK_LAB_PREFIX: a tag before every name, so people sharing a machine tell their
        # namespaces apart.
        tag = os.environ.get("FLOODMARK_LAB_PREFIX", "")
        self.id = f"{tag}{prefix}{os.getpid() % 10000}x{next(_COUNTER)}"
        self.net = 100 + (os.getpid() + next(_COUNTER)) % 150
        self.hosts = list(hosts)
        self.address = {h: f"10.{self.net}.0.{i + 2}" for i, h in enumerate(self.hosts)}
        self.bridge_ns = f"{self.id}-br"
        self._made: list[str] = []
        self._isolated: dict[str, list[str]] = {}

    def ns(self, host: str) -> str:
        return f"{self.id}-{host}"

    # -- lifecycle --------------------------------------------------------------------------
    def open(self) -> Lab:
        try:
            _run("ip", "netns", "add", self.bridge_ns)
            self._made.append(self.bridge_ns)
            _run("ip", "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
            _run("ip", "-n", self.bridge_ns, "link", "set", "br0", "up")
            for i, host in enumerate(self.hosts):
                ns = self.ns(host)
                _run("ip", "netns", "add", ns)
                self._made.append(ns)
                outside = f"v{i}"
                _run("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name",
                     outside, "netns", self.bridge_ns)
                _run("ip", "-n", self.bridge_ns, "link", "set", outside, "master", "br0")
                _run("ip", "-n", self.bridge_ns, "link", "set", outside, "up")
                _run("ip", "-n", ns, "addr", "add", f"{self.address[host]}/24", "dev", "eth0")
                _run("ip", "-n", ns, "link", "set", "eth0", "up")
                _run("ip", "-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        self._made.clear()

    def __enter__(self) -> Lab:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- processes --------------------------------------------------------------------------
    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host), *argv]

    def popen(self, host: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start a process inside ``host``'s namespace (``ip netns exec`` execs, so the pid is
        the process's own)."""
        return subprocess.Popen(self.command(host, argv), **kwargs)

    # -- faults -----------------------------------------------------------------------------
    def isolate(self, host: str, peers: Sequence[str]) -> None:
        """Drop every packet between ``host`` and each of ``peers``; others still reach it."""
        ns = self.ns(host)
        for peer in peers:
            address = self.address[peer]
            _run("ip", "netns", "exec", ns, "iptables", "-A", "INPUT", "-s", address, "-j", "DROP")
            _run("ip", "netns", "exec", ns, "iptables", "-A", "OUTPUT", "-d", address, "-j",
                 "DROP")
        self._isolated.setdefault(host, []).extend(peers)

    def split(self, side_a: Sequence[str], side_b: Sequence[str]) -> None:
        """Drop every packet between any host of ``side_a`` and any host of ``side_b``."""
        for host in side_a:
            self.isolate(host, [peer for peer in side_b if peer != host])

    @property
    def isolated(self) -> dict[str, list[str]]:
        """host -> the peers it is cut from (rules installed in its namespace)."""
        return {h: list(p) for h, p in self._isolated.items()}

    def heal(self, host: str | None = None) -> None:
        for name in [host] if host is not None else list(self._isolated):
            _run("ip", "netns", "exec", self.ns(name), "iptables", "-F")
            self._isolated.pop(name, None)


def enter_namespace(netns_name: str) -> None:
    """Move the calling thread into the network namespace ``netns_name`` (``setns`` applies to
    the calling thread only): sockets it opens from then on belong to that namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{netns_name}", os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise LabError(f"setns {netns_name}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def namespace_executor(netns_name: str) -> concurrent.futures.ThreadPoolExecutor:
    """One thread that lives in ``netns_name``, so a supervisor in the machine's own namespace
    can talk to hosts of the lab without touching the host network."""
    return concurrent.futures.ThreadPoolExecutor(
        max_workers=1, initializer=enter_namespace, initargs=(netns_name,),
        thread_name_prefix=f"netns-{netns_name}")


def run_in(executor: concurrent.futures.ThreadPoolExecutor, fn: Callable[[], Any],
           timeout_s: float) -> Any:
    return executor.submit(fn).result(timeout_s)
