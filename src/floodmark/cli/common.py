"""What the client commands (``topic``, ``group``, ``produce``, ``consume``) share: where the
cluster is (``--bootstrap-server``, ``--data-dir``, ``FLOODMARK_BOOTSTRAP``), how to connect
(``--command-config FILE``, Kafka's name: a properties file of librdkafka's client settings;
else the ``client.properties`` a secured ``cluster up`` wrote in ``--data-dir``), one-line
errors, ``NAME=VALUE`` lists, and offsets by timestamp asked of each partition's leader."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from floodmark.cli.errors import CliError as CliError  # re-exported for the client commands
from floodmark.client import RETRIABLE, ClusterClient, RequestFailed, Retriable, error_text
from floodmark.cluster import CLIENT_PROPERTIES, DEFAULT_DATA_DIR, STATE_FILE
from floodmark.errors import ErrorCode
from floodmark.security import PLAINTEXT, ClientSecurity

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "FLOODMARK_BOOTSTRAP"

RETRIABLE_CODES = frozenset(int(c) for c in RETRIABLE)  # the one list: client.cluster


def add_bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default=None,
                   help="host:port[,host:port...]: every address is tried (default: --data-dir's "
                        f"cluster, ${BOOTSTRAP_ENV}, ./{DEFAULT_DATA_DIR}'s cluster, "
                        f"{DEFAULT_BOOTSTRAP})")
    p.add_argument("--data-dir", default=None,
                   help="the directory of a `floodmark cluster up`: use its brokers (and its "
                        "client.properties, if it wrote one)")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="client settings, key=value a line, librdkafka's names "
                        "(security.protocol, ssl.ca.location, ssl.certificate.location, "
                        "ssl.key.location, ssl.key.password, sasl.*)")


def bootstrap_of(args: argparse.Namespace) -> str:
    """``--bootstrap-server``, else the cluster of ``--data-dir``, else ``$FLOODMARK_BOOTSTRAP``,
    else the cluster of ``./floodmark-cluster`` if there is one, else 127.0.0.1:9092."""
    if args.bootstrap_server:
        return str(args.bootstrap_server)
    if args.data_dir:
        return _local_cluster_bootstrap(args.data_dir)
    env = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if env:
        return env
    local = Path(DEFAULT_DATA_DIR)
    if (local / STATE_FILE).is_file():
        return _local_cluster_bootstrap(local)
    return DEFAULT_BOOTSTRAP


def _local_cluster_bootstrap(data_dir: str | Path) -> str:
    from floodmark.cluster import load_cluster  # the supervisor, only when it is asked of

    return load_cluster(data_dir).bootstrap


def security_of(args: argparse.Namespace) -> ClientSecurity:
    """``--command-config``, else ``--data-dir``'s ``client.properties``, else PLAINTEXT. A file
    that does not parse is a one-line CliError (never a value from it)."""
    path = getattr(args, "command_config", None)
    if path is None and getattr(args, "data_dir", None):
        candidate = Path(args.data_dir) / CLIENT_PROPERTIES
        path = str(candidate) if candidate.is_file() else None
    if path is None:
        return PLAINTEXT
    try:
        security = ClientSecurity.load(path)
        security.ssl_context()  # a file that does not load: said here, in one line
        return security
    except ValueError as exc:
        raise CliError(f"--command-config {path}: {exc}") from None


def connect(args: argparse.Namespace) -> ClusterClient:
    return ClusterClient(bootstrap_of(args), security=security_of(args))


def report(errors: list[tuple[str, int, str | None]]) -> int:
    """Print each failed item as one line with Kafka's error name; 1 if any failed."""
    bad = [(n, c, m) for n, c, m in errors if c]
    for name, code, msg in bad:
        print(f"error: {name}: {error_text(code, msg)}", file=sys.stderr)
    return 1 if bad else 0


def pairs(items: list[str], what: str) -> dict[str, str]:
    """``NAME=VALUE`` items; anything else is a one-line error naming the flag."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliError(f"{what} {item!r} is not NAME=VALUE")
        out[name.strip()] = value
    return out


def check_configs(configs: dict[str, str], *, topic: bool) -> None:
    """Refuse before sending what the broker would refuse: each value of a setting floodmark
    knows, against its type and Kafka's rule for it (``floodmark.settings.check_value``, the
    broker's and the controller's check too), as Kafka words it. A name floodmark does not know
    is left to the broker (it may be another Kafka's)."""
    from floodmark.settings import SETTINGS, check_value, topic_config_setting  # when asked of

    for name, value in configs.items():
        setting = topic_config_setting(name) if topic else SETTINGS.get(name)
        if setting is None:
            continue
        try:
            check_value(name, value, setting)
        except ValueError as exc:
            raise CliError(str(exc)) from None


def kafka_config_list(items: list[str]) -> list[str]:
    """kafka-configs.sh's ``a=1,b=[x,y]``: split at commas outside brackets, brackets dropped."""
    out: list[str] = []
    for item in items:
        depth, start = 0, 0
        for i, ch in enumerate(item + ","):
            depth += (ch == "[") - (ch == "]")
            if ch == "," and depth <= 0:
                if part := item[start:i].strip():
                    out.append(part.replace("[", "").replace("]", ""))
                start = i + 1
    return out


def offsets_at(cluster: ClusterClient, topic: str, partitions: list[int], timestamp: int,
               on_answer: Callable[[int], None] | None = None, *,
               isolation_level: int = 0) -> dict[int, int]:
    """ListOffsets asked of each partition's leader, retried while leaders move. A timestamp
    later than every record answers the log end offset (as kafka-consumer-groups.sh does).
    ``on_answer(n)`` is told of each leader's answer for n partitions (progress bars)."""
    found: dict[int, int] = {}

    def attempt() -> dict[int, int]:
        by_leader: dict[int, list[int]] = {}
        for p in partitions:
            if p not in found:
                by_leader.setdefault(cluster.leader(topic, p), []).append(p)
        for leader, parts in by_leader.items():
            resp = cluster.request_node(leader, 2, 7, {
                "replica_id": -1, "isolation_level": isolation_level, "topics": [
                    {"name": topic, "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                    for p in parts]}]})
            answered = 0
            for part in resp.topics[0].partitions:
                code = int(part.error_code)
                if code in RETRIABLE_CODES:
                    continue
                if code:
                    raise RequestFailed(f"offsets of {topic}-{part.partition_index}: "
                                        f"{error_text(code)}")
                offset = int(part.offset)
                if offset < 0:  # no record at or after the timestamp
                    offset = offsets_at(cluster, topic, [int(part.partition_index)], -1)[
                        int(part.partition_index)]
                found[int(part.partition_index)] = offset
                answered += 1
            if on_answer is not None and answered:
                on_answer(answered)
        missing = [p for p in partitions if p not in found]
        if missing:
            raise Retriable(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic} partitions {missing}")
        return found

    return cluster.retry(attempt)


def coordinator_request(cluster: ClusterClient, group: str, api: int, version: int,
                        body: Any, error_of: Callable[[Any], int] | None = None) -> Any:
    """The request to the group's coordinator, found again and retried while it moves.
    ``error_of(response)``: the code that says the answer came from the wrong (or a loading)
    coordinator (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS...): retried too."""
    def attempt() -> Any:
        resp = cluster.request_node(cluster.coordinator(group), api, version, body)
        code = error_of(resp) if error_of is not None else 0
        if code in RETRIABLE_CODES:
            raise Retriable(ErrorCode(code), f"group {group}")
        return resp
    return cluster.retry(attempt)


def read_partitions_json(path: Path, option: str) -> list[Any] | None:
    """The ``partitions`` list of a kafka-tools JSON file (``{"partitions": [...]}``) named by
    ``option``; None when the document has no such list (the caller says what it expected).
    An unreadable file or bad JSON is a one-line CliError."""
    return read_tools_json_list(path, option, "partitions")


def read_tools_json_list(path: Path, option: str, key: str) -> list[Any] | None:
    """The list under ``key`` of a kafka-tools JSON file (``{"partitions": [...]}``,
    ``{"topics": [...]}``) named by ``option``; None when the document has no such list.
    An unreadable file or bad JSON is a one-line CliError."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise CliError(f"{option} {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(f"{option} {path}: not JSON ({exc})") from None
    entries = doc.get(key) if isinstance(doc, dict) else None
    return entries if isinstance(entries, list) else None
