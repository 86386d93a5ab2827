"""Start ``floodmark ui`` as a child process (for the demo): the address it serves, and a stop."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

from floodmark.address import format_host_port, parse_host_port
from floodmark.ui.server import DEFAULT_PORT

DEFAULT_LISTEN = "127.0.0.1:8080"


def start_ui(data_dir: str | Path, log_path: str | Path, listen: str = DEFAULT_LISTEN,
             interval_ms: int = 1000, allow_changes: bool = False
             ) -> tuple[subprocess.Popen[str], str] | None:
    """``floodmark ui --data-dir DATA_DIR`` on ``listen`` or, if that port is taken, any free
    port (``allow_changes``: with ``--allow-changes``, the fault-drill buttons among them).
    Returns (process, URL), or None if it does not start (the caller goes on without)."""
    host, _port = parse_host_port(listen, DEFAULT_PORT, what="--listen")
    for where in (listen, format_host_port(host, 0)):
        with open(log_path, "a") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "floodmark.cli", "ui", "--data-dir", str(data_dir),
                 "--listen", where, "--interval-ms", str(interval_ms),
                 *(["--allow-changes"] if allow_changes else [])],
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "floodmark ui listening on URL", or EOF if it failed
        if "listening on" in line:
            return proc, line.split()[-1]
        proc.wait(10)
    return None


def stop_ui(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
