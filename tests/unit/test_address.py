"""floodmark.address: the one HOST:PORT rule every listener, bootstrap list and controller
address in the project reads."""

from __future__ import annotations

import pytest

from floodmark.address import BadAddress, format_host_port, parse_bootstrap, parse_host_port


@pytest.mark.parametrize(("text", "default_port", "want"), [
    ("9092", None, ("127.0.0.1", 9092)),            # a port alone: that port on 127.0.0.1
    (":9092", None, ("127.0.0.1", 9092)),
    (" 9093 ", None, ("127.0.0.1", 9093)),
    ("0.0.0.0:9092", None, ("0.0.0.0", 9092)),      # every interface, only when asked
    ("localhost:0", None, ("localhost", 0)),        # port 0: any free port
    ("broker-1.example:65535", None, ("broker-1.example", 65535)),
    ("[::1]:9092", None, ("::1", 9092)),            # IPv6 in brackets
    ("::1:9092", None, ("::1", 9092)),              # the last colon splits, as Kafka reads it
    ("PLAINTEXT://h:9092", None, ("h", 9092)),      # a listener scheme is dropped
    ("myhost", 8080, ("myhost", 8080)),             # a host alone: the caller's default port
    ("[::1]", 8080, ("::1", 8080)),
    ("0.0.0.0", 9092, ("0.0.0.0", 9092)),
])
def test_good_addresses(text: str, default_port: int | None, want: tuple[str, int]) -> None:
    assert parse_host_port(text, default_port) == want


@pytest.mark.parametrize(("text", "default_port"), [
    ("99999", None), ("70000", 8080), (":65536", None), ("h:-1", None), ("abc:x", None),
    ("h:", None), ("", 9092), (":", None), ("myhost", None), ("[::1", None), ("[]:9092", None),
    ("[::1]x9092", None), ("a b:9092", None), ("h:9092\nh2", None),
])
def test_bad_addresses_are_one_line_naming_the_value(text: str, default_port: int | None
                                                     ) -> None:
    with pytest.raises(BadAddress) as info:
        parse_host_port(text, default_port, what="--listen")
    msg = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "\n" not in msg and msg.startswith(f"--listen {text.strip()!r} is not HOST:PORT")


def test_min_port_refuses_port_zero() -> None:
    assert parse_host_port("h:0") == ("h", 0)
    with pytest.raises(BadAddress, match=r"port 1 to 65535"):
        parse_host_port("h:0", min_port=1)


def test_bootstrap_lists() -> None:
    assert parse_bootstrap(" a:1, 9092 ,[::1]:9093,PLAINTEXT://b:2,") == [
        ("a", 1), ("127.0.0.1", 9092), ("::1", 9093), ("b", 2)]
    for bad, item in (("localhost", "localhost"), ("a:1,b:0", "b:0"), ("a:1,b:x", "b:x")):
        with pytest.raises(BadAddress) as info:
            parse_bootstrap(bad)
        assert str(info.value) == f"bootstrap address {item!r} is not host:port"
    with pytest.raises(BadAddress, match="no bootstrap address given"):
        parse_bootstrap(" , ")


@pytest.mark.parametrize(("host", "port"), [("127.0.0.1", 0), ("::1", 9092), ("h", 1)])
def test_format_reads_back(host: str, port: int) -> None:
    assert parse_host_port(format_host_port(host, port)) == (host, port)


def test_the_project_has_one_parser() -> None:
    """The old copies are gone; their importers get the one parser."""
    import floodmark.broker.config as broker_config
    import floodmark.client.cluster as cluster
    import floodmark.client.connection as connection
    import floodmark.controller.rpc as rpc

    assert not hasattr(broker_config, "parse_host_port") or (
        broker_config.parse_host_port is parse_host_port)
    assert cluster.parse_bootstrap is parse_bootstrap and cluster.BadAddress is BadAddress
    assert not hasattr(connection, "parse_bootstrap") or connection.parse_bootstrap is parse_bootstrap
    assert not hasattr(rpc, "parse_address")
