"""A client of a whole cluster (the CLI's): every bootstrap address, metadata, one connection
per broker, requests routed to partition leaders and group coordinators, retried while the
cluster moves (a failover, a leader election, a coordinator that is loading).

Any broker answers metadata and admin requests (each forwards to the controller); a broker that
does not answer is skipped for the next one. Partition requests go to the leader the last
metadata named; NOT_LEADER_OR_FOLLOWER and its kin refresh the metadata and try again until
``timeout_s``, as Kafka's clients do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from floodmark.address import Address as Address
from floodmark.address import BadAddress as BadAddress
from floodmark.address import parse_bootstrap as parse_bootstrap
from floodmark.client.connection import KafkaConnection, RequestFailed
from floodmark.errors import ErrorCode, FloodmarkError
from floodmark.security import PLAINTEXT, ClientSecurity

T = TypeVar("T")

RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.OFFSET_NOT_AVAILABLE,  # a new leader whose HW has not caught up (KIP-207)
})
BACKOFF_S = 0.2


@dataclass(frozen=True)
class Sent:
    """A request sent and not yet answered (``ClusterClient.send_request``)."""

    node_id: int
    address: Address
    connection: KafkaConnection
    correlation_id: int
    api_key: int
    version: int


class NoBrokerAvailable(RequestFailed):
    """None of the addresses answered."""


class Retriable(FloodmarkError):
    """A Kafka error the cluster may get over (a leader moves): refresh and try again."""

    def __init__(self, code: ErrorCode, what: str, message: str | None = None) -> None:
        super().__init__(f"{what}: {error_text(code, message)}")
        self.code = code


# What a person can do about the errors a user's own command meets (not the ones clients retry).
HINTS: dict[ErrorCode, str] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "no such topic or partition (`floodmark topic list`)",
    ErrorCode.LEADER_NOT_AVAILABLE: "the partition has no leader now: are its replicas' brokers "
                                    "up? (`floodmark topic describe`)",
    ErrorCode.NOT_ENOUGH_REPLICAS: "fewer in-sync replicas than min.insync.replicas: start the "
                                   "brokers that are down, or use acks=1",
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "the ISR shrank below min.insync.replicas while "
                                                "the write waited: retry once brokers are back",
    ErrorCode.MESSAGE_TOO_LARGE: "the record is larger than the topic's max.message.bytes",
    ErrorCode.OFFSET_OUT_OF_RANGE: "that offset is outside the log (try --offset earliest or "
                                   "latest)",
    ErrorCode.INVALID_REPLICATION_FACTOR: "at most as many replicas as live brokers",
    ErrorCode.INVALID_PARTITIONS: "at least one partition; adding: more than the topic has",
    ErrorCode.NON_EMPTY_GROUP: "the group has active members: stop its consumers first",
    ErrorCode.GROUP_ID_NOT_FOUND: "no such group (`floodmark group list`)",
}


def error_text(code: int, message: str | None = None) -> str:
    """Kafka's name for an error code, e.g. ``NOT_LEADER_OR_FOLLOWER (6)``, the broker's own
    words beside it when its answer carried them (``error_message``, e.g.
    ``INVALID_RECORD (87): Compacted topic cannot accept message without key ...``), and what to
    do about it where a person can (``HINTS``). The one place an error code is worded for a
    person: every command prints an error through it."""
    try:
        name = ErrorCode(code)
    except ValueError:
        return f"error code {int(code)}" + (f": {message}" if message else "")
    hint = HINTS.get(name)
    return (f"{name.name} ({int(code)})" + (f": {message}" if message else "")
            + (f" [{hint}]" if hint else ""))


class ClusterClient:
    def __init__(self, bootstrap: str, *, timeout_s: float = 30.0,
                 client_id: str = "floodmark-cli", security: ClientSecurity = PLAINTEXT) -> None:
        """``security``: TLS (and SASL) settings for every connection (``--command-config``)."""
        self.bootstrap = parse_bootstrap(bootstrap)
        self.security = security
        self.timeout_s = timeout_s
        self.client_id = client_id
        self.brokers: dict[int, Address] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.leader_epochs: dict[tuple[str, int], int] = {}
        self.partition_counts: dict[str, int] = {}
        self._conns: dict[Address, KafkaConnection] = {}
        # Pipelined requests (``send_request``) have connections of their own: a blocking
        # request (metadata while a leader moves) must never read a pipelined request's answer.
        self._pipes: dict[Address, KafkaConnection] = {}

    def close(self) -> None:
        for conn in [*self._conns.values(), *self._pipes.values()]:
            conn.close()
        self._conns.clear()
        self._pipes.clear()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connections -------------------------------------------------------------------------
    def connection(self, address: Address) -> KafkaConnection:
        conn = self._conns.get(address)
        if conn is None:
            conn = KafkaConnection(f"{address[0]}:{address[1]}", timeout_s=self.timeout_s,
                                   client_id=self.client_id, security=self.security)
            self._conns[address] = conn
        return conn

    def _drop(self, address: Address) -> None:
        conn = self._conns.pop(address, None)
        if conn is not None:
            conn.close()

    def request_to(self, address: Address, api_key: int, version: int, body: Any) -> Any:
        try:
            return self.connection(address).request(api_key, version, body)
        except (OSError, RequestFailed) as exc:
            self._drop(address)
            raise RequestFailed(f"{address[0]}:{address[1]}: {exc}") from exc

    def request_any(self, api_key: int, version: int, body: Any) -> Any:
        """To the first broker that answers: known brokers first, then the bootstrap list."""
        tried: list[str] = []
        candidates = list(dict.fromkeys([*self._conns, *self.brokers.values(),
                                         *self.bootstrap]))
        for address in candidates:
            try:
                return self.request_to(address, api_key, version, body)
            except RequestFailed as exc:
                tried.append(str(exc))
        raise NoBrokerAvailable("no broker answered: " + "; ".join(tried))

    def request_node(self, node_id: int, api_key: int, version: int, body: Any) -> Any:
        return self.request_to(self._address_of(node_id), api_key, version, body)

    def send_node(self, node_id: int, api_key: int, version: int, body: Any) -> None:
        """A request the broker does not answer (Produce with ``acks=0``)."""
        address = self._address_of(node_id)
        try:
            self.connection(address).send(api_key, version, body)
        except OSError as exc:
            self._drop(address)
            raise RequestFailed(f"{address[0]}:{address[1]}: {exc}") from exc

    # -- pipelined requests: several sent before the first answer is read; a Kafka connection
    # answers its requests in the order they came, so they are read back in that order.
    def send_request(self, node_id: int, api_key: int, version: int, body: Any) -> Sent:
        """Send a request to ``node_id`` without waiting; ``receive`` reads its answer."""
        address = self._address_of(node_id)
        try:
            conn = self._pipes.get(address)
            if conn is None:
                conn = KafkaConnection(f"{address[0]}:{address[1]}", timeout_s=self.timeout_s,
                                       client_id=self.client_id, security=self.security)
                self._pipes[address] = conn
            return Sent(node_id, address, conn, conn.send(api_key, version, body), api_key,
                        version)
        except (OSError, RequestFailed) as exc:
            self._drop_pipe(address)
            raise RequestFailed(f"{address[0]}:{address[1]}: {exc}") from exc

    def receive(self, sent: Sent) -> Any:
        """The answer to ``sent``: every request sent before it on its connection must have been
        received already. A broken connection is dropped (the answers of every request still in
        flight on it are lost: ``RequestFailed``)."""
        address = sent.address
        if self._pipes.get(address) is not sent.connection:
            raise RequestFailed(f"{address[0]}:{address[1]}: the connection was closed")
        try:
            return sent.connection.receive(sent.api_key, sent.version, sent.correlation_id)
        except (OSError, RequestFailed) as exc:
            self._drop_pipe(address)
            raise RequestFailed(f"{address[0]}:{address[1]}: {exc}") from exc

    def answered(self, sent: Sent) -> bool:
        """Whether ``receive(sent)`` would find its answer (begun) without waiting; a closed
        connection counts as answered (``receive`` then says so)."""
        try:
            return sent.connection.readable()
        except (OSError, ValueError):
            return True

    def drop_pipeline(self, sent: Sent) -> None:
        """Close the connection ``sent`` went out on (if still open): the answers in flight on it
        are given up."""
        if self._pipes.get(sent.address) is sent.connection:
            self._drop_pipe(sent.address)

    def _drop_pipe(self, address: Address) -> None:
        conn = self._pipes.pop(address, None)
        if conn is not None:
            conn.close()

    def _address_of(self, node_id: int) -> Address:
        address = self.brokers.get(node_id)
        if address is None:
            raise Retriable(ErrorCode.LEADER_NOT_AVAILABLE, f"broker {node_id} is unknown")
        return address

    # -- metadata ------------------------------------------------------------------------------
    def metadata(self, topics: list[str] | None, *, auto_create: bool = False) -> Any:
        body = {"topics": None if topics is None else [{"name": t, "topic_id": None}
                                                      for t in topics],
                "allow_auto_topic_creation": auto_create,
                "include_topic_authorized_operations": False}
        meta = self.request_any(3, 12, body)
        self.brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in meta.brokers}
        for t in meta.topics:
            if int(t.error_code) == 0:
                self.partition_counts[str(t.name)] = len(t.partitions)
                for p in t.partitions:
                    key = (str(t.name), int(p.partition_index))
                    self.leaders[key] = int(p.leader_id)
                    self.leader_epochs[key] = int(p.leader_epoch)
        return meta

    def partitions(self, topic: str, *, create: bool = False) -> int:
        """The topic's partition count, waiting (bounded) while it is being created."""
        def ask() -> int:
            meta = self.metadata([topic], auto_create=create)
            code = int(meta.topics[0].error_code)
            if code:
                if code in RETRIABLE and (create or code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    raise Retriable(ErrorCode(code), f"topic {topic}")
                raise RequestFailed(f"topic {topic}: {error_text(code)}")
            return self.partition_counts[topic]
        return self.retry(ask)

    def leader(self, topic: str, partition: int) -> int:
        leader = self.leaders.get((topic, partition), -1)
        if leader < 0 or leader not in self.brokers:
            self.metadata([topic])
            leader = self.leaders.get((topic, partition), -1)
        if leader < 0:
            raise Retriable(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition}")
        return leader

    def coordinator(self, group: str) -> int:
        def ask() -> int:
            resp = self.request_any(10, 4, {"key_type": 0, "coordinator_keys": [group]})
            c = resp.coordinators[0]
            if int(c.error_code):
                code = ErrorCode(int(c.error_code))
                if code in RETRIABLE:
                    raise Retriable(code, f"coordinator of group {group}")
                raise RequestFailed(f"coordinator of group {group}: "
                                    f"{error_text(code, c.error_message)}")
            self.brokers[int(c.node_id)] = (str(c.host), int(c.port))
            return int(c.node_id)
        return self.retry(ask)

    # -- retries ---------------------------------------------------------------------------------
    def retry(self, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` until it succeeds; on a retriable error or a broker that does not
        answer, forget the cached leaders and try again until ``timeout_s`` has passed."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return attempt()
            except Retriable:
                if time.monotonic() >= deadline:
                    raise
            except NoBrokerAvailable:
                # Never reached anyone: a wrong address, not a failover. Say so at once.
                if not self.brokers or time.monotonic() >= deadline:
                    raise
            except RequestFailed as exc:
                if exc.__cause__ is None or time.monotonic() >= deadline:
                    raise  # an answer that said no, or out of time
            self.leaders.clear()
            time.sleep(BACKOFF_S)
