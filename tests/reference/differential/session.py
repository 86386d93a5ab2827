"""What a scenario talks through: one connection to a one-node cluster (the node is every
partition's leader and every coordinator), names unique to the run, the answers it records, and
waits on progress (a leader elected, a coordinator loaded), never on sleeps of fixed length."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from floodmark.client.connection import KafkaConnection, RequestFailed
from floodmark.errors import ErrorCode
from floodmark.wire.api_table import ApiKey
from tests.reference.differential.normalise import plain

T = TypeVar("T")

# Answers a client waits out and asks again: a coordinator loading, a leader being elected.
BUSY = frozenset(int(c) for c in (
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REBALANCE_IN_PROGRESS))

CLOSED = "<connection closed>"


class Session:
    def __init__(self, bootstrap: str, run_id: str) -> None:
        self.bootstrap = bootstrap
        self.run_id = run_id
        self.conn = KafkaConnection(bootstrap, timeout_s=30.0, client_id="differential")
        self.steps: dict[str, Any] = {}

    def close(self) -> None:
        self.conn.close()

    def name(self, base: str) -> str:
        """A topic, group or transactional id unique to this run (the same on both brokers)."""
        return f"diff-{base}-{self.run_id}"

    def ask(self, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
        """One request; a connection the broker closes is an answer too (reconnects after)."""
        try:
            return self.conn.request(int(api), version, body)
        except (RequestFailed, OSError):
            self.conn.close()
            self.conn = KafkaConnection(self.bootstrap, timeout_s=30.0, client_id="differential")
            return CLOSED

    def record(self, step: str, answer: Any) -> Any:
        """Keep ``answer`` (plain values) under ``step`` for comparison; returns the answer."""
        self.steps[step] = plain(answer) if answer is not CLOSED else CLOSED
        return answer

    def step(self, step: str, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
        return self.record(step, self.ask(api, version, body))

    def until(self, ask: Callable[[], T], done: Callable[[T], bool], what: str,
              timeout_s: float = 30.0) -> T:
        deadline = time.monotonic() + timeout_s
        answer = ask()
        while not done(answer):
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.bootstrap}: never {what}: last answer {answer}")
            time.sleep(0.05)
            answer = ask()
        return answer

    def settled(self, api: ApiKey, version: int, body: dict[str, Any],
                code: Callable[[Any], int]) -> Any:
        """Ask until the answer is not one a client waits out (``BUSY``)."""
        return self.until(lambda: self.ask(api, version, body),
                          lambda r: r is CLOSED or code(r) not in BUSY, f"settled {api.name}")

    # -- set-up helpers (not recorded) ----------------------------------------------------------
    def create_topic(self, base: str, partitions: int = 1,
                     configs: dict[str, str] | None = None) -> str:
        topic = self.name(base)
        answer = self.ask(ApiKey.CREATE_TOPICS, 5, {
            "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [], "configs": [{"name": k, "value": v}
                                                       for k, v in (configs or {}).items()]}],
            "timeout": 10_000, "validate_only": False})
        assert int(answer.topics[0].error_code) == 0, answer
        self.wait_leaders(topic, partitions)
        return topic

    def wait_leaders(self, topic: str, partitions: int) -> None:
        """Every partition has a leader that answers ListOffsets."""
        def ready() -> bool:
            answer = self.ask(ApiKey.LIST_OFFSETS, 4, {
                "replica_id": -1, "isolation_level": 0, "topics": [{
                    "name": topic, "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                        for p in range(partitions)]}]})
            return answer is not CLOSED and all(
                int(p.error_code) == 0 for t in answer.topics for p in t.partitions)
        self.until(ready, bool, f"leaders for {topic}")

    def coordinator(self, key: str, key_type: int) -> None:
        """Wait until the node coordinates ``key`` (Kafka creates its internal topic on the
        first FindCoordinator)."""
        self.until(lambda: self.ask(ApiKey.FIND_COORDINATOR, 4, {
            "key_type": key_type, "coordinator_keys": [key]}),
            lambda r: r is not CLOSED and int(r.coordinators[0].error_code) == 0,
            f"a coordinator for {key}")
