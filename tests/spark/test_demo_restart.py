"""The demo pipeline restarts its queries from their checkpoints after a transient Spark failure
(the driver's Python process missing Spark's fixed 10 s connect-back) and after nothing else.
Pure unit tests: fake query objects stand in for Spark's."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from floodmark.demo.pipeline import MAX_RESTARTS, _Pipeline, transient

# the first line of a query's exception as the demo on a loaded standalone cluster saw it
CONNECT_BACK = ("Python worker failed to connect back.\n=== Streaming Query ===\n...")
CAUSE = ("org.apache.spark.SparkException: java.net.SocketTimeoutException: Timed out while "
         "waiting for the Python worker to connect back\n\tat org.apache.spark...")


class FakeQuery:
    def __init__(self, name: str, error: str | None = None) -> None:
        self.name, self.error, self.stopped = name, error, False
        self.lastProgress = None if error else {"batchId": 0}  # Spark's name

    @property
    def isActive(self) -> bool:  # Spark's name
        return self.error is None and not self.stopped

    def exception(self) -> str | None:
        return self.error

    def stop(self) -> None:
        self.stopped = True


def _pipeline(errors: list[dict[str, str | None]]) -> tuple[_Pipeline, list[dict[str, Any]]]:
    """A pipeline whose n-th start makes queries failing with errors[n] (then healthy ones)."""
    starts: list[dict[str, Any]] = []

    def start_pipeline(spark: object, bootstrap: str, out_dir: str,
                       started: Callable[[Any], None]) -> dict[str, Any]:
        e = errors[len(starts)] if len(starts) < len(errors) else {}
        qs = {}
        for n in ("parquet", "topic"):
            qs[n] = FakeQuery(n, e.get(n))
            started(qs[n])  # the demo's wait: this one has reported progress or stopped
        starts.append(qs)
        return qs

    p = _Pipeline(SimpleNamespace(start_pipeline=start_pipeline),  # type: ignore[arg-type]
                  spark=None, bootstrap="b", out_dir="o")
    p.start()
    return p, starts


def test_healthy_queries_are_left_alone() -> None:
    p, started = _pipeline([])
    assert p.recover() is None and len(started) == 1 and p.restarts == 0


def test_a_connect_back_timeout_restarts_every_query_from_its_checkpoint() -> None:
    p, started = _pipeline([{"topic": CONNECT_BACK}])
    assert p.recover() is None
    assert len(started) == 2 and p.restarts == 1
    assert started[0]["parquet"].stopped  # the healthy one is stopped too, then both restart
    assert p.queries is not started[0] and p.queries["topic"] is started[1]["topic"]
    assert p.recover() is None and len(started) == 2


def test_any_other_failure_ends_the_demo_with_one_line() -> None:
    p, started = _pipeline([{"parquet": "DataLossError: offsets [10, 20) are gone\nmore"}])
    assert p.recover() == "query parquet stopped: DataLossError: offsets [10, 20) are gone"
    assert len(started) == 1


def test_restarts_are_bounded() -> None:
    p, started = _pipeline([{"topic": CONNECT_BACK}] * (MAX_RESTARTS + 1))
    for _ in range(MAX_RESTARTS):
        assert p.recover() is None
    stopped = p.recover()
    assert stopped == "query topic stopped: Python worker failed to connect back."
    assert len(started) == MAX_RESTARTS + 1


def test_transient_is_only_the_connect_back_timeout() -> None:
    assert transient(CONNECT_BACK) and transient(CAUSE)
    assert not transient(None) and not transient("SocketTimeoutException: Read timed out")
