"""Shared fixtures: a real floodmark broker in a subprocess, on a free port.

- ``BrokerProcess``: start/stop/kill/restart a ``floodmark broker`` process over one data dir.
  It binds ``127.0.0.1:0`` and reads the bound port from the broker's first stdout line, so
  concurrently running test sessions never collide on ports.
- ``broker`` (module scope): one broker per test module, ``broker.bootstrap`` is "127.0.0.1:PORT".
- ``broker_factory`` (function scope): start any number of brokers with extra flags; all are
  stopped at the end of the test.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from floodmark import lifeline

REPO = Path(__file__).resolve().parents[1]
_LISTENING = re.compile(r"listening on (\S+):(\d+)")


class BrokerProcess:
    def __init__(self, data_dir: Path, extra_args: list[str] | None = None,
                 log_path: Path | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.extra_args = list(extra_args or [])
        self.log_path = log_path or self.data_dir.with_name(self.data_dir.name + ".log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None

    @property
    def bootstrap(self) -> str:
        assert self.port is not None, "broker not started"
        return f"127.0.0.1:{self.port}"

    def start(self, port: int = 0, timeout_s: float = 30.0) -> BrokerProcess:
        """Start the broker; on restart pass the previous port to keep clients' address valid."""
        env = lifeline.supervised_env(dict(os.environ))  # dies with this test run
        env.setdefault("PYTHONUNBUFFERED", "1")
        cmd = [sys.executable, "-m", "floodmark.cli", "broker", "--data-dir", str(self.data_dir),
               "--listen", f"127.0.0.1:{port}", *self.extra_args]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log, env=env,
                                     cwd=str(REPO))
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        line = b""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = _LISTENING.search(line.decode(errors="replace"))
            if m:
                self.port = int(m.group(2))
                return self
        self.kill()
        raise RuntimeError(f"broker did not start (last line {line!r}); log: {self.log_path}\n"
                           + self.log_path.read_text(errors="replace")[-3000:])

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> int | None:
        """Clean shutdown (SIGTERM by default); returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        code = self.proc.returncode
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
        self.proc = None
        return code

    def kill(self) -> None:
        """Crash: SIGKILL, no checkpoints (recovery must cope)."""
        self.stop(signal.SIGKILL)

    def restart(self, *, crash: bool = False) -> BrokerProcess:
        port = self.port or 0
        if crash:
            self.kill()
        else:
            self.stop()
        return self.start(port=port)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


# -- parallel runs (pytest-xdist, ``./dev test``) -------------------------------------------------
# Every test picks its own ports (bind to port 0) and data directories (tmp_path), so tests run
# on several workers at once. Tests that share one costly process per session are sent to one
# worker (``--dist loadgroup``), so a run starts it once, not once per worker: the fixture a test
# uses names its group.
SHARED_SESSION_GROUPS = {
    "spark": "spark",                    # one local SparkSession (a JVM, 2 GiB of driver memory)
    "kafka_broker": "kafka_reference",   # the real Apache Kafka (a JVM; tests/reference)
}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its own modifyitems)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        for fixture, group in SHARED_SESSION_GROUPS.items():
            if fixture in names:
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    yield b
    b.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[object]:
    started: list[BrokerProcess] = []

    def make(*extra_args: str, name: str = "data") -> BrokerProcess:
        b = BrokerProcess(tmp_path / f"{name}{len(started)}", list(extra_args)).start()
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()
