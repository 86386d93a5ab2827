"""The real Apache Kafka beside floodmark: jars from Maven Central, KRaft nodes on loopback.

``tools/kafka/pom.xml`` pins the release; ``fetch_jars`` copies it and its dependencies into
``tools/kafka/lib`` (git-ignored) with Maven, once per pom (a stamp holds the pom's hash).
``KafkaCluster`` formats KRaft storage with a random cluster id and runs one combined-mode node
(broker and controller in one JVM) or several, each on free loopback ports, and returns once
every broker serves (Metadata lists them all). Nodes are stopped by their pids; a cluster
started by a test run dies with it (a watcher process SIGKILLs it once the run is gone).

Command line (what ``./dev kafka`` runs, from the repo root):
    python -m tests.reference.kafka_node fetch
    python -m tests.reference.kafka_node up --data-dir D [--brokers N]   # last line: bootstrap
    python -m tests.reference.kafka_node down --data-dir D
    python -m tests.reference.kafka_node tool NAME ARGS...               # kafka-topics, ...
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from floodmark.client.connection import KafkaConnection, RequestFailed
from floodmark.ports import free_port
from tests.jvm import SHORT_RUN_JVM_OPTS

REPO = Path(__file__).resolve().parents[2]
KAFKA_DIR = REPO / "tools" / "kafka"
POM = KAFKA_DIR / "pom.xml"
LIB = KAFKA_DIR / "lib"
STAMP = LIB / ".pom-sha256"
STATE_FILE = "kafka-cluster.json"
HEAP_OPTS = os.environ.get("KAFKA_HEAP_OPTS", "-Xms256m -Xmx1g")

API_METADATA = 3
METADATA_VERSION = 12

TOOLS: dict[str, str] = {
    # Kafka's bin/*.sh names -> the main class each runs (Kafka 4.1)
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
}


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or the jars could not be fetched."""


def missing_reason() -> str | None:
    """Why real Kafka cannot run here (one line), or None."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None and not (tool == "mvn" and _jars_current()):
            return f"real Kafka needs `{tool}` on PATH (Java 17 and Maven)"
    return None


def kafka_version() -> str:
    text = POM.read_text()
    start = text.index("<kafka.version>") + len("<kafka.version>")
    return text[start:text.index("</kafka.version>")]


def _pom_hash(pom: Path = POM) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def _jars_current(pom: Path = POM, lib: Path = LIB) -> bool:
    stamp = lib / STAMP.name
    return stamp.is_file() and stamp.read_text().strip() == _pom_hash(pom)


def fetch_maven_jars(pom: Path, lib: Path, *, quiet: bool = True) -> float:
    """The jars ``pom`` names, and their runtime dependencies, into ``lib`` (Maven, from
    Maven Central); seconds it took (0 when they are already there for this pom: a stamp in
    ``lib`` holds the pom's hash). Any pom of the kind ``tools/kafka/pom.xml`` is can use it.
    Processes that ask at once (pytest-xdist workers each collect the suite, and with it
    tests/spark's connector) fetch one at a time, under an exclusive lock on the pom: the first
    fetches, the others find the jars current."""
    if _jars_current(pom, lib):
        return 0.0
    import fcntl

    with open(pom, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when ``held`` closes
        if _jars_current(pom, lib):
            return 0.0
        return _fetch_maven_jars_locked(pom, lib, quiet=quiet)


def _fetch_maven_jars_locked(pom: Path, lib: Path, *, quiet: bool) -> float:
    if shutil.which("mvn") is None:
        raise KafkaUnavailable(f"fetching the jars of {pom.parent.name} needs `mvn` on PATH")
    started = time.monotonic()
    staging = lib.with_name(lib.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = ["mvn", "-B", "-f", str(pom), "dependency:copy-dependencies",
           f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
    if quiet:
        cmd.insert(2, "-q")
    done = subprocess.run(cmd, capture_output=quiet, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stdout or "")[-2000:] if quiet else ""
        raise KafkaUnavailable(f"mvn dependency:copy-dependencies failed ({done.returncode})\n{tail}")
    shutil.rmtree(lib, ignore_errors=True)
    staging.rename(lib)
    (lib / STAMP.name).write_text(_pom_hash(pom) + "\n")
    return time.monotonic() - started


def fetch_jars(*, quiet: bool = True) -> float:
    """Kafka's jars into ``tools/kafka/lib`` (Maven, from the pom); seconds it took (0 when
    they are already there for this pom)."""
    return fetch_maven_jars(POM, LIB, quiet=quiet)


def _java(main: str, args: Sequence[str], *, log4j: str, heap: str | None = None,
          short_run: bool = True) -> list[str]:
    """The command running Kafka's ``main``; ``short_run``: the quick JIT and serial GC
    (tests/jvm.py), for the tools and for servers a test starts; a server that a benchmark
    measures keeps the JVM's defaults (G1, the optimizing JIT)."""
    java = shutil.which("java")
    if java is None:
        raise KafkaUnavailable("real Kafka needs `java` on PATH (Java 17)")
    jvm_opts = SHORT_RUN_JVM_OPTS if short_run else ("-XX:+UseG1GC",)
    return [java, *(heap or "").split(), *jvm_opts, "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={KAFKA_DIR / log4j}", "-cp", f"{LIB}/*", main, *args]


def run_tool(name: str, args: Sequence[str], *, timeout_s: float = 120.0,
             check: bool = False, input_text: str | None = None
             ) -> subprocess.CompletedProcess[str]:
    """Kafka's command-line tool ``name`` (``kafka-topics``...) with ``args``, output captured
    (``input_text`` its standard input, e.g. for kafka-console-producer)."""
    if name not in TOOLS:
        raise KafkaUnavailable(f"unknown Kafka tool {name!r}; known: {', '.join(sorted(TOOLS))}")
    fetch_jars()
    return subprocess.run(_java(TOOLS[name], args, log4j="log4j2-tools.properties",
                                heap="-Xmx512m"),
                          capture_output=True, text=True, timeout=timeout_s, check=check,
                          input=input_text)


def random_cluster_id() -> str:
    """A KRaft cluster id as Kafka makes one: 16 random bytes, URL-safe base64, no padding
    (never starting with '-', which a command line would take for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass
class KafkaNode:
    node_id: int
    broker_port: int
    controller_port: int
    directory: Path
    pid: int | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "kafka.log"

    def alive(self) -> bool:
        return self.pid is not None and _alive(self.pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of this process is dead
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return waited == 0


@dataclass
class KafkaCluster:
    """``brokers`` combined-mode KRaft nodes (each a broker and a voter) under ``data_dir``."""

    data_dir: Path
    brokers: int = 1
    overrides: Mapping[str, str] = field(default_factory=dict)
    nodes: list[KafkaNode] = field(default_factory=list)
    cluster_id: str = ""
    start_s: float = 0.0
    short_run_jvm: bool = False  # the tests' session cluster: see _java

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.nodes)

    # -- configuration ---------------------------------------------------------------------
    def _properties(self, node: KafkaNode) -> dict[str, str]:
        rf = min(3, self.brokers)
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.broker_port},"
                         f"CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.broker_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.directory / "logs"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": str(rf),
            "transaction.state.log.replication.factor": str(rf),
            "transaction.state.log.min.isr": str(min(2, rf)),
            "share.coordinator.state.topic.replication.factor": str(rf),
            "share.coordinator.state.topic.min.isr": str(min(2, rf)),
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.overrides)
        return props

    # -- life cycle ------------------------------------------------------------------------
    def start(self, *, timeout_s: float = 120.0, supervised: bool = True) -> KafkaCluster:
        """Format (first start) and start every node; return once all serve."""
        reason = missing_reason()
        if reason:
            raise KafkaUnavailable(reason)
        fetch_jars()
        started = time.monotonic()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.nodes:
            self.cluster_id = random_cluster_id()
            self.nodes = [KafkaNode(i, free_port(), free_port(), self.data_dir / f"node-{i}")
                          for i in range(1, self.brokers + 1)]
        formatting = []
        for node in self.nodes:
            node.directory.mkdir(parents=True, exist_ok=True)
            node.config_path.write_text("".join(
                f"{k}={v}\n" for k, v in self._properties(node).items()))
            if not (node.directory / "logs" / "meta.properties").exists():
                formatting.append(subprocess.Popen(
                    _java("kafka.tools.StorageTool",
                          ["format", "-t", self.cluster_id, "-c", str(node.config_path)],
                          log4j="log4j2-tools.properties", heap="-Xmx256m"),
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for proc in formatting:
            out, _ = proc.communicate(timeout=timeout_s)
            if proc.returncode != 0:
                raise KafkaUnavailable(f"kafka-storage format failed: {out.strip()[-2000:]}")
        for node in self.nodes:
            self._launch(node, supervised=supervised)
        self._save()
        try:
            self.wait_ready(timeout_s=max(1.0, timeout_s - (time.monotonic() - started)))
        except BaseException:
            self.stop()
            raise
        self.start_s = time.monotonic() - started
        return self

    def _launch(self, node: KafkaNode, *, supervised: bool) -> None:
        with open(node.log_path, "ab") as log:
            proc = subprocess.Popen(
                _java("kafka.Kafka", [str(node.config_path)], log4j="log4j2-broker.properties",
                      heap=HEAP_OPTS, short_run=self.short_run_jvm),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=str(node.directory))
        node.pid = proc.pid
        if supervised:
            _watch(os.getpid(), proc.pid)

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Until every node's broker answers Metadata listing all the brokers (progress, not a
        sleep: polled every 100 ms)."""
        deadline = time.monotonic() + timeout_s
        waiting = list(self.nodes)
        while waiting:
            node = waiting[0]
            if not node.alive():
                raise KafkaUnavailable(f"Kafka node {node.node_id} exited during start; log "
                                       f"{node.log_path}:\n{_tail(node.log_path)}")
            if self._serves(node):
                waiting.pop(0)
                continue
            if time.monotonic() > deadline:
                raise KafkaUnavailable(f"Kafka node {node.node_id} not serving after "
                                       f"{timeout_s:.0f} s; log {node.log_path}:\n"
                                       f"{_tail(node.log_path)}")
            time.sleep(0.1)

    def _serves(self, node: KafkaNode) -> bool:
        try:
            with KafkaConnection(node.address, timeout_s=5.0, client_id="kafka-node-ready") as c:
                meta = c.request(API_METADATA, METADATA_VERSION, {
                    "topics": [], "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False})
        except (OSError, RequestFailed):
            return False
        return len(meta.brokers) == len(self.nodes)

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> None:
        """Stop every node by its pid (SIGTERM: Kafka's clean shutdown; SIGKILL after
        ``timeout_s``)."""
        for node in self.nodes:
            if node.alive() and node.pid is not None:
                _signal(node.pid, sig)
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            while node.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            if node.alive() and node.pid is not None:
                _signal(node.pid, signal.SIGKILL)
            node.pid = None
        self._save()

    def kill_node(self, node_id: int, sig: int = signal.SIGKILL) -> None:
        node = self.nodes[node_id - 1]
        if node.pid is not None:
            _signal(node.pid, sig)

    # -- the state file: what `down` reads -------------------------------------------------
    def _save(self) -> None:
        state = {"cluster_id": self.cluster_id, "brokers": self.brokers,
                 "overrides": dict(self.overrides),
                 "nodes": [{"node_id": n.node_id, "broker_port": n.broker_port,
                            "controller_port": n.controller_port,
                            "directory": str(n.directory), "pid": n.pid} for n in self.nodes]}
        (self.data_dir / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")

    @classmethod
    def load(cls, data_dir: Path) -> KafkaCluster:
        state = json.loads((data_dir / STATE_FILE).read_text())
        return cls(data_dir, int(state["brokers"]), dict(state["overrides"]),
                   [KafkaNode(int(n["node_id"]), int(n["broker_port"]),
                              int(n["controller_port"]), Path(n["directory"]), n["pid"])
                    for n in state["nodes"]], str(state["cluster_id"]))


def _signal(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


_WATCHER = """
import os, signal, sys, time
supervisor, child = int(sys.argv[1]), int(sys.argv[2])
def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
while alive(child):
    if not alive(supervisor):
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
        break
    time.sleep(0.5)
"""


def _watch(supervisor: int, child: int) -> None:
    """A detached watcher that SIGKILLs ``child`` (a JVM, which cannot watch its parent) once
    ``supervisor`` (the test run) is gone; it ends with the child."""
    subprocess.Popen([sys.executable, "-c", _WATCHER, str(supervisor), str(child)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)


@contextmanager
def kafka_cluster(data_dir: Path, brokers: int = 1,
                  overrides: Mapping[str, str] | None = None) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(Path(data_dir), brokers, dict(overrides or {})).start()
    try:
        yield cluster
    finally:
        cluster.stop()


# -- command line ---------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev kafka", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="fetch the pinned Kafka's jars with Maven")
    up = sub.add_parser("up", help="start real Kafka (KRaft) on loopback; last line: bootstrap")
    up.add_argument("--data-dir", required=True, type=Path)
    up.add_argument("--brokers", type=int, default=1)
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for every node (repeatable)")
    down = sub.add_parser("down", help="stop the Kafka started under --data-dir")
    down.add_argument("--data-dir", required=True, type=Path)
    tool = sub.add_parser("tool", help="run Kafka's command-line tool NAME with ARGS")
    tool.add_argument("name", choices=sorted(TOOLS))
    tool.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "fetch":
            took = fetch_jars(quiet=False)
            how = f"fetched in {took:.1f} s" if took else "already there"
            print(f"Kafka {kafka_version()} jars in {LIB} ({how})")
        elif args.cmd == "up":
            if args.brokers < 1:
                parser.error("--brokers must be at least 1")
            if (args.data_dir / STATE_FILE).exists():
                old = KafkaCluster.load(args.data_dir)
                if any(n.alive() for n in old.nodes):
                    print(f"Kafka already runs under {args.data_dir}", file=sys.stderr)
                    print(old.bootstrap)
                    return 0
            overrides = dict(item.split("=", 1) for item in args.override)
            cluster = KafkaCluster(args.data_dir, args.brokers, overrides)
            cluster.start(supervised=False)
            print(f"Kafka {kafka_version()}: {args.brokers} node(s) serving in "
                  f"{cluster.start_s:.1f} s; logs under {args.data_dir}", file=sys.stderr)
            print(cluster.bootstrap)
        elif args.cmd == "down":
            if not (args.data_dir / STATE_FILE).exists():
                print(f"no Kafka started under {args.data_dir}", file=sys.stderr)
                return 1
            KafkaCluster.load(args.data_dir).stop()
        else:
            rest = list(args.args)
            if rest[:1] == ["--"]:
                rest = rest[1:]
            fetch_jars()
            java = _java(TOOLS[args.name], rest, log4j="log4j2-tools.properties",
                         heap="-Xmx512m")
            os.execv(java[0], java)
    except KafkaUnavailable as exc:
        print(f"./dev kafka: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
