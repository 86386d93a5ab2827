"""UpdateRaftVoter (API 82, KIP-853): what a voter sends the quorum leader when its controller
listener differs from what the voter set records, and the checks Kafka applies to the request
itself before its leader looks at the voter set (``KafkaRaftClient.handleUpdateVoterRequest``,
in that order). The voter set rule is ``QuorumCore.update_voter``.

Controller-only, as in Kafka 4.1 (``"listeners": ["controller"]``, v0 only): brokers do not
serve it. Floodmark's controllers speak JSON frames (``controller/rpc.py``), so the request is
Kafka's fields under snake-case names, method ``update_raft_voter``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from floodmark.address import format_host_port
from floodmark.errors import ErrorCode
from floodmark.replication import fencing

METHOD = "update_raft_voter"
DEFAULT_LISTENER = "CONTROLLER"
"""The listener name the quorum is reached on (Kafka's usual ``controller.listener.names``);
a request whose listeners lack it is INVALID_REQUEST, as in Kafka."""
KRAFT_VERSION = 1
"""The finalized ``kraft.version`` of a floodmark quorum: 1, voter changes (KIP-853)."""
SUPPORTED_KRAFT_VERSIONS = (0, 1)
"""What a floodmark controller supports (min, max), sent in its own request."""


@dataclass(frozen=True, slots=True)
class UpdateVoterRequest:
    """UpdateRaftVoterRequest v0's fields."""

    current_leader_epoch: int
    voter_id: int
    voter_directory_id: str
    listeners: tuple[tuple[str, str, int], ...]  # (name, host, port)
    min_supported_version: int
    max_supported_version: int
    cluster_id: str | None = None

    @staticmethod
    def from_args(a: dict[str, Any]) -> UpdateVoterRequest:
        """ValueError (one line) on a malformed request."""
        try:
            listeners = tuple((str(x["name"]), str(x["host"]), int(x["port"]))
                              for x in a.get("listeners") or ())
            feature = a.get("kraft_version_feature") or {}
            return UpdateVoterRequest(int(a["current_leader_epoch"]), int(a["voter_id"]),
                                      str(a.get("voter_directory_id") or ""), listeners,
                                      int(feature.get("min_supported_version", -1)),
                                      int(feature.get("max_supported_version", -1)),
                                      None if a.get("cluster_id") is None
                                      else str(a["cluster_id"]))
        except (KeyError, TypeError, ValueError):
            raise ValueError("UpdateRaftVoter: malformed request (current_leader_epoch, "
                             "voter_id, voter_directory_id, listeners [{name, host, port}], "
                             "kraft_version_feature)") from None

    def to_args(self) -> dict[str, Any]:
        return {"cluster_id": self.cluster_id, "current_leader_epoch": self.current_leader_epoch,
                "voter_id": self.voter_id, "voter_directory_id": self.voter_directory_id,
                "listeners": [{"name": n, "host": h, "port": p} for n, h, p in self.listeners],
                "kraft_version_feature": {"min_supported_version": self.min_supported_version,
                                          "max_supported_version": self.max_supported_version}}

    @property
    def endpoint(self) -> str:
        """``host:port`` of the default listener ("" when the request names none)."""
        for name, host, port in self.listeners:
            if name == DEFAULT_LISTENER:
                return format_host_port(host, port)
        return ""


def request_error(req: UpdateVoterRequest, local_epoch: int, *, is_leader: bool
                  ) -> tuple[ErrorCode, str] | None:
    """Kafka's checks of the request before the voter set is looked at, in its order: the
    leader epoch (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER), then
    INVALID_REQUEST for a voter without a directory id, listeners without the controller
    listener, a malformed or (``UpdateVoterHandler``) non-covering kraft.version range."""
    error = fencing.check_leader_request(local_epoch, req.current_leader_epoch,
                                         is_leader=is_leader)
    if error is not ErrorCode.NONE:
        return error, f"leader epoch {local_epoch}, request's {req.current_leader_epoch}"
    if not req.voter_directory_id:
        return ErrorCode.INVALID_REQUEST, "the voter's directory id is missing"
    if not req.endpoint:
        return ErrorCode.INVALID_REQUEST, f"the listeners lack {DEFAULT_LISTENER}"
    low, high = req.min_supported_version, req.max_supported_version
    if low < 0 or high < 0 or high < low:
        return ErrorCode.INVALID_REQUEST, f"kraft.version range [{low}, {high}] is malformed"
    if not low <= KRAFT_VERSION <= high:
        return ErrorCode.INVALID_REQUEST, (
            f"kraft.version range [{low}, {high}] excludes the finalized {KRAFT_VERSION}")
    return None
