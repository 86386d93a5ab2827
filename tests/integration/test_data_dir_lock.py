"""Kafka's ``.lock`` file: a second broker or controller process on a data directory that a
running process holds exits at once with one line, and changes nothing; the lock is free again
as soon as the holder ends, even by SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, BrokerProcess

pytestmark = pytest.mark.integration


def _run(args: list[str], timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=timeout_s, check=False, cwd=str(REPO), env=env)


def _listing(path: Path) -> dict[str, int]:
    return {str(p.relative_to(path)): p.stat().st_size for p in sorted(path.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def _assert_refused(out: subprocess.CompletedProcess[str], data_dir: Path, holder: int) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr  # one line, no traceback
    assert str(data_dir) in lines[0] and "in use by another process" in lines[0]
    assert f"pid {holder}" in lines[0]
    assert "listening" not in out.stdout


def test_second_broker_on_a_data_dir_exits_at_once(tmp_path: Path) -> None:
    data = tmp_path / "data-quorum11"
    # The holder's own periodic writes (checkpoints) are put off for the test, so that any
    # change to the listing is the refused process's doing, however slowly it starts.
    first = BrokerProcess(data, ["--set", "log.checkpoint.interval.ms=3600000",
                                 "--set", "log.retention.check.interval.ms=3600000"]).start()
    try:
        assert first.proc is not None
        before = _listing(data)
        # It exits while the holder still runs: it never waits for the lock (a waiting process
        # would run into _run's timeout).
        out = _run(["floodmark.cli", "broker", "--data-dir", str(data),
                    "--listen", "127.0.0.1:0"])
        _assert_refused(out, data, first.proc.pid)
        assert _listing(data) == before  # the refused process touched nothing
        # The first broker still serves.
        probe = _run(["floodmark.cli", "topic", "list", "--bootstrap-server", first.bootstrap])
        assert probe.returncode == 0, probe.stderr
        # SIGKILL leaves no stale lock: the kernel releases it with the process.
        first.stop(signal.SIGKILL)
        again = BrokerProcess(data).start()
        again.stop()
    finally:
        first.stop()


def test_second_controller_on_a_data_dir_exits_at_once(tmp_path: Path) -> None:
    data = tmp_path / "controller-quorum11"
    log = (tmp_path / "controller.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "floodmark.controller", "--data-dir",
                             str(data), "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=log, cwd=str(REPO), env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert proc.stdout is not None
        assert b"listening on" in proc.stdout.readline()
        out = _run(["floodmark.controller", "--data-dir", str(data), "--listen", "127.0.0.1:0"])
        _assert_refused(out, data, proc.pid)
        # A cluster broker in combined mode on the same controller directory is refused too.
        member = _run(["floodmark.broker.cluster_member", "--node-id", "1", "--controller",
                       "127.0.0.1:1", "--data-dir", str(tmp_path / "broker-quorum11"),
                       "--controller-data-dir", str(data)])
        _assert_refused(member, data, proc.pid)
        assert proc.poll() is None  # the holder runs on
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
        if proc.stdout is not None:
            proc.stdout.close()
    # Stopped cleanly: the next controller takes the directory.
    out = subprocess.Popen([sys.executable, "-m", "floodmark.controller", "--data-dir",
                            str(data), "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, cwd=str(REPO))
    try:
        assert out.stdout is not None
        assert b"listening on" in out.stdout.readline()
    finally:
        out.send_signal(signal.SIGTERM)
        out.wait(20)
        if out.stdout is not None:
            out.stdout.close()
