"""``floodmark cluster up|status|kill|start|down`` as a user runs them, and a controller restart:
the metadata log brings back every topic, broker epoch and leader, and the brokers keep serving."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from floodmark.client.connection import KafkaConnection
from floodmark.ports import LOWEST_PORT
from tests.cluster.helpers import wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floodmark.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=str(REPO))


def _status(data_dir: Path) -> dict:
    out = _cli("cluster", "status", "--json", "--data-dir", str(data_dir))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _produce(data_dir: Path, topic: str, lines: list[str]) -> subprocess.CompletedProcess[str]:
    """`floodmark produce` talks to the broker it is given: give it the partition leader (and
    ask again if leadership moved meanwhile, e.g. a preferred-leader election)."""
    out: subprocess.CompletedProcess[str] | None = None
    for _ in range(5):
        st = _status(data_dir)
        leader = st["partitions"][topic]["0"]["leader"]
        bootstrap = next(n["address"] for n in st["nodes"] if n["id"] == leader)
        out = subprocess.run([sys.executable, "-m", "floodmark.cli", "produce", topic, "--acks",
                              "all", "--bootstrap-server", bootstrap],
                             input="\n".join(lines) + "\n", capture_output=True, text=True,
                             timeout=60, cwd=str(REPO))
        if out.returncode == 0:
            break
        time.sleep(1.0)
    assert out is not None
    return out


def test_cluster_up_status_kill_start_down(tmp_path: Path) -> None:
    data = tmp_path / "cl"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    up = subprocess.Popen([sys.executable, "-m", "floodmark.cli", "cluster", "up", "--brokers",
                           "3", "--controllers", "1", "--data-dir", str(data), "--controller-set",
                           "broker.session.timeout.ms=1500"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          cwd=str(REPO))
    try:
        assert up.stdout is not None
        bootstrap = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not bootstrap:
            line = up.stdout.readline()
            if line.startswith("bootstrap: "):
                bootstrap = line.split()[1]
        assert bootstrap.count(",") == 2
        st = _status(data)
        assert st["bootstrap"] == bootstrap
        roles = {n["id"]: (n["role"], n["alive"]) for n in st["nodes"]}
        assert roles == {0: ("controller", True), 1: ("broker", True), 2: ("broker", True),
                         3: ("broker", True)}
        assert all(isinstance(n["pid"], int) and n["address"].startswith("127.0.0.1:")
                   for n in st["nodes"])

        created = _cli("topic", "create", "cli-t", "--replication-factor", "3", "--config",
                       "min.insync.replicas=2", "--bootstrap-server", bootstrap)
        assert created.returncode == 0, created.stderr
        assert _produce(data, "cli-t", [f"x{i}" for i in range(100)]).returncode == 0

        # Kill broker 2 with SIGKILL: status shows it dead; the controller fences it.
        out = _cli("cluster", "kill", "2", "--signal", "KILL", "--data-dir", str(data))
        assert out.returncode == 0, out.stderr
        wait_until(lambda: not next(n for n in _status(data)["nodes"] if n["id"] == 2)["alive"],
                   10, "broker 2 dead")
        wait_until(lambda: next(n for n in _status(data)["nodes"] if n["id"] == 2)
                   .get("fenced"), 10, "broker 2 fenced")
        # DescribeCluster v2 (KIP-1073) lists the fenced broker only when asked, marked fenced.
        broker_1 = next(n["address"] for n in _status(data)["nodes"] if n["id"] == 1)
        with KafkaConnection(broker_1) as conn:
            def described(include_fenced: bool) -> dict[int, bool]:
                answer = conn.request(60, 2, {"include_cluster_authorized_operations": False,
                                              "endpoint_type": 1,
                                              "include_fenced_brokers": include_fenced})
                return {int(b.broker_id): bool(b.is_fenced) for b in answer.brokers}
            wait_until(lambda: described(False) == {1: False, 3: False}, 10,
                       "broker 1 sees broker 2 fenced")
            assert described(True) == {1: False, 2: True, 3: False}

        # The controller itself: SIGKILL and restart; metadata comes back from its log.
        before = _status(data)["partitions"]["cli-t"]["0"]
        assert _cli("cluster", "kill", "0", "--data-dir", str(data)).returncode == 0
        assert _cli("cluster", "start", "0", "--data-dir", str(data)).returncode == 0
        after = wait_until(lambda: _status(data).get("partitions"), 10, "controller answers")
        assert after["cli-t"]["0"]["leader_epoch"] >= before["leader_epoch"]
        assert after["cli-t"]["0"]["replicas"] == before["replicas"]

        assert _cli("cluster", "start", "2", "--data-dir", str(data)).returncode == 0
        st = _status(data)
        assert next(n for n in st["nodes"] if n["id"] == 2)["alive"]
        assert st["bootstrap"] == bootstrap  # restarted on its previous port
        wait_until(lambda: sorted(_status(data)["partitions"]["cli-t"]["0"]["isr"]) == [1, 2, 3],
                   30, "broker 2 back in the ISR")
        assert _produce(data, "cli-t", [f"y{i}" for i in range(100)]).returncode == 0
        with KafkaConnection(bootstrap.split(",")[0]) as conn:
            md = conn.request(3, 9, {"topics": [{"name": "cli-t"}],
                                     "allow_auto_topic_creation": False})
            assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]
            part = md.topics[0].partitions[0]
            reg = _status(data)["partitions"]["cli-t"]["0"]
            assert (part.leader_id, part.leader_epoch) == (reg["leader"], reg["leader_epoch"])
            assert sorted(part.isr_nodes) == [1, 2, 3]

        # topic describe (any broker): every replica's LEO, HW and epochs from its own broker.
        described = _cli("topic", "describe", "cli-t", "--bootstrap-server",
                         bootstrap.split(",")[-1])
        assert described.returncode == 0, described.stderr
        for r in (1, 2, 3):
            assert f"    replica {r}: LEO " in described.stdout, described.stdout
        assert "HW -1" not in described.stdout
        down = _cli("cluster", "down", "--data-dir", str(data))
        assert down.returncode == 0, down.stderr
        up.wait(60)
        assert up.returncode == 0
        assert not any(n["alive"] for n in _status(data)["nodes"])
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGINT)
            up.wait(60)


def _free_base_port(nodes: int = 5) -> int:
    """A base port whose node ports (base..base+nodes) and /metrics ports (base+100..) are free."""
    import random
    import socket

    # Below Linux's ephemeral range (32768 and up), where other tests' port-0 binds and every
    # outgoing connection come from, and below floodmark.ports' pool (LOWEST_PORT up to that
    # range), whose ports other workers hand to servers that bind them later: with tests
    # running in parallel, a range in either could be taken between this probe and the start.
    for _ in range(50):
        base = random.randrange(1100, LOWEST_PORT - 110 - nodes)
        try:
            for port in [*range(base, base + nodes + 1), *range(base + 100, base + 101 + nodes)]:
                with socket.socket() as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise AssertionError("no free port range")


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None,
         timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floodmark.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=str(cwd), env=env)


def _read_only(path: Path, argv: list[str]) -> list[str]:
    """``argv`` run where ``path`` is read-only: a read-only bind mount in a private mount
    namespace when root (root writes through file modes), the directory's mode otherwise."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        path.chmod(0o555)
        return argv
    script = ('mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"')
    return ["unshare", "--mount", "sh", "-c", script, str(path), *argv]


def _one_line_error(out: subprocess.CompletedProcess[str], needle: str) -> None:
    assert out.returncode != 0, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert needle in lines[0], lines[0]


def test_every_user_mistake_is_one_line(tmp_path: Path) -> None:
    """Issue 12, "What a new user hit" item 3 and item 5's `--config retention.ms`, walked through
    the real CLI against a real cluster: each mistake is one line on stderr, a non-zero exit code,
    no traceback; and `--listen PORT` means that port on 127.0.0.1 (it bound 0.0.35.132)."""
    base = _free_base_port()
    data = tmp_path / "cl"
    up = _run("cluster", "up", "--detach", "--controllers", "1", "--base-port", str(base),
              "--data-dir", str(data), "--controller-set", "broker.session.timeout.ms=1500",
              cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    try:
        bs = ["--bootstrap-server", f"127.0.0.1:{base + 1},127.0.0.1:{base + 2}"]
        assert _run("topic", "create", "t1", *bs, cwd=tmp_path).returncode == 0
        a_file = tmp_path / "a-file"
        a_file.write_text("not a directory")
        dd = ["--data-dir", str(data)]
        mistakes: list[tuple[list[str], str]] = [
            (["topic", "list", "--bootstrap-server", "127.0.0.1:1"], "no broker answered"),
            (["topic", "list", "--bootstrap-server", "localhost"], "is not host:port"),
            (["broker", "--data-dir", str(a_file), "--listen", "127.0.0.1:0"],
             "is a file, not a directory"),
            (["broker", "--data-dir", str(tmp_path / "b"), "--listen", f"127.0.0.1:{base + 1}"],
             f"port {base + 1} is already in use"),
            (["broker", "--data-dir", str(tmp_path / "b"), "--listen", "abc:x"],
             "is not HOST:PORT"),
            (["broker", "--data-dir", str(tmp_path / "b"), "--listen", "10.254.254.254:9092"],
             "is not an address of this machine"),
            (["cluster", "up", "--data-dir", str(a_file)], "is a file, not a directory"),
            (["cluster", "up", "--detach", *dd], "a cluster is already running"),
            (["cluster", "start", "3", *dd], "node 3 is already running"),
            (["cluster", "kill", "7", *dd], "no node 7 in this cluster"),
            (["cluster", "start", "7", *dd], "no node 7 in this cluster"),
            (["cluster", "status", "--data-dir", str(tmp_path / "nowhere")], "no cluster in"),
            (["cluster", "up", "--brokers", "0", "--data-dir", str(tmp_path / "n")],
             "at least one broker"),
            (["cluster", "up", "--base-port", "80", "--data-dir", str(tmp_path / "n")],
             "--base-port 80"),
            (["cluster", "diff", "nope", "1", "2", *dd], "holds a partition of 'nope'"),
            (["cluster", "up", "--base-port", str(base), "--data-dir", str(tmp_path / "n")],
             f"node 0 127.0.0.1:{base}: port {base} is already in use"),
            (["cluster", "up", "--controller", "nohost", "--data-dir", str(tmp_path / "n")],
             "--controller 'nohost' is not HOST:PORT"),
            (["cluster", "up", "--listen-host", "10.254.254.254", "--data-dir",
              str(tmp_path / "n")], "10.254.254.254 is not an address of this machine"),
            (["topic", "create", "t2", "--config", "retention.ms", *bs],
             "--config 'retention.ms' is not NAME=VALUE"),
            (["topic", "create", "t1", *bs], "TOPIC_ALREADY_EXISTS (36)"),
            (["topic", "describe", "nope", *bs],
             "UNKNOWN_TOPIC_OR_PARTITION (3) [no such topic or partition (`floodmark topic list`)]"),
            (["topic", "create", "t9", "--replication-factor", "5", *bs],
             "INVALID_REPLICATION_FACTOR (38): The target replication factor of 5 cannot be "
             "reached"),  # the broker's words beside the code
            (["produce", "t1", "--partition", "9", *bs], "t1 has 1 partition(s)"),
            (["consume", "t1", "--offset", "abc", *bs], "--offset 'abc'"),
            (["consume", "t1", "--format", "%z", *bs], "unknown token %z"),
            (["group", "describe", "nope", *bs], "consumer group 'nope' does not exist"),
            (["group", "reset-offsets", "g", "--topic", "t1", "--to-datetime", "garbage", *bs],
             "--to-datetime 'garbage'"),
            (["topic", "list", "--data-dir", str(tmp_path / "nowhere")], "no cluster in"),
            (["topic", "alter-config", "t1", *bs], "nothing to alter"),
            (["topic", "alter-config", "t1", "--add-config", "retention.ms", *bs],
             "--add-config 'retention.ms' is not NAME=VALUE"),
        ]
        for argv, needle in mistakes:
            _one_line_error(_run(*argv, cwd=tmp_path, timeout_s=90), needle)
        # A data directory that cannot be written: the broker and `cluster up`.
        ro = tmp_path / "read-only"
        for argv in (["broker", "--data-dir", str(ro / "d"), "--listen", "127.0.0.1:0"],
                     ["cluster", "up", "--data-dir", str(ro / "c")]):
            out = subprocess.run(_read_only(ro, [sys.executable, "-m", "floodmark.cli", *argv]),
                                 capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
            _one_line_error(out, "cannot be written")

        # `--listen PORT`: that port on 127.0.0.1, as a new user means it.
        port = _free_base_port(0)
        proc = subprocess.Popen([sys.executable, "-m", "floodmark.cli", "broker", "--data-dir",
                                 str(tmp_path / "p"), "--listen", str(port)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                cwd=str(tmp_path))
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == (
                f"floodmark broker listening on 127.0.0.1:{port}")
        finally:
            proc.terminate()
            proc.wait(30)

        # A 3-broker directory does not shrink: refused in one line (growing is tested below).
        assert _run("cluster", "down", *dd, cwd=tmp_path).returncode == 0
        _one_line_error(_run("cluster", "up", "--detach", "--brokers", "2", *dd, cwd=tmp_path),
                        "does not shrink to 2")
        _one_line_error(_run("cluster", "up", "--detach", "--controller-set",
                             "broker.session.timeout.ms=9999", *dd, cwd=tmp_path),
                        "--controller-set broker.session.timeout.ms=9999 (it has 1500) would "
                        "change it")
    finally:
        _run("cluster", "down", "--data-dir", str(data), cwd=tmp_path)


def test_detached_cluster_stable_ports_discovery_growth_and_diff(tmp_path: Path) -> None:
    """`cluster up --detach --base-port` in the default directory; the tools find it without a
    bootstrap address (./floodmark-cluster, `--data-dir`, $FLOODMARK_BOOTSTRAP); `cluster diff`
    checks every partition; `up --brokers 4` on the 3-broker directory adds broker 4."""
    base = _free_base_port()
    data = tmp_path / "floodmark-cluster"
    up = _run("cluster", "up", "--detach", "--controllers", "1", "--base-port", str(base),
              "--controller-set", "broker.session.timeout.ms=1500", cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    try:
        boot = ",".join(f"127.0.0.1:{base + i}" for i in (1, 2, 3))
        assert f"bootstrap: {boot}" in up.stdout
        st = _status(data)
        assert {n["id"]: n["address"] for n in st["nodes"]} == {
            i: f"127.0.0.1:{base + i}" for i in range(4)}
        assert all(n["alive"] for n in st["nodes"])
        assert {n["metrics"] for n in st["nodes"]} == {
            f"http://127.0.0.1:{base + 100 + i}/metrics" for i in range(4)}

        # No bootstrap given: ./floodmark-cluster is found; the cluster's default RF is used.
        created = _run("topic", "create", "d", "--partitions", "3", cwd=tmp_path)
        assert created.returncode == 0, created.stderr
        assert "replication factor 3" in created.stdout
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        listed = _run("topic", "list", cwd=elsewhere,
                      env={**os.environ, "FLOODMARK_BOOTSTRAP": boot})
        assert "d" in listed.stdout.split(), listed.stderr
        lines = "".join(f"k{i}|a{i}\n" for i in range(90))
        produced = subprocess.run([sys.executable, "-m", "floodmark.cli", "produce", "d",
                                   "--key-separator", "|", "--data-dir", str(data)], input=lines,
                                  capture_output=True, text=True, timeout=120, cwd=str(elsewhere))
        assert produced.returncode == 0, produced.stderr

        # Broker 3 dies; 60 more records reach brokers 1 and 2 only.
        assert _run("cluster", "kill", "3", "--data-dir", str(data), cwd=tmp_path).returncode == 0
        wait_until(lambda: all(3 not in reg["isr"] for reg in
                               _status(data)["partitions"]["d"].values()), 30, "3 out of ISRs")
        more = "".join(f"k{i}|b{i}\n" for i in range(60))
        produced = subprocess.run([sys.executable, "-m", "floodmark.cli", "produce", "d",
                                   "--key-separator", "|"], input=more, capture_output=True,
                                  text=True, timeout=120, cwd=str(tmp_path))
        assert produced.returncode == 0, produced.stderr
        diff = _run("cluster", "diff", "d", "1", "3", cwd=tmp_path)
        assert diff.returncode == 3, diff.stderr
        assert [line.split(":")[0] for line in diff.stdout.splitlines()] == ["d-0", "d-1", "d-2"]
        per = json.loads(_run("cluster", "diff", "d", "1", "3", "--json", cwd=tmp_path).stdout)
        assert [r["partition"] for r in per] == [0, 1, 2]
        assert sum(len(r["lost"]) for r in per) == 60
        assert sum(1 for r in per if r["lost"]) >= 2  # keys spread over the partitions

        # Broker 3 back (same port): it catches up and the diff is clean on every partition.
        assert _run("cluster", "start", "3", "--data-dir", str(data), cwd=tmp_path).returncode == 0
        assert next(n for n in _status(data)["nodes"] if n["id"] == 3)["address"] == (
            f"127.0.0.1:{base + 3}")
        wait_until(lambda: _run("cluster", "diff", "d", "1", "3", cwd=tmp_path).returncode == 0,
                   60, "broker 3 caught up", 0.5)

        # Down, then up with one more broker than the directory has: broker 4 joins.
        assert _run("cluster", "down", cwd=tmp_path).returncode == 0
        grown = _run("cluster", "up", "--detach", "--brokers", "4", cwd=tmp_path)
        assert grown.returncode == 0, grown.stderr
        assert "adding broker(s) 4" in grown.stdout
        st = _status(data)
        assert {n["id"]: n["alive"] for n in st["nodes"]} == {i: True for i in range(5)}
        assert next(n for n in st["nodes"] if n["id"] == 4)["address"] == f"127.0.0.1:{base + 4}"
        wait_until(lambda: [n.get("fenced") for n in _status(data)["nodes"]
                            if n["role"] == "broker"] == [False] * 4, 30, "4 brokers registered")
        consumed = _run("consume", "d", "--from-beginning", "--max-messages", "150",
                        cwd=tmp_path)
        assert len(consumed.stdout.splitlines()) == 150, consumed.stderr
    finally:
        _run("cluster", "down", "--data-dir", str(data), cwd=tmp_path)

