"""Option parsing of the Spark connector (names and rules of Spark's Kafka connector)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("numpy")

from floodmark.client.fetch import READ_COMMITTED
from floodmark.compression import Compression
from floodmark.spark.options import (
    OptionError,
    parse_sink_options,
    parse_source_options,
)

BS = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def test_exactly_one_subscription_option() -> None:
    with pytest.raises(OptionError, match="exactly one"):
        parse_source_options(BS, streaming=True)
    with pytest.raises(OptionError, match="exactly one"):
        parse_source_options({**BS, "subscribe": "a", "assign": '{"a":[0]}'}, streaming=True)
    o = parse_source_options({**BS, "assign": '{"a":[1,0],"b":[2]}'}, streaming=True)
    assert o.subscription.assigned == (("a", 0), ("a", 1), ("b", 2))
    assert parse_source_options({**BS, "subscribePattern": "ev.*"},
                                streaming=True).subscription.matches("events")


def test_defaults_follow_spark() -> None:
    s = parse_source_options({**BS, "subscribe": "a"}, streaming=True)
    b = parse_source_options({**BS, "subscribe": "a"}, streaming=False)
    assert s.starting.kind == "latest" and b.starting.kind == "earliest"
    assert b.ending.kind == "latest"
    assert s.fail_on_data_loss is True and s.include_headers is False
    with pytest.raises(OptionError, match="batch"):
        parse_source_options({**BS, "subscribe": "a", "startingOffsets": "latest"},
                             streaming=False)
    with pytest.raises(OptionError, match="streaming"):
        parse_source_options({**BS, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)


def test_offsets_json_and_keys_are_case_insensitive() -> None:
    o = parse_source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": "t",
                              "STARTINGOFFSETS": '{"t":{"0":42,"1":-2}}',
                              "kafka.isolation.level": "read_committed",
                              "maxOffsetsPerTrigger": "10"}, streaming=True)
    assert o.starting.lookup("t", 0) == 42 and o.starting.lookup("t", 1) == -2
    assert o.client.isolation_level == READ_COMMITTED
    assert o.max_offsets_per_trigger == 10
    with pytest.raises(OptionError, match="JSON"):
        parse_source_options({**BS, "subscribe": "t", "startingOffsets": "{bad"}, streaming=True)


def test_rejected_like_spark_and_insecure_settings() -> None:
    for bad in ("kafka.auto.offset.reset", "kafka.enable.auto.commit",
                "kafka.key.deserializer"):
        with pytest.raises(OptionError, match="not supported"):
            parse_source_options({**BS, "subscribe": "t", bad: "x"}, streaming=True)
    # Spark >= 3.0 accepts a group id (and groupIdPrefix); so does this source
    parse_source_options({**BS, "subscribe": "t", "kafka.group.id": "g",
                          "groupIdPrefix": "p"}, streaming=True)
    with pytest.raises(OptionError, match="PLAINTEXT"):
        parse_source_options({**BS, "subscribe": "t", "kafka.security.protocol": "SASL_SSL"},
                             streaming=True)
    with pytest.raises(OptionError, match="required"):
        parse_source_options({"subscribe": "t"}, streaming=True)


def test_sink_is_the_idempotent_producer_with_acks_all() -> None:
    o = parse_sink_options({**BS, "topic": "t", "kafka.linger.ms": "50",
                            "kafka.compression.type": "zstd", "kafka.acks": "-1"})
    assert o.topic == "t" and o.bootstrap_servers == "127.0.0.1:1"
    assert o.compression == Compression.ZSTD
    with pytest.raises(OptionError, match="acks"):
        parse_sink_options({**BS, "kafka.acks": "1"})
    with pytest.raises(OptionError, match="idempotence"):
        parse_sink_options({**BS, "kafka.enable.idempotence": "false"})
    with pytest.raises(OptionError, match=r"compression\.type"):
        parse_sink_options({**BS, "kafka.compression.type": "brotli"})
    with pytest.raises(OptionError, match=r"transactional\.id"):
        parse_sink_options({**BS, "kafka.transactional.id": "x"})
