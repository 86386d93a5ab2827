"""Protocol modes: the history of Kafka's follower-truncation rule as an explicit parameter.

Only ``LEADER_EPOCH`` is safe. The other two exist so the simulator, the model checker and the
docs can show exactly which version of the protocol loses or diverges data, and where.
"""

from __future__ import annotations

import enum


class Truncation(enum.Enum):
    """How a follower decides where to cut its log when it (re)starts following a leader."""

    HIGH_WATERMARK = "high-watermark"
    """Kafka before 0.11: a restarted or new follower truncates to its own high watermark."""

    EPOCH_OFFSET = "epoch-offset"
    """KIP-101 as first shipped (0.11): ask the leader for the end offset of the follower's last
    epoch; the answer is an offset only, and a new leader records its epoch only on first append."""

    LEADER_EPOCH = "leader-epoch"
    """KIP-279 + KAFKA-7415 (2.1+, the default): (epoch, end offset) answers, a multi-round walk
    back, and a new leader records (new epoch, LEO) in its epoch cache before accepting writes."""

    @property
    def is_safe(self) -> bool:
        return self is Truncation.LEADER_EPOCH

    @property
    def answers_with_epoch(self) -> bool:
        """OffsetsForLeaderEpoch v1+ (KIP-279) returns the epoch alongside the end offset."""
        return self is Truncation.LEADER_EPOCH

    @property
    def records_epoch_on_election(self) -> bool:
        """KAFKA-7415: the new leader assigns (new_epoch, LEO) before it writes anything."""
        return self is Truncation.LEADER_EPOCH

    @classmethod
    def parse(cls, text: str) -> Truncation:
        for mode in cls:
            if mode.value == text or mode.name.lower() == text.lower().replace("-", "_"):
                return mode
        names = ", ".join(m.value for m in cls)
        raise ValueError(f"unknown truncation mode {text!r}; expected one of: {names}")


DEFAULT_TRUNCATION = Truncation.LEADER_EPOCH
