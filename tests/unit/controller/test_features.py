"""Finalized features (KIP-584) as controller metadata: the ``feature_level`` record, the
levels a new cluster starts at, snapshots, and what ApiVersions says of them."""

from __future__ import annotations

import pytest

from floodmark.broker.handlers.admin import features_fields
from floodmark.controller.image import MetadataImage
from floodmark.controller.logic import ControllerConfig, ControllerLogic
from floodmark.controller.record_check import check_record
from floodmark.controller.snapshot import image_from_records, image_records
from floodmark.errors import KafkaError
from floodmark.features import NONE_FINALIZED, TRANSACTION_VERSION, FinalizedFeatures


def test_a_new_cluster_finalizes_transaction_version_2_with_its_cluster_id() -> None:
    lg = ControllerLogic(MetadataImage(), ControllerConfig())
    lg.bootstrap()
    records = lg.take_pending()
    assert [r["type"] for _, r in records] == ["cluster_id", "feature_level"]
    offset, rec = records[1]
    assert (rec["name"], rec["level"]) == (TRANSACTION_VERSION, 2)
    assert lg.image.features == FinalizedFeatures(offset, ((TRANSACTION_VERSION, 2),))
    lg.bootstrap()
    assert lg.take_pending() == []  # an existing cluster: nothing more


def test_a_cluster_without_the_record_is_at_level_0() -> None:
    image = MetadataImage()
    image.apply_all([(0, {"type": "cluster_id", "cluster_id": "c"})])
    assert image.features == NONE_FINALIZED
    assert image.features.level(TRANSACTION_VERSION) == 0


@pytest.mark.parametrize("rec", [
    {"type": "feature_level", "name": TRANSACTION_VERSION, "level": 3},
    {"type": "feature_level", "name": "no.such.version", "level": 1},
    {"type": "feature_level", "name": TRANSACTION_VERSION, "level": "2"},
    {"type": "feature_level", "name": TRANSACTION_VERSION, "level": 1, "epoch": -2},
])
def test_levels_outside_what_this_release_supports_are_refused(rec: dict[str, object]) -> None:
    with pytest.raises(KafkaError):
        check_record(rec)


def test_a_snapshot_keeps_the_levels_and_their_epoch() -> None:
    image = MetadataImage()
    image.apply_all([(0, {"type": "cluster_id", "cluster_id": "c"}),
                     (1, {"type": "feature_level", "name": TRANSACTION_VERSION, "level": 0}),
                     (2, {"type": "feature_level", "name": TRANSACTION_VERSION, "level": 2})])
    assert image.features == FinalizedFeatures(2, ((TRANSACTION_VERSION, 2),))
    again = image_from_records(image.next_offset, image_records(image))
    assert again.features == image.features


def test_api_versions_fields() -> None:
    finalized = FinalizedFeatures(7, ((TRANSACTION_VERSION, 2),))
    assert features_fields(2, finalized) == {}
    v3 = features_fields(3, finalized)
    assert v3["supported_features"] == []  # KAFKA-17011: ranges from 0 left out before v4
    assert v3["finalized_features_epoch"] == 7
    assert v3["finalized_features"] == [{"name": TRANSACTION_VERSION, "max_version_level": 2,
                                         "min_version_level": 2}]
    assert features_fields(4, finalized)["supported_features"] == [
        {"name": TRANSACTION_VERSION, "min_version": 0, "max_version": 2}]


def test_update_features_upgrades_downgrades_and_refuses_all_or_nothing() -> None:
    lg = ControllerLogic(MetadataImage(), ControllerConfig(bootstrap_features=()))
    lg.bootstrap()
    lg.take_pending()
    assert lg.image.features.level(TRANSACTION_VERSION) == 0  # an older cluster
    assert lg.update_features([(TRANSACTION_VERSION, 2, 1)], validate_only=True) == [
        (TRANSACTION_VERSION, None)]
    assert lg.take_pending() == []  # validate only
    assert lg.update_features([(TRANSACTION_VERSION, 2, 1)], False) == [
        (TRANSACTION_VERSION, None)]
    assert lg.image.features.level(TRANSACTION_VERSION) == 2
    assert [r["level"] for _, r in lg.take_pending()] == [2]
    # an upgrade request may not lower it; a downgrade may; a level past 2 is refused
    (refused,) = lg.update_features([(TRANSACTION_VERSION, 1, 1)], False)
    assert refused[1] is not None and "downgrade" in refused[1]
    (refused,) = lg.update_features([(TRANSACTION_VERSION, 3, 1)], False)
    assert refused[1] is not None and "supported range" in refused[1]
    assert lg.take_pending() == []
    assert lg.update_features([(TRANSACTION_VERSION, 0, 2)], False) == [
        (TRANSACTION_VERSION, None)]
    assert lg.image.features.levels == ()  # level 0: no longer finalized
    assert lg.update_features([(TRANSACTION_VERSION, 0, 2)], False) == [
        (TRANSACTION_VERSION, None)]
    assert [r["level"] for _, r in lg.take_pending()] == [0]  # the second wrote nothing


def test_format_options_parse_and_merge_over_a_release() -> None:
    from floodmark.features import FeatureError, bootstrap_levels, parse_feature

    assert parse_feature(" transaction.version = 0") == (TRANSACTION_VERSION, 0)
    assert bootstrap_levels() == ((TRANSACTION_VERSION, 2),)  # Kafka 4.x's, and floodmark's
    assert bootstrap_levels("3.9") == ((TRANSACTION_VERSION, 0),)
    assert bootstrap_levels("4.0") == ((TRANSACTION_VERSION, 2),)
    assert bootstrap_levels("3.9", [(TRANSACTION_VERSION, 1)]) == ((TRANSACTION_VERSION, 1),)
    for bad in ("transaction.version=3", "x=1", "transaction.version", "=1",
                "transaction.version=-1"):
        with pytest.raises(FeatureError):
            parse_feature(bad)
    with pytest.raises(FeatureError, match="is not one this release knows"):
        bootstrap_levels("2.8")


def test_the_controller_formats_the_levels_its_options_name() -> None:
    import argparse

    from floodmark.controller.startup import add_controller_arguments, controller_setup

    p = argparse.ArgumentParser()
    p.add_argument("--node-id", type=int, default=0)
    add_controller_arguments(p)
    setup = controller_setup(p.parse_args(["--feature", "transaction.version=0"]), 0)
    assert setup.config.bootstrap_features == ((TRANSACTION_VERSION, 0),)
    lg = ControllerLogic(MetadataImage(), setup.config)
    lg.bootstrap()
    assert [(r["name"], r["level"]) for _, r in lg.take_pending()
            if r["type"] == "feature_level"] == [(TRANSACTION_VERSION, 0)]
    assert lg.image.features.level(TRANSACTION_VERSION) == 0
    default = controller_setup(p.parse_args([]), 0)
    assert default.config.bootstrap_features == ((TRANSACTION_VERSION, 2),)
