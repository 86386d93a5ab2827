"""ssl.principal.mapping.rules (Kafka's syntax), the ssl.* settings' checks, client
properties files, and secrets kept out of DescribeConfigs."""

from __future__ import annotations

from pathlib import Path

import pytest

from floodmark.security.client_security import ClientSecurity, read_properties
from floodmark.security.listeners import SecurityProtocol
from floodmark.security.principal_mapping import NoMatchingRule, map_name, parse_rules
from floodmark.security.tls import ClientAuth, ssl_settings
from floodmark.settings import is_sensitive


@pytest.mark.parametrize(("rules", "dn", "name"), [
    (None, "CN=alice,O=acme", "CN=alice,O=acme"),
    ("DEFAULT", "CN=alice,O=acme", "CN=alice,O=acme"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$3/", "CN=bob,OU=eng,O=acme", "bob@acme"),
    ("RULE:^CN=(.*?),O=.*$/$1/U, DEFAULT", "CN=bob,O=acme", "BOB"),
    ("RULE:^CN=(.*?),O=.*$/$1/L,DEFAULT", "CN=Bob,O=acme", "bob"),
    ("RULE:^OU=x$/nope/,DEFAULT", "CN=carol", "CN=carol"),  # first matching rule wins
    ("RULE:^CN=(.*)\\/x$/$1/", "CN=a/x", "a"),  # an escaped slash in the pattern
    ("RULE:^CN=(.*)$/user-$1/\nRULE:.*/other/", "CN=d", "user-d"),  # newline-separated
])
def test_mapping_rules(rules: str | None, dn: str, name: str) -> None:
    assert map_name(parse_rules(rules), dn) == name


def test_no_matching_rule_refuses() -> None:
    with pytest.raises(NoMatchingRule, match="no rule"):
        map_name(parse_rules("RULE:^CN=admin$/admin/"), "CN=mallory")


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*$/$1/", "RULE:abc", "SOMETHING",
                                   "RULE:^(a)$/$2/", "DEFAULT junk"])
def test_bad_rules_are_one_line(rules: str) -> None:
    with pytest.raises(ValueError, match=r"ssl\.principal\.mapping\.rules") as info:
        parse_rules(rules)
    assert "\n" not in str(info.value)


def test_ssl_settings_defaults_listener_prefix_and_errors(tmp_path: Path) -> None:
    store = tmp_path / "k.pem"
    store.write_text("x")
    s = ssl_settings({"ssl.keystore.location": str(store),
                      "listener.name.internal.ssl.client.auth": "required"}.get, "INTERNAL")
    assert s.client_auth is ClientAuth.REQUIRED and s.check_hostname
    assert s.enabled_protocols == ("TLSv1.2", "TLSv1.3")
    assert ssl_settings({"ssl.endpoint.identification.algorithm": ""}.get).check_hostname \
        is False
    for bad, message in [({"ssl.keystore.type": "JKS"}, "PEM stores only"),
                         ({"ssl.client.auth": "maybe"}, "ssl.client.auth=maybe"),
                         ({"ssl.enabled.protocols": "TLSv1.1"}, "only TLSv1.2 and TLSv1.3"),
                         ({"ssl.keystore.location": str(tmp_path / "missing")}, "no such file"),
                         ({"ssl.keystore.key": "k"}, "go together")]:
        with pytest.raises(ValueError, match=message):
            ssl_settings(bad.get)
    secret = ssl_settings({"ssl.key.password": "hunter2",
                           "ssl.keystore.location": str(store)}.get)
    assert "hunter2" not in repr(secret)


def test_client_properties_file(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    path = tmp_path / "client.properties"
    path.write_text(f"# a comment\nsecurity.protocol=SSL\nssl.ca.location={ca}\n"
                    "sasl.mechanisms = SCRAM-SHA-512\nsasl.password=s3cret\n")
    sec = ClientSecurity.load(path)
    assert sec.security_protocol is SecurityProtocol.SSL and sec.ca_location == str(ca)
    assert sec.extra == {}  # sasl.* are read (client/sasl.py), not kept aside
    assert (sec.sasl_mechanism, sec.sasl_password) == ("SCRAM-SHA-512", "s3cret")
    assert "s3cret" not in repr(sec) and "s3cret" not in sec.describe()
    # Kafka's Java names for PEM stores work too.
    java = ClientSecurity.from_properties({"security.protocol": "SSL",
                                           "ssl.truststore.location": str(ca)})
    assert java.ca_location == str(ca)
    (tmp_path / "bad.properties").write_text("no equals sign here\n")
    with pytest.raises(ValueError, match=r"bad.properties:1: expected key=value"):
        read_properties(tmp_path / "bad.properties")
    with pytest.raises(ValueError, match="unknown security protocol"):
        ClientSecurity.from_properties({"security.protocol": "tls"})
    with pytest.raises(ValueError, match="no such file"):
        ClientSecurity.from_properties({"ssl.ca.location": str(tmp_path / "nope")})


def test_secrets_are_sensitive() -> None:
    assert is_sensitive("ssl.key.password") and is_sensitive("ssl.keystore.key")
    assert is_sensitive("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config")
    assert not is_sensitive("ssl.keystore.location") and not is_sensitive("log.retention.ms")
