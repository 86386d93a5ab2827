"""Kafka's listener settings parsed: defaults, the protocol map, inter-broker and controller
listener names, and one clear line for each kind of bad input."""

from __future__ import annotations

import re

import pytest

from floodmark.broker.config import BrokerConfig
from floodmark.security.listeners import (
    Endpoint,
    ListenerConfig,
    SecurityProtocol,
    listener_config,
    parse_protocol_map,
)


def parse(settings: dict[str, str], **kw: object) -> ListenerConfig:
    return listener_config(settings.get, listen_host="127.0.0.1", listen_port=9092, **kw)  # type: ignore[arg-type]


def test_no_settings_is_the_one_plaintext_listener_of_listen() -> None:
    cfg = parse({})
    assert not cfg.explicit
    assert cfg.listeners == (Endpoint("PLAINTEXT", "127.0.0.1", 9092, SecurityProtocol.PLAINTEXT),)
    assert cfg.inter_broker.port == 9092
    adv = parse({}, advertised_host="broker.example", advertised_port=19092)
    assert adv.inter_broker == Endpoint("PLAINTEXT", "broker.example", 19092,
                                        SecurityProtocol.PLAINTEXT)


def test_several_listeners_with_a_map_and_advertised_ones() -> None:
    cfg = parse({
        "listeners": "internal://127.0.0.1:9094,EXTERNAL://0.0.0.0:9093,CONTROLLER://:9095",
        "advertised.listeners": "INTERNAL://10.0.0.1:9094,EXTERNAL://kafka.example:443",
        "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SASL_SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "controller.listener.names": "CONTROLLER",
    })
    assert [ep.name for ep in cfg.listeners] == ["INTERNAL", "EXTERNAL"]  # not the controller's
    assert cfg.listener("EXTERNAL").security_protocol is SecurityProtocol.SASL_SSL
    assert cfg.advertised_for("EXTERNAL") == Endpoint("EXTERNAL", "kafka.example", 443,
                                                      SecurityProtocol.SASL_SSL)
    assert cfg.inter_broker == Endpoint("INTERNAL", "10.0.0.1", 9094, SecurityProtocol.SSL)
    assert cfg.controller_protocol is SecurityProtocol.SSL
    assert cfg.controller_listener_names == ("CONTROLLER",)


def test_defaults_follow_kafka() -> None:
    # The default map names each protocol after itself; advertised defaults to listeners;
    # the inter-broker listener defaults to the one named PLAINTEXT.
    cfg = parse({"listeners": "PLAINTEXT://:0,SSL://:0"})
    assert [ep.security_protocol for ep in cfg.listeners] == [SecurityProtocol.PLAINTEXT,
                                                              SecurityProtocol.SSL]
    assert cfg.advertised == cfg.listeners
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert parse({"listeners": "SSL://:0"}).inter_broker_listener_name == "SSL"  # the only one
    assert parse({"listeners": "PLAINTEXT://:0,SSL://:0",
                  "security.inter.broker.protocol": "SSL"}).inter_broker_listener_name == "SSL"
    assert parse_protocol_map(None)["SASL_SSL"] is SecurityProtocol.SASL_SSL


@pytest.mark.parametrize(("settings", "message"), [
    ({"listeners": "PLAINTEXT://:9092,FOO://:9093"}, "FOO is not in listener.security.protocol.map"),
    ({"listener.security.protocol.map": "A:TLS"}, "unknown security protocol 'TLS'"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "port 9092 is used by two listeners"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "PLAINTEXT appears twice"),
    ({"listeners": "PLAINTEXT:9092"}, "is not NAME://HOST:PORT"),
    ({"listeners": "PLAINTEXT://host:port"}, "is not HOST:PORT"),
    ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SSL://h:1"},
     "SSL is not one of listeners"),
    ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:1"},
     "no client can connect to"),
    ({"listeners": "SSL://:1,SASL_SSL://:2"}, "inter.broker.listener.name is not set"),
    ({"listeners": "SSL://:1", "inter.broker.listener.name": "PLAINTEXT"},
     "inter.broker.listener.name=PLAINTEXT is not one of advertised.listeners"),
    ({"listeners": "SSL://:1", "inter.broker.listener.name": "SSL",
      "security.inter.broker.protocol": "SSL"}, "only one of"),
    ({"listeners": "A://:1", "listener.security.protocol.map": "A:SSL,A:SSL"}, "mapped twice"),
    ({"listeners": "SSL://:1", "controller.listener.names": "CTL"}, "CTL is not in"),
    ({"listeners": "SSL://:1", "controller.listener.names": "SSL"},
     "every listener is a controller listener"),
])
def test_bad_input_is_one_line_naming_the_setting(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        parse(settings)
    assert "\n" not in str(info.value)


def test_broker_config_refuses_a_bad_listener_at_load(tmp_path: object) -> None:
    with pytest.raises(ValueError, match=r"not in listener\.security\.protocol\.map"):
        BrokerConfig.load(data_dir=str(tmp_path), overrides=["listeners=BAD://:1"])
    cfg = BrokerConfig.load(data_dir=str(tmp_path), listen="127.0.0.1:0")
    assert not cfg.listeners.explicit  # no listener settings: as before


def test_endpoint_record_round_trip_and_checks() -> None:
    ep = Endpoint("EXTERNAL", "kafka.example", 9093, SecurityProtocol.SSL)
    assert Endpoint.from_record(ep.to_record()) == ep
    for bad in ({"name": "X", "host": "h", "port": 0, "security_protocol": "SSL"},
                {"name": "X", "host": "h", "port": 1, "security_protocol": "NOPE"},
                {"name": "", "host": "h", "port": 1, "security_protocol": "SSL"}, "x"):
        with pytest.raises(ValueError):
            Endpoint.from_record(bad)
