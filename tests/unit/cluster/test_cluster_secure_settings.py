"""``cluster.secure`` (what ``cluster up --security sasl_ssl`` gives each broker) and the chaos
workers' client security, as pure functions over a temporary directory: the inter-broker
listener is SASL_SSL with SCRAM-SHA-512, the brokers' JAAS entry is in a 0600 TOML file the
broker's own config loader reads (never in the flags), and the admin's ``client.properties``
turns into kafka-python's arguments."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path

import pytest

from floodmark.broker.config import BrokerConfig
from floodmark.chaos.worker_config import confluent_config, kafka_python_security
from floodmark.cluster.secure import NODE_USER, ClusterSecurity
from floodmark.security.inter_broker import inter_broker_sasl


def _secure(tmp_path: Path, mode: str) -> ClusterSecurity:
    sec = ClusterSecurity.of(mode, tmp_path, "127.0.0.1", "127.0.0.1")
    sec.prepare([1, 2])
    return sec


def test_sasl_ssl_brokers_log_in_to_each_other_from_a_private_file(tmp_path: Path) -> None:
    sec = _secure(tmp_path, "sasl_ssl")
    flags = sec.broker_settings(1, "127.0.0.1", 9092)
    assert flags["listener.security.protocol.map"] == \
        "CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SSL"
    assert flags["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert flags["listener.name.internal.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert flags["listener.name.internal.ssl.client.auth"] == "required"  # and certificates
    assert flags["super.users"] == f"User:admin;User:{NODE_USER}"
    assert "listener.name.internal.ssl.principal.mapping.rules" not in flags
    password = sec.password_path(NODE_USER).read_text().strip()
    assert not any(password in f"{k}={v}" for k, v in flags.items())
    path = sec.broker_config_file()
    assert path is not None and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(sec.password_path(NODE_USER).stat().st_mode) == 0o600
    # The broker's loader reads the file with the flags (as cluster_member --config does).
    config = BrokerConfig.load(data_dir=tmp_path / "b1", listen="127.0.0.1:9092",
                               config_file=path,
                               overrides=[f"{k}={v}" for k, v in flags.items()])
    login = inter_broker_sasl(config.get, "INTERNAL")
    assert login is not None
    assert (login.mechanism, login.username, login.password) == \
        ("SCRAM-SHA-512", NODE_USER, password)
    assert [u.name for u in sec.scram_users()] == ["admin", NODE_USER]
    assert password not in repr(sec.scram_users())


def test_a_second_prepare_keeps_the_passwords(tmp_path: Path) -> None:
    sec = _secure(tmp_path, "sasl_ssl")
    before = sec.password_path(NODE_USER).read_text()
    text = sec.inter_broker_config_path.read_text()
    sec.prepare([1, 2, 3])
    assert sec.password_path(NODE_USER).read_text() == before
    assert sec.inter_broker_config_path.read_text() == text


def test_ssl_mode_keeps_mtls_between_brokers(tmp_path: Path) -> None:
    sec = _secure(tmp_path, "ssl")
    flags = sec.broker_settings(1, "127.0.0.1", 9092)
    assert flags["listener.security.protocol.map"] == "CLIENT:SSL,INTERNAL:SSL,CONTROLLER:SSL"
    assert "sasl.mechanism.inter.broker.protocol" not in flags
    assert sec.broker_config_file() is None and sec.scram_users() == []
    assert not sec.inter_broker_config_path.exists()


def test_chaos_workers_take_the_client_properties(tmp_path: Path) -> None:
    sec = _secure(tmp_path, "sasl_ssl")
    args = argparse.Namespace(bootstrap="10.0.0.2:9092", isolation=None,
                              command_config=str(tmp_path / "client.properties"))
    kp = kafka_python_security(args)
    assert kp == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                  "sasl_plain_username": "admin",
                  "sasl_plain_password": sec.admin_password_path.read_text().strip(),
                  "ssl_cafile": str(sec.ca_path)}
    conf = confluent_config(args, "g")
    assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.username"] == "admin"
    plain = argparse.Namespace(bootstrap="b:1", isolation=None, command_config=None)
    assert kafka_python_security(plain) == {}
    assert "security.protocol" not in confluent_config(plain, "g")
    odd = tmp_path / "odd.properties"
    odd.write_text("sasl.oauthbearer.method=oidc\n")
    with pytest.raises(ValueError, match="no kafka-python equivalent"):
        kafka_python_security(argparse.Namespace(command_config=str(odd)))


def test_a_broker_setting_given_replaces_the_security_modes(tmp_path: Path) -> None:
    """``cluster up --security sasl_ssl --set listener.name.client.sasl.enabled.mechanisms=...``:
    the user's value comes after the mode's in the broker's flags, and the last one wins
    (tests/compat/librdkafka_suite.py adds PLAIN this way)."""
    from floodmark.cluster.local import LocalCluster

    mechanisms = "listener.name.client.sasl.enabled.mechanisms"
    users = tmp_path / "plain-users"
    users.write_text("admin:admin-secret\n")
    users.chmod(0o600)
    cluster = LocalCluster(tmp_path / "c", brokers=1, security="sasl_ssl",
                           broker_settings={mechanisms: "SCRAM-SHA-512,PLAIN",
                                            "floodmark.sasl.plain.users.file": str(users)})
    (broker,) = cluster.broker_ids
    secure = cluster.security
    assert secure is not None
    secure.prepare(cluster.broker_ids)
    cmd = cluster._command(broker)
    sets = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--set"]
    assert f"{mechanisms}=SCRAM-SHA-512" in sets  # the mode's, first
    config = BrokerConfig.load(data_dir=tmp_path / "b", listen="127.0.0.1:9092",
                               config_file=Path(cmd[cmd.index("--config") + 1]),
                               overrides=sets)
    assert config.get(mechanisms) == "SCRAM-SHA-512,PLAIN"
