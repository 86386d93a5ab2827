"""The test side of ``isolation_client.py``: starts it in a lab host and follows its JSON lines
(the partition leader, progress, the final result)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from floodmark.chaos.netns import Lab


class Client:
    def __init__(self, lab: Lab, bootstrap: str, log: Path, request_timeout_ms: int,
                 host: str = "c") -> None:
        self.proc = lab.popen(host, [sys.executable, str(Path(__file__).with_name(
            "isolation_client.py")), bootstrap, str(request_timeout_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "wb"))  # noqa: SIM115
        self.last: dict[str, Any] = {}
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def next_event(self, kind: str, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if not line:
                raise AssertionError(f"client ended before {kind!r}")
            event = json.loads(line)
            if event["event"] == "progress":
                self.last = event
            if event["event"] == kind:
                return event
        raise AssertionError(f"no {kind!r} event within {timeout_s}s")

    def wait_acked(self, at_least: int, stall_s: float) -> None:
        """Wait for acknowledgements, failing only when they stop advancing for ``stall_s``."""
        best, since = self.last.get("acked", 0), time.monotonic()
        while self.last.get("acked", 0) < at_least:
            self.next_event("progress", stall_s)
            if self.last.get("fatal"):
                return  # the producer gave up (the unsafe run): nothing more will be acked
            if self.last["acked"] > best:
                best, since = self.last["acked"], time.monotonic()
            elif time.monotonic() - since > stall_s:
                raise AssertionError(f"acknowledgements stalled at {best}")

    def stop(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"stop\n")
        self.proc.stdin.flush()
        result = self.next_event("result", 300)
        self.proc.wait(30)
        return result
