"""``EmbeddedBroker``: one real ``floodmark broker`` process (broker and controller in one
process) for a test, over ``floodmark.cluster.single.BrokerProcess`` (the one single-broker
launcher)::

    with EmbeddedBroker() as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        ...
        broker.kill()       # SIGKILL: a crash, no checkpoints written
        broker.restart()    # again on the same port; returns once it serves
"""

from __future__ import annotations

import signal
from pathlib import Path
from types import TracebackType

from floodmark.cluster import LIMIT_S, STALL_MS, BrokerProcess, process_progress
from floodmark.testing.data_dirs import DataDir
from floodmark.testing.serving import wait_serving

DEFAULT_NODE_ID = 1  # floodmark broker's node.id unless the settings name one


class EmbeddedBroker:
    def __init__(self, *, data_dir: Path | str | None = None,
                 settings: dict[str, str] | None = None, keep_data: bool = False,
                 timeout_s: float = LIMIT_S, stall_ms: int = STALL_MS) -> None:
        """``data_dir``: where the broker keeps its log (default: a temporary directory,
        removed on ``stop`` unless ``keep_data``); ``settings``: Kafka-named broker settings
        (``{"num.partitions": "3"}``); ``timeout_s``/``stall_ms``: every wait's overall bound
        and how long it may see no progress before it fails."""
        self._dir = DataDir(data_dir, prefix="floodmark-broker-", keep=keep_data)
        args = [f"--set={k}={v}" for k, v in (settings or {}).items()]
        self.process = BrokerProcess(self._dir.path / "data", args,
                                     log_path=self._dir.path / "broker.log")
        self.node_id = int((settings or {}).get("node.id", DEFAULT_NODE_ID))
        self.timeout_s = timeout_s
        self.stall_ms = stall_ms
        self._started = False

    # -- what a test uses ------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` (the same across restarts)."""
        return self.process.bootstrap

    @property
    def data_dir(self) -> Path:
        return self._dir.path

    @property
    def log_path(self) -> Path:
        """The broker's log (every start's, appended)."""
        return self.process.log_path

    def alive(self) -> bool:
        return self.process.alive()

    # -- life cycle ------------------------------------------------------------------------------
    def start(self) -> EmbeddedBroker:
        """Start the broker (again on its old port after a kill); return once it serves."""
        self.process.start(port=self.process.port or 0, timeout_s=self.timeout_s,
                           stall_ms=self.stall_ms)
        self._started = True
        self.wait_serving()
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Crash the broker (SIGKILL: nothing flushed, no checkpoint) and wait until it is gone;
        ``sig=signal.SIGTERM`` is a clean shutdown instead."""
        self.process.stop(sig)

    def restart(self, *, clean: bool = False) -> EmbeddedBroker:
        """Kill the broker if it runs (SIGKILL; ``clean``: SIGTERM), start it on the same port,
        and return once it serves."""
        if self.process.alive():
            self.kill(signal.SIGTERM if clean else signal.SIGKILL)
        return self.start()

    def wait_serving(self) -> None:
        """Until the broker answers Metadata with every partition led (NotServing when it
        stops making progress)."""
        def progress() -> dict[str, object]:
            pid = self.process.pid
            return {} if pid is None else process_progress(pid, self.log_path)

        wait_serving(lambda: {self.node_id: self.bootstrap_servers}, progress,
                     stall_ms=self.stall_ms, timeout_s=self.timeout_s)

    def stop(self) -> None:
        """Clean shutdown (SIGTERM; SIGKILL if it hangs); the temporary data dir is removed."""
        self.process.stop()
        self._dir.release()

    def __enter__(self) -> EmbeddedBroker:
        return self if self._started else self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.alive() else "stopped"
        port = self.process.port
        return f"EmbeddedBroker({state}, 127.0.0.1:{port}, data_dir={str(self._dir.path)!r})"
