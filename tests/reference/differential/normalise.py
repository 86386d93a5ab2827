"""The one place where answers are made comparable: kio objects become plain values, and what
legitimately differs between two clusters is erased or renamed consistently.

Erased (replaced by a marker): throttle times, node/leader/controller ids, hosts and ports (also
inside listener addresses in config values), cluster ids, topic ids (UUIDs), session ids, the
text of error messages (only *whether* a message is given is compared; the texts are kept aside
for the report). Renamed consistently, in order
of first appearance: member ids (``<member-1>``...) and producer ids (``<pid-1>``...), so that
"the same member as before" still compares. The run's unique suffix in topic, group and
transaction names becomes ``<run>``. Lists of named things are sorted by name (or partition
index): Kafka and floodmark need not answer in the same order.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re
import uuid
from collections.abc import Mapping
from typing import Any

# field name -> how it is erased
ERASED = frozenset({
    "throttle_time", "throttle_time_ms", "node_id", "leader_id", "controller_id", "cluster_id",
    "topic_id", "host", "port", "session_id", "coordinator_id", "broker_id",
    "preferred_read_replica", "rack", "cluster_authorized_operations",
    "transaction_start_time", "log_append_time_ms", "replica_nodes", "isr_nodes",
    "offline_replicas", "leader_recovery_state", "client_host",
})
RENAMED = {"member_id": "member", "leader": "member", "producer_id": "pid",
           "group_instance_id": "instance"}
# A listener's address in a config value (``PLAINTEXT://localhost:9092``): the host and port
# differ between the two clusters, the listener name does not.
_ENDPOINT = re.compile(r"([A-Za-z0-9_]+)://[^,\s]*")
MESSAGE_FIELDS = frozenset({"error_message"})
SORT_KEYS = ("name", "topic", "group_id", "transactional_id", "partition_index", "index",
             "partition", "resource_name", "config_name")


def plain(value: Any) -> Any:
    """A kio (or hot-path) answer as nested dicts, lists and scalars."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        return [plain(v) for v in value]
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, enum.Enum):
        return value.value if not isinstance(value.value, enum.Enum) else plain(value.value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, memoryview | bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return repr(value)


class Normaliser:
    """One per broker per scenario: the consistent renaming needs memory (member ids)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.names: dict[tuple[str, Any], str] = {}
        self.messages: dict[str, str | None] = {}

    def __call__(self, value: Any, path: str = "") -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                sub = f"{path}.{k}" if path else k
                if k in ERASED and v not in (None, -1, 0, [], ""):
                    out[k] = "<erased>"
                elif k in RENAMED and v not in (None, -1, "", b""):
                    out[k] = self._rename(RENAMED[k], v)
                elif k in MESSAGE_FIELDS:
                    self.messages[sub] = v
                    out[k] = None if v is None or v == "" else "<message>"
                else:
                    out[k] = self(v, sub)
            return out
        if isinstance(value, list):
            items = [self(v, f"{path}[{i}]") for i, v in enumerate(value)]
            return sorted(items, key=_sort_key) if items and all(
                isinstance(i, dict) for i in items) else items
        if isinstance(value, str):
            return _ENDPOINT.sub(r"\1://<endpoint>", value.replace(self.run_id, "<run>"))
        return value

    def _rename(self, kind: str, value: Any) -> str:
        key = (kind, value)
        if key not in self.names:
            n = sum(1 for k in self.names if k[0] == kind) + 1
            self.names[key] = f"<{kind}-{n}>"
        return self.names[key]


def _sort_key(item: dict[str, Any]) -> tuple[Any, ...]:
    for k in SORT_KEYS:
        if k in item:
            return (str(type(item[k])), item[k] if item[k] is not None else "")
    return ("",)
