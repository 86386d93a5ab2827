"""``BrokerProcess``: one ``floodmark broker`` process (broker and controller in one process)
over one data directory, supervised from Python.

The one launcher of a single broker: the project's tests (``tests/conftest.py``) and
``floodmark.testing.EmbeddedBroker`` both use it. It binds ``127.0.0.1:0`` (any free port)
and learns the bound port from the broker's first stdout line (``floodmark broker listening on
HOST:PORT``), so concurrent runs never collide on ports; a restart asks for the same port
again, so the clients' bootstrap address stays valid. stdout stays a pipe the caller may read
further (the listener lines of a broker with several listeners); stderr (the broker's log) is
appended to ``log_path``. The process dies with the process that started it
(``floodmark.lifeline``).
"""

from __future__ import annotations

import re
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

from floodmark.cluster.node_env import node_env
from floodmark.cluster.waiting import LIMIT_S, STALL_MS, Stalled, process_progress, wait_progress
from floodmark.errors import FloodmarkError

_LISTENING = re.compile(r"listening on (\S+):(\d+)")


class BrokerStartError(FloodmarkError, RuntimeError):
    """The broker process ended, or stopped making progress, before it was listening; the
    message names the log (its tail is attached as a note)."""


class BrokerProcess:
    def __init__(self, data_dir: Path | str, extra_args: list[str] | None = None,
                 log_path: Path | None = None, *, cwd: Path | str | None = None) -> None:
        """``extra_args``: more ``floodmark broker`` flags (``--set NAME=VALUE``, ...);
        ``log_path``: the broker's stderr (default: ``<data_dir>.log`` beside it)."""
        self.data_dir = Path(data_dir)
        self.extra_args = list(extra_args or [])
        self.log_path = log_path or self.data_dir.with_name(self.data_dir.name + ".log")
        self.cwd = None if cwd is None else str(cwd)
        self.proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        assert self.port is not None, "broker not started"
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def start(self, port: int = 0, timeout_s: float = LIMIT_S, *,
              stall_ms: int = STALL_MS) -> BrokerProcess:
        """Start the broker and return once it listens; on restart pass the previous port to
        keep clients' address valid. Fails (the process killed) when it exits first, shows no
        progress (no output, no CPU time) for ``stall_ms``, or is still starting after
        ``timeout_s``."""
        env = node_env()  # dies with this process; imports this process's floodmark
        cmd = [sys.executable, "-m", "floodmark.cli", "broker", "--data-dir", str(self.data_dir),
               "--listen", f"127.0.0.1:{port}", *self.extra_args]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log, env=env,
                                stdin=subprocess.DEVNULL, cwd=self.cwd)
        self.proc = proc
        assert proc.stdout is not None
        stdout = proc.stdout
        seen: list[bytes] = []

        def listening() -> tuple[int] | None:
            # The first stdout line is the listening line (the log goes to stderr); select
            # first, so a broker that prints nothing cannot block the wait.
            readable, _, _ = select.select([stdout], [], [], 0.05)
            if not readable:
                return None
            line = stdout.readline()
            if not line:  # stdout closed: the process ended
                raise BrokerStartError("exited before listening")
            seen.append(line)
            m = _LISTENING.search(line.decode(errors="replace"))
            return (int(m.group(2)),) if m else None

        try:
            (self.port,) = wait_progress(
                listening, lambda: {**process_progress(proc.pid, self.log_path),
                                    "stdout lines": len(seen)},
                what="floodmark broker starting", stall_ms=stall_ms, limit_s=timeout_s,
                step_s=0.0)
            return self
        except (Stalled, BrokerStartError) as exc:
            reason = str(exc)
        self.kill()
        error = BrokerStartError(f"broker did not start: {reason} (last stdout line "
                                 f"{seen[-1] if seen else b''!r}); log: {self.log_path}")
        error.add_note(self.log_text()[-3000:])
        raise error

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> int | None:
        """Clean shutdown (SIGTERM by default: checkpoints written); SIGKILL after
        ``timeout_s``. Returns the exit code."""
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
        if self._log is not None:
            self._log.close()
            self._log = None
        self.proc = None
        return code

    def kill(self) -> None:
        """Crash: SIGKILL, no checkpoints (recovery must cope)."""
        self.stop(signal.SIGKILL)

    def restart(self, *, crash: bool = False) -> BrokerProcess:
        """Stop (``crash``: SIGKILL) and start again on the same port."""
        port = self.port or 0
        if crash:
            self.kill()
        else:
            self.stop()
        return self.start(port=port)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""
