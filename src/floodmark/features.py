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

import argparse
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


# Kafka releases -> the levels ``kafka-storage format --release-version`` gives a new cluster
# (each feature's default at that release's metadata.version): transaction version 2 is the
# default from 4.0 on.
RELEASE_LEVELS: dict[str, dict[str, int]] = {
    **{f"3.{minor}": {TRANSACTION_VERSION: 0} for minor in range(3, 10)},
    "4.0": {TRANSACTION_VERSION: 2},
    "4.1": {TRANSACTION_VERSION: 2},
}


class FeatureError(FloodmarkError, ValueError):
    """A level this release cannot finalize; the message is one line for the operator."""


def parse_feature(text: str) -> tuple[str, int]:
    """``NAME=LEVEL`` (``kafka-storage format --feature``'s syntax) -> (name, level), checked;
    FeatureError (one line) otherwise."""
    name, sep, level_text = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise FeatureError(f"--feature {text!r}: expected NAME=LEVEL (e.g. "
                           f"{TRANSACTION_VERSION}=0)")
    try:
        level = int(level_text.strip())
    except ValueError:
        raise FeatureError(f"--feature {text!r}: the level {level_text.strip()!r} is not a "
                           "whole number") from None
    check_level(name, level)
    return name, level


def bootstrap_levels(release_version: str | None = None,
                     features: tuple[tuple[str, int], ...] | list[tuple[str, int]] = ()
                     ) -> tuple[tuple[str, int], ...]:
    """The levels a new cluster is formatted with: this release's defaults (``BOOTSTRAP``), or
    ``release_version``'s, then each ``features`` entry (a feature given twice: FeatureError).
    Sorted by name, as ``ControllerConfig.bootstrap_features`` holds them."""
    if release_version is None:
        levels = dict(BOOTSTRAP)
    else:
        release = RELEASE_LEVELS.get(release_version.strip())
        if release is None:
            raise FeatureError(f"--release-version {release_version!r} is not one this release "
                               f"knows ({', '.join(RELEASE_LEVELS)})")
        levels = dict(release)
    given: set[str] = set()
    for name, level in features:
        if name in given:
            raise FeatureError(f"--feature {name} is given twice")
        given.add(name)
        check_level(name, level)
        levels[name] = level
    return tuple(sorted(levels.items()))


def check_level(name: str, level: int) -> None:
    """FeatureError unless ``level`` is one this release supports for ``name``."""
    supported = SUPPORTED.get(name)
    if supported is None:
        raise FeatureError(f"unknown feature {name!r} (known: {', '.join(sorted(SUPPORTED))})")
    low, high = supported
    if not low <= level <= high:
        raise FeatureError(f"{name}={level} is outside the supported range {low}-{high}")


# -- kafka-storage format's options, for every command that makes a new metadata log -------
def _feature_argument(text: str) -> tuple[str, int]:
    try:
        return parse_feature(text)
    except FeatureError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_feature_arguments(p: argparse.ArgumentParser) -> None:
    """``kafka-storage format``'s ``--feature NAME=LEVEL`` and ``--release-version``: the
    feature levels a new metadata log is finalized at (``floodmark broker``, a controller, a
    combined node and ``floodmark cluster up`` take them)."""
    p.add_argument("--feature", dest="features", action="append", default=[],
                   type=_feature_argument, metavar="NAME=LEVEL",
                   help="a feature level a new cluster starts at, as kafka-storage format "
                        f"--feature (e.g. {TRANSACTION_VERSION}=0; default "
                        f"{TRANSACTION_VERSION}={BOOTSTRAP[TRANSACTION_VERSION]}); repeatable; "
                        "only a new metadata log takes it")
    p.add_argument("--release-version", default=None, metavar="X.Y",
                   help="start a new cluster at the feature levels of this Kafka release "
                        f"({', '.join(RELEASE_LEVELS)}); --feature overrides one")


def bootstrap_features(args: argparse.Namespace) -> tuple[tuple[str, int], ...]:
    """The levels ``add_feature_arguments``' options ask for; FeatureError (a ValueError, one
    line) for an unknown release or a feature given twice."""
    return bootstrap_levels(args.release_version, args.features)


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
