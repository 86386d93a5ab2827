"""A controller data dir's directory id (``meta.properties``, KIP-853) on a real process: made
at the first start, and a ``meta.properties`` without one is refused in one line."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

from floodmark.ports import free_port

REPO = Path(__file__).resolve().parents[2]


def _controller(data_dir: Path, timeout_s: float = 30) -> tuple[int, str]:
    """Start a lone voter; once it listens (or exits), stop it. (exit code, stderr)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "floodmark.controller", "--node-id", "1", "--data-dir",
         str(data_dir), "--controller-quorum-voters", f"1@127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=str(REPO))
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "listening" or EOF when it refused to start
    if "listening" in line:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=timeout_s)
    return proc.returncode, err


def test_a_fresh_data_dir_gets_a_directory_id_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    _controller(fresh)
    text = (fresh / "meta.properties").read_text()
    directory_id = next(line.split("=", 1)[1] for line in text.splitlines()
                        if line.startswith("directory.id="))
    uuid.UUID(directory_id)
    _controller(fresh)  # a restart keeps it
    assert (fresh / "meta.properties").read_text() == text

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "meta.properties").write_text("version=1\n")
    code, stderr = _controller(bad)
    assert code == 2
    errors = [line for line in stderr.splitlines() if "floodmark controller:" in line]
    assert errors == [f"floodmark controller: {bad}/meta.properties has no directory.id; "
                      "refusing to start as a new directory over an existing one"]
    assert "Traceback" not in stderr
