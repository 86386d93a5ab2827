"""What the dashboard tests share: ``floodmark ui`` as a user starts it, and Debian's chromium
driven by playwright. ``./dev setup`` installs both; a machine without them fails these tests
(it does not skip them)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.cluster.helpers import stop_process

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def run_ui(log_path: Path, *args: str, scheme: str = "http") -> Iterator[str]:
    """``floodmark ui ARGS --listen 127.0.0.1:0``; yields its base URL, stops it after."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "floodmark.cli", "ui", *args,
                                 "--listen", "127.0.0.1:0"],
                                stdout=subprocess.PIPE, stderr=log, text=True, cwd=str(REPO))
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert f"listening on {scheme}://" in line, line
            yield line.split()[-1]
        finally:
            stop_process(proc)


def chromium() -> str:
    """Debian's chromium (playwright drives it; browser downloads are impossible here)."""
    path = shutil.which("chromium")
    assert path, "Debian's chromium is missing: ./dev setup installs it"
    return path
