"""Kafka's feature flags (KIP-584) that floodmark serves, and the levels a new cluster starts at.

A feature has a range of levels a broker supports and one level the cluster has *finalized*
(a ``feature_level`` metadata record, Kafka's FeatureLevelRecord). ApiVersions tells clients
both (v3+ tagged fields); a client uses a protocol only once the cluster finalized it. A cluster
whose log has no record for a feature is at level 0, as in Kafka (an older cluster keeps the old
protocol until an operator upgrades the feature).

``transaction.version`` (KIP-890 part 2): level 2 is transaction version 2, in which every EndTxn
bumps the producer epoch and the brokers add partitions and groups to a transaction themselves
(Produce v12, TxnOffsetCommit v5, EndTxn v5). Kafka 4.x finalizes it at 2 on a newly formatted
cluster; so does floodmark (``BOOTSTRAP``).

Below the broker and the controller (both use it), like ``settings``.
"""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.errors import FloodmarkError

TRANSACTION_VERSION = "transaction.version"

# feature -> (lowest, highest) level this release supports
SUPPORTED: dict[str, tuple[int, int]] = {
    TRANSACTION_VERSION: (0, 2),
}

# The levels a brand-new metadata log is written with (Kafka 4.x's defaults for a new cluster).
BOOTSTRAP: dict[str, int] = {
    TRANSACTION_VERSION: 2,
}


class FeatureError(FloodmarkError, ValueError):
    """A level this release cannot finalize; the message is one line for the operator."""


def check_level(name: str, level: int) -> None:
    """FeatureError unless ``level`` is one this release supports for ``name``."""
    supported = SUPPORTED.get(name)
    if supported is None:
        raise FeatureError(f"unknown feature {name!r} (known: {', '.join(sorted(SUPPORTED))})")
    low, high = supported
    if not low <= level <= high:
        raise FeatureError(f"{name}={level} is outside the supported range {low}-{high}")


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """The cluster's finalized levels, and the metadata offset of the last change to them
    (ApiVersions' FinalizedFeaturesEpoch: clients keep the newest they have seen)."""

    epoch: int
    levels: tuple[tuple[str, int], ...]

    def level(self, name: str) -> int:
        return dict(self.levels).get(name, 0)


NONE_FINALIZED = FinalizedFeatures(-1, ())

# UpdateFeatures' upgrade types (Kafka's FeatureUpdate.UpgradeType)
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3


def update_refusal(name: str, current: int, wanted: int, upgrade_type: int) -> str | None:
    """Why ``name`` may not go from ``current`` to ``wanted`` (Kafka's rules: an upgrade
    request may not lower a level; a level below 1 removes the feature, i.e. level 0), or None.
    floodmark's features keep no data that a lower level cannot read, so a downgrade of either
    kind is allowed."""
    try:
        check_level(name, max(wanted, 0))
    except FeatureError as exc:
        return str(exc)
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return f"unknown upgrade type {upgrade_type} for {name}"
    if upgrade_type == UPGRADE and max(wanted, 0) < current:
        return (f"cannot downgrade {name} from {current} to {max(wanted, 0)} with an upgrade "
                "request (use a downgrade)")
    return None
