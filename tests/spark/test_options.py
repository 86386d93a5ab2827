"""Option parsing of the Spark connector (names and rules of Spark's Kafka connector)."""

from __future__ import annotations

from pathlib import Path

import pytest

from floodmark.constants import READ_COMMITTED

pytest.importorskip("pyarrow")
pytest.importorskip("numpy")


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
    with pytest.raises(OptionError, match=r"needs sasl\.username and sasl\.password"):
        parse_source_options({**BS, "subscribe": "t", "kafka.security.protocol": "SASL_SSL",
                              "kafka.sasl.mechanism": "SCRAM-SHA-512"}, streaming=True)
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


def test_security_options_pass_through_to_the_client(tmp_path: Path) -> None:
    """kafka.security.protocol / kafka.ssl.* / kafka.sasl.* reach ClientSecurity, in
    librdkafka's names or the Java client's (sasl.jaas.config), for the source and the sink;
    a mistake is one line without the password, and no repr shows it."""
    from floodmark.spark.fetcher import security_of
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a connection is made")
    rdkafka = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanisms": "SCRAM-SHA-512",
               "kafka.sasl.username": "alice", "kafka.sasl.password": "pw-123",
               "kafka.ssl.ca.location": str(ca)}
    java = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                      'required username="alice" password="pw-123";',
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(ca)}
    for given in (rdkafka, java):
        source = parse_source_options({**BS, "subscribe": "t", **given}, streaming=True)
        sink = parse_sink_options({**BS, "topic": "t", **given})
        for props in (source.client.security_properties, sink.security_properties):
            sec = security_of(props)
            assert (sec.security_protocol.value, sec.sasl_mechanism, sec.sasl_username,
                    sec.sasl_password, sec.ca_location) == (
                "SASL_SSL", "SCRAM-SHA-512", "alice", "pw-123", str(ca))
        assert "pw-123" not in repr(source) + repr(sink)
    for bad, needle in ((dict(rdkafka, **{"kafka.ssl.ca.location": str(tmp_path / "nope")}),
                         "no such file"),
                        (dict(rdkafka, **{"kafka.sasl.mechanisms": "GSSAPI"}),
                         "sasl.mechanisms=GSSAPI"),
                        (dict(java, **{"kafka.sasl.jaas.config": 'x.Y required password="pw-123";'}),
                         "login module")):
        for parse in (lambda o: parse_source_options({**BS, "subscribe": "t", **o},
                                                     streaming=True),
                      lambda o: parse_sink_options({**BS, "topic": "t", **o})):
            with pytest.raises(OptionError, match=needle) as err:
                parse(bad)
            assert "pw-123" not in str(err.value) and "\n" not in str(err.value)


def test_check_crcs_is_kafkas_setting_default_true() -> None:
    """kafka.check.crcs: Kafka's consumer default (true), which Spark's Kafka source keeps."""
    src = {**BS, "subscribe": "a"}
    assert parse_source_options(src, streaming=False).client.check_crcs is True
    off = parse_source_options({**src, "kafka.check.crcs": "false"}, streaming=False)
    assert off.client.check_crcs is False
    with pytest.raises(OptionError, match=r"kafka\.check\.crcs must be true or false"):
        parse_source_options({**src, "kafka.check.crcs": "sometimes"}, streaming=False)
