"""A Spark standalone cluster for tests, started with Spark's own scripts from the pyspark package:
a master and N workers as daemons of ``sbin/spark-daemon.sh`` (what ``start-master.sh`` and
``start-worker.sh`` run; the pip package ships only that script). Pid, log and work files live in
the test's directory, under an ident string of its own, and ``stop`` ends exactly those daemons
(by their pid files)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from floodmark.ports import free_port

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
EXECUTOR = "org.apache.spark.executor.CoarseGrainedExecutorBackend"

T = TypeVar("T")
# JVM start-up bound: a master or worker on a 2-core machine loaded 10x over took 45-90 s
START_S = 300.0


def wait_for(pred: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll ``pred`` (an OSError counts as "not yet") until it returns something true."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            v = pred()
        except OSError:
            v = None
        if v:
            return v
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


class SparkStandalone:
    """A master and ``workers`` workers (``cores`` cores, ``memory`` each) on 127.0.0.1."""

    def __init__(self, workdir: Path, workers: int = 1, cores: int = 2,
                 memory: str = "1g", env: dict[str, str] | None = None) -> None:
        import pyspark

        from floodmark.spark.spark_home import compiled_spark_home, pip_spark_home

        # the executors' Python workers import PySpark compiled from site-packages, not from
        # pyspark.zip (floodmark/spark/spark_home.py): a third of the CPU per Python start
        pip_home = pip_spark_home()
        self.home = (compiled_spark_home(pip_home, workdir / "spark-home") if pip_home
                     else Path(pyspark.__file__).parent)
        self.workdir = workdir
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = {**os.environ, "SPARK_HOME": str(self.home),
                    "SPARK_LOG_DIR": str(workdir / "logs"), "SPARK_PID_DIR": str(workdir / "pids"),
                    "SPARK_IDENT_STRING": f"floodmark-test-{uuid.uuid4().hex[:6]}",
                    "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_WORKER_DIR": str(workdir / "work"), **(env or {})}
        self.env.pop("PYSPARK_PYTHON", None)
        self.env.pop("PYSPARK_DRIVER_PYTHON", None)
        self.env.pop("PYSPARK_SUBMIT_ARGS", None)
        self.daemons: list[tuple[str, int]] = []

    def _daemon(self, action: str, cls: str, instance: int, *args: str) -> None:
        subprocess.run([str(self.home / "sbin" / "spark-daemon.sh"), action, cls, str(instance),
                        *args], env=self.env, check=action == "start", capture_output=True,
                       timeout=60)

    def start(self) -> SparkStandalone:
        self._daemon("start", MASTER, 1, "--host", "127.0.0.1", "--port", str(self.port),
                     "--webui-port", str(self.ui_port))
        self.daemons.append((MASTER, 1))
        wait_for(lambda: socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                 or True, START_S, "the Spark master")
        for n in range(1, self.workers + 1):
            self._daemon("start", WORKER, n, "--host", "127.0.0.1", "--webui-port",
                         str(free_port()), "--cores", str(self.cores), "--memory", self.memory,
                         self.url)
            self.daemons.append((WORKER, n))
        wait_for(lambda: int(self.master_state().get("aliveworkers", 0)) >= self.workers, START_S,
                 f"{self.workers} workers to register with the master")
        return self

    def master_state(self) -> dict[str, object]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return dict(json.load(r))

    def worker_pids(self) -> list[int]:
        ident = self.env["SPARK_IDENT_STRING"]
        pids = []
        for n in range(1, self.workers + 1):
            f = Path(self.env["SPARK_PID_DIR"]) / f"spark-{ident}-{WORKER}-{n}.pid"
            if f.exists():
                pids.append(int(f.read_text().strip()))
        return pids

    def executor_pids(self, app_id: str | None = None) -> list[int]:
        """Executor JVMs (children of this cluster's workers), of ``app_id`` if given."""
        workers = set(self.worker_pids())
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            cmd = cmdline(int(entry.name))
            if EXECUTOR not in cmd or (app_id is not None and f"--app-id {app_id}" not in cmd):
                continue
            try:
                if parent_pid(int(entry.name)) in workers:
                    found.append(int(entry.name))
            except OSError:
                continue
        return sorted(found)

    def executors_launched(self, app_id: str) -> int:
        """How many executors the workers launched for ``app_id`` (one work directory each)."""
        app_dir = Path(self.env["SPARK_WORKER_DIR"]) / app_id
        return len(list(app_dir.iterdir())) if app_dir.exists() else 0

    def log_bytes(self) -> int:
        """The size of every log the master, workers and executors wrote so far: a cluster at
        work (starting executors, running tasks) keeps adding to it."""
        total = 0
        for d in (self.env["SPARK_LOG_DIR"], self.env["SPARK_WORKER_DIR"]):
            for root, _dirs, files in os.walk(d):
                for f in files:
                    try:
                        total += os.path.getsize(os.path.join(root, f))
                    except OSError:
                        continue
        return total

    def stop(self) -> None:
        for cls, n in reversed(self.daemons):
            self._daemon("stop", cls, n)
        self.daemons.clear()
