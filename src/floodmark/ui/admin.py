"""The dashboard's admin calls: configs with their sources, and the guarded changes (create and
delete a topic, reset a group's offsets), each through the CLI's own code so that a rule lives in
one place:

* configs: ``cli.config.describe_configs`` (DescribeConfigs v4 with synonyms; a broker is asked
  about itself), sensitive values masked here again whatever the broker answered;
* create / delete: CreateTopics v7 / DeleteTopics v6 through ``client.cluster.ClusterClient``
  (what ``floodmark topic create|delete`` send), topic configs checked first by
  ``cli.common.check_configs``;
* reset offsets: the planner of ``floodmark group reset-offsets`` (``cli.group_offsets``: the
  group must be inactive, ``--to-offset`` kept within the log, a time resolved by ListOffsets),
  given the page's choice as the command's arguments. ``execute=False`` answers the plan only
  (the page's confirmation shows it); ``execute=True`` commits it and reads the committed offsets
  back.

Blocking; the server runs them in its pool. Every refusal is an ``AdminError``: one line with
Kafka's error name and the broker's message, and an HTTP status.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import Any

from floodmark.cli import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    CliError,
    check_configs,
    describe_configs,
    group_offsets,
)
from floodmark.client import ClusterClient, NoBrokerAvailable, RequestFailed, Retriable, error_text
from floodmark.errors import ErrorCode, FloodmarkError
from floodmark.settings import is_sensitive

ADMIN_TIMEOUT_S = 10.0
CREATE_TIMEOUT_MS = 30_000
RESET_MODES = ("earliest", "latest", "offset", "datetime")
MAX_PARTITIONS = 10_000  # a create asking for more is a typo, not a plan


class AdminError(FloodmarkError):
    """A change or a read the dashboard refuses or the cluster refused: one line, a status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _failed(exc: Exception) -> AdminError:
    """A request that failed: 502 when no broker answered, 400 when one answered no (a
    ``RequestFailed`` without a cause carries the broker's refusal)."""
    unreachable = (isinstance(exc, (OSError, NoBrokerAvailable, Retriable))
                   or exc.__cause__ is not None)
    return AdminError(str(exc), 502 if unreachable else 400)


def _client(bootstrap: str) -> ClusterClient:
    return ClusterClient(bootstrap, timeout_s=ADMIN_TIMEOUT_S, client_id="floodmark-ui")


def _masked(entry: dict[str, Any]) -> dict[str, Any]:
    secret = bool(entry["sensitive"]) or is_sensitive(str(entry["name"]))
    out = dict(entry, sensitive=secret)
    if secret:
        out["value"] = None
        out["synonyms"] = [dict(s, value=None) for s in entry["synonyms"]]
    return out


def configs(bootstrap: str, kind: str, name: str) -> dict[str, Any]:
    """``GET /api/configs?type=topic|broker&name=N``: every config of the topic or broker with
    its value and source (DYNAMIC_TOPIC_CONFIG ... DEFAULT_CONFIG) and its synonyms, most
    specific first; sensitive values null."""
    if kind not in ("topic", "broker"):
        raise AdminError(f"type={kind!r}: topic or broker")
    if not name:
        raise AdminError("name is missing")
    with _client(bootstrap) as cluster:
        try:
            if kind == "topic":
                entries = describe_configs(cluster, RESOURCE_TOPIC, name)
            else:
                if not name.isdigit():
                    raise AdminError(f"broker {name!r}: a broker id is a number")
                cluster.metadata([])
                if int(name) not in cluster.brokers:
                    raise AdminError(f"broker {name} is not a live broker (live: "
                                     f"{','.join(map(str, sorted(cluster.brokers)))})", 404)
                entries = describe_configs(cluster, RESOURCE_BROKER, name, node_id=int(name))
        except CliError as exc:
            status = 404 if "UNKNOWN_TOPIC_OR_PARTITION" in str(exc) else 400
            raise AdminError(str(exc), status) from None
        except (RequestFailed, Retriable, OSError) as exc:
            raise _failed(exc) from None
    rows = sorted((_masked(e.as_json()) for e in entries), key=lambda e: str(e["name"]))
    return {"type": kind, "name": name, "configs": rows}


def _int(body: dict[str, Any], key: str, low: int, high: int) -> int:
    value = body.get(key)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise AdminError(f"{key}={value!r}: an integer from {low} to {high}")
    return value


def _name(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value.strip():
        raise AdminError(f"{key} is missing")
    return value.strip()


def create_topic(bootstrap: str, body: dict[str, Any]) -> str:
    """``POST /api/topics/create {"topic", "partitions", "replication_factor", "configs"}``
    (``replication_factor`` -1: the cluster's default; ``configs``: name -> value)."""
    topic = _name(body, "topic")
    partitions = _int(body, "partitions", 1, MAX_PARTITIONS)
    factor = _int(body, "replication_factor", -1, 100)
    if factor == 0:
        raise AdminError("replication_factor=0: at least 1 (or -1, the cluster's default)")
    given = body.get("configs") or {}
    if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
        raise AdminError("configs: an object of name -> value (strings)")
    try:
        check_configs(given, topic=True)
    except CliError as exc:
        raise AdminError(str(exc)) from None
    with _client(bootstrap) as cluster:
        try:
            resp = cluster.request_any(19, 7, {"topics": [{
                "name": topic, "num_partitions": partitions, "replication_factor": factor,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in given.items()]}],
                "timeout": CREATE_TIMEOUT_MS, "validate_only": False})
        except (RequestFailed, OSError) as exc:
            raise _failed(exc) from None
    (t,) = resp.topics
    if int(t.error_code):
        raise AdminError(f"topic {topic}: {error_text(int(t.error_code), t.error_message)}",
                         409 if int(t.error_code) == ErrorCode.TOPIC_ALREADY_EXISTS else 400)
    return (f"created topic {topic} with {partitions} partition(s), replication factor "
            f"{int(t.replication_factor) if int(t.replication_factor) > 0 else factor}")


def delete_topic(bootstrap: str, body: dict[str, Any]) -> str:
    """``POST /api/topics/delete {"topic"}``."""
    topic = _name(body, "topic")
    with _client(bootstrap) as cluster:
        try:
            resp = cluster.request_any(20, 6, {"topics": [{"name": topic, "topic_id": None}],
                                               "timeout": CREATE_TIMEOUT_MS})
        except (RequestFailed, OSError) as exc:
            raise _failed(exc) from None
    (r,) = resp.responses
    if int(r.error_code):
        status = 404 if int(r.error_code) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else 400
        raise AdminError(f"topic {topic}: {error_text(int(r.error_code), r.error_message)}",
                         status)
    return f"deleted topic {topic}"


def _reset_args(body: dict[str, Any]) -> argparse.Namespace:
    """The page's choice as ``floodmark group reset-offsets`` arguments."""
    mode = body.get("mode")
    if mode not in RESET_MODES:
        raise AdminError(f"mode={mode!r}: one of {', '.join(RESET_MODES)}")
    topic = body.get("topic")
    if topic is not None and (not isinstance(topic, str) or not topic.strip()):
        raise AdminError("topic: a topic name (or null: every topic the group has offsets for)")
    to_offset = _int(body, "offset", 0, 2**63 - 1) if mode == "offset" else None
    to_datetime = None
    if mode == "datetime":
        ms = _int(body, "timestamp_ms", 0, 2**53)
        to_datetime = datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
    return argparse.Namespace(
        topic=[topic.strip()] if topic else [], all_topics=not topic, all_groups=False,
        from_file=None, to_earliest=mode == "earliest", to_latest=mode == "latest",
        to_current=False, to_offset=to_offset, shift_by=None, to_datetime=to_datetime,
        by_duration=None)


def reset_offsets(bootstrap: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /api/groups/reset-offsets {"group", "topic" (null: all the group's topics),
    "mode": earliest|latest|offset|datetime, "offset", "timestamp_ms", "execute"}``:
    ``{"group", "plan": [{"topic", "partition", "new_offset"}], "executed", "committed"}``
    (``committed``: the group's offsets read back after the commit)."""
    group = _name(body, "group")
    args = _reset_args(body)
    execute = body.get("execute") is True
    with _client(bootstrap) as cluster:
        try:
            plan = group_offsets._plan_group(args, cluster, group, None, int(time.time() * 1000))
            committed = None
            if execute and plan:
                group_offsets._commit(cluster, group, plan)  # failures: one line each, stderr
                back = group_offsets.committed_offsets(cluster, group)
                committed = [{"topic": t, "partition": p, "offset": o}
                             for (t, p), o in sorted(back.items())]
                missed = [r for r in plan if back.get((r.topic, r.partition)) != r.offset]
                if missed:
                    raise AdminError(f"group {group}: the commit did not take for "
                                     + ", ".join(f"{r.topic}-{r.partition}" for r in missed)
                                     + " (the dashboard's log says why)", 502)
        except CliError as exc:
            raise AdminError(str(exc), 409 if "active members" in str(exc) else 400) from None
        except (RequestFailed, Retriable, OSError) as exc:
            raise _failed(exc) from None
    return {"group": group, "executed": execute and bool(plan), "committed": committed,
            "plan": [{"topic": r.topic, "partition": r.partition, "new_offset": r.offset}
                     for r in plan]}
