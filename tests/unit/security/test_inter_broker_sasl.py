"""SASL between brokers, pure parts: Kafka's JAAS text (``security.jaas``), a broker's login on
a SASL inter-broker listener (``security.inter_broker`` through ``ClientSecurity.for_node`` and
``BrokerConfig``), and the one-line-per-peer record of refusals (``broker.peer_logins``)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from floodmark.broker.config import BrokerConfig
from floodmark.broker.peer_logins import PeerLogins
from floodmark.security.channel import ChannelSecurity
from floodmark.security.client_security import ClientSecurity
from floodmark.security.inter_broker import inter_broker_sasl, jaas_setting
from floodmark.security.jaas import jaas_credentials, parse_jaas_config
from floodmark.security.listeners import SecurityProtocol

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
SECRET = "s3cr\"et;=x"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_kafka_jaas_syntax_is_read() -> None:
    entry = parse_jaas_config(f'{SCRAM} required\n  username="broker"\n  password='
                              f'{_quoted(SECRET)} tokenauth=false ;')
    assert (entry.module, entry.flag) == (SCRAM, "required")
    assert dict(entry.options) == {"username": "broker", "password": SECRET,
                                   "tokenauth": "false"}
    assert SECRET not in repr(entry)
    # Kafka's broker form for PLAIN carries user_<name> options: read, not used
    assert jaas_credentials(f'{PLAIN} required username="admin" password="pw" '
                            f'user_admin="pw" user_alice="a";', "PLAIN") == ("admin", "pw")
    assert jaas_credentials(f"{PLAIN} Optional username=admin password=pw;") == ("admin", "pw")


@pytest.mark.parametrize(("text", "needle"), [
    ("", "is empty"),
    ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;', "login module"),
    (f'{SCRAM} username="b" password={_quoted(SECRET)};', "control flag"),
    (f'{SCRAM} maybe username="b" password={_quoted(SECRET)};', "control flag"),
    (f'{SCRAM} required username="b" password={_quoted(SECRET)}', "does not end with ';'"),
    (f'{SCRAM} required username="b" password={_quoted(SECRET)}; {PLAIN} required;', "one login"),
    (f'{SCRAM} required username="b" password;', "needs ="),
    (f'{SCRAM} required username="b" password="open;', "unclosed quote"),
    (f'{SCRAM} required username="b";', 'password="..."'),
])
def test_anything_else_is_one_line_without_the_password(text: str, needle: str) -> None:
    with pytest.raises(ValueError) as err:
        jaas_credentials(text, what="listener.name.internal.scram-sha-512.sasl.jaas.config")
    message = str(err.value)
    assert needle in message and "\n" not in message
    assert message.startswith("listener.name.internal.scram-sha-512.sasl.jaas.config")
    assert "open" not in message and "s3cr" not in message


def test_the_login_module_must_match_the_mechanism() -> None:
    with pytest.raises(ValueError, match="does not log in with SASL mechanism PLAIN"):
        jaas_credentials(f'{SCRAM} required username="b" password="p";', "PLAIN")


def _settings(**extra: object) -> dict[str, object]:
    return {"listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            jaas_setting("INTERNAL", "SCRAM-SHA-512"):
                f'{SCRAM} required username="broker" password={_quoted(SECRET)};', **extra}


def test_a_broker_logs_in_on_its_sasl_inter_broker_listener(tmp_path: Path) -> None:
    assert jaas_setting("INTERNAL", "SCRAM-SHA-512") == \
        "listener.name.internal.scram-sha-512.sasl.jaas.config"
    config = BrokerConfig.load(data_dir=tmp_path, overrides=[
        f"{k}={v}" for k, v in _settings().items()])
    config.validate()
    sec = config.inter_broker_security
    assert (sec.security_protocol, sec.sasl_mechanism, sec.sasl_username, sec.sasl_password) \
        == (SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-512", "broker", SECRET)
    assert SECRET not in repr(sec) and SECRET not in sec.describe()
    assert "SASL/SCRAM-SHA-512 as User:broker" in sec.describe()
    # PLAINTEXT and SSL inter-broker listeners need none of it
    plain = ClientSecurity.for_node(lambda _n: None, SecurityProtocol.PLAINTEXT)
    assert not plain.uses_sasl and plain.sasl_username == ""


@pytest.mark.parametrize(("change", "needle"), [
    ({"sasl.mechanism.inter.broker.protocol": None},
     "sasl.mechanism.inter.broker.protocol=GSSAPI"),
    ({"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}, "PLAIN, SCRAM-SHA-256"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
     "listener.name.internal.scram-sha-256.sasl.jaas.config is not set"),
    ({"listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-256"},
     "is not enabled on the inter-broker listener INTERNAL"),
    ({jaas_setting("INTERNAL", "SCRAM-SHA-512"):
      f'{PLAIN} required username="broker" password={_quoted(SECRET)};'},
     "PlainLoginModule does not log in with SASL mechanism SCRAM-SHA-512"),
])
def test_a_mistake_is_one_line_at_start(change: dict[str, object], needle: str) -> None:
    settings = _settings()
    for k, v in change.items():
        if v is None:
            settings.pop(k)
        else:
            settings[k] = v
    with pytest.raises(ValueError) as err:
        inter_broker_sasl(lambda n: settings.get(n, "GSSAPI" if n.startswith("sasl.mech")
                                                 else "SCRAM-SHA-256,SCRAM-SHA-512"
                                                 if n == "sasl.enabled.mechanisms" else None),
                          "INTERNAL")
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert "s3cr" not in str(err.value)


def test_a_broker_without_any_inter_broker_login_starts_and_says_so_when_it_dials(
        tmp_path: Path) -> None:
    """A lone broker whose one listener is SASL (the inter-broker listener by default) starts
    as before; dialling a broker with it fails at once with what to set."""
    from floodmark.client.sasl import AuthenticationError, sasl_steps

    config = BrokerConfig.load(data_dir=tmp_path, overrides=[
        "listeners=SASL://127.0.0.1:0", "listener.security.protocol.map=SASL:SASL_PLAINTEXT"])
    sec = config.inter_broker_security
    assert sec.uses_sasl and sec.sasl_mechanism == ""
    assert sec.describe() == "SASL_PLAINTEXT without a SASL login"
    with pytest.raises(AuthenticationError, match=r"sasl\.mechanism\.inter\.broker\.protocol"):
        next(sasl_steps(sec))


def test_a_broker_with_a_bad_jaas_entry_does_not_start(tmp_path: Path) -> None:
    bad = {jaas_setting("INTERNAL", "SCRAM-SHA-512"): f"{SCRAM} required password=x;"}
    with pytest.raises(ValueError, match="needs username") as err:
        BrokerConfig.load(data_dir=tmp_path,
                          overrides=[f"{k}={v}" for k, v in _settings(**bad).items()])
    assert "=x" not in str(err.value)


def test_the_controller_channel_keeps_refusing_sasl() -> None:
    settings = {"controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:SASL_SSL"}
    with pytest.raises(ValueError, match="PLAINTEXT or SSL"):
        ChannelSecurity.from_settings(settings.get)


def test_a_refusing_peer_is_one_line_until_its_reason_changes(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    logins = PeerLogins(3, "replica fetching", backoff_s=1.0, clock=lambda: now[0])
    assert logins.wait_s(1) == 0.0
    with caplog.at_level(logging.INFO, logger="floodmark.broker.peer_logins"):
        for _ in range(20):  # twenty partitions, or tries, hitting the same refusal
            logins.refused(1, "SASL_AUTHENTICATION_FAILED: invalid credentials", "hint")
        assert logins.wait_s(1) == 1.0 and logins.wait_s(2) == 0.0
        now[0] += 0.4
        assert logins.wait_s(1) == pytest.approx(0.6)
        logins.refused(1, "TOPIC_AUTHORIZATION_FAILED")
        logins.accepted(1)
        logins.accepted(1)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "broker 3: replica fetching from broker 1 refused: SASL_AUTHENTICATION_FAILED: "
        "invalid credentials (hint); retrying every 1 s",
        "broker 3: replica fetching from broker 1 refused: TOPIC_AUTHORIZATION_FAILED; "
        "retrying every 1 s",
        "broker 3: replica fetching from broker 1 accepted again"]
    assert logins.wait_s(1) == 0.0 and not logins.is_refused(1)


def test_the_refusing_broker_logs_a_repeated_failure_once_a_minute() -> None:
    """The leader's side: the same failure from the same host within a minute is counted into
    the next line, not logged (``broker.authentication.RepeatedFailures``)."""
    from floodmark.broker.authentication import MAX_REPEAT_KEYS, RepeatedFailures

    now = [0.0]
    repeats = RepeatedFailures(clock=lambda: now[0])
    why = "user 'broker-4': wrong password"
    assert repeats.seen("127.0.0.1", "INTERNAL", why) == 0  # logged
    for _ in range(59):  # a retry a second
        now[0] += 1.0
        assert repeats.seen("127.0.0.1", "INTERNAL", why) is None
    assert repeats.seen("127.0.0.2", "INTERNAL", why) == 0  # another host: its own line
    assert repeats.seen("127.0.0.1", "INTERNAL", "unknown user") == 0  # another reason too
    now[0] += 1.0
    assert repeats.seen("127.0.0.1", "INTERNAL", why) == 59  # a minute on: one line for 59
    assert repeats.seen("127.0.0.1", "INTERNAL", why) is None
    for i in range(MAX_REPEAT_KEYS + 10):  # many user names: bounded memory
        repeats.seen("10.0.0.1", "CLIENT", f"user 'u{i}': unknown user")
    assert len(repeats._last) == MAX_REPEAT_KEYS


def test_the_jaas_entry_can_live_in_the_toml_file(tmp_path: Path) -> None:
    """Off the command line: the TOML file's quoted Kafka name, its value as written."""
    toml = tmp_path / "broker.toml"
    lines = [f'"{k}" = {_toml_string(str(v))}' for k, v in _settings().items()]
    toml.write_text("\n".join(lines) + "\n")
    config = BrokerConfig.load(data_dir=tmp_path / "data", config_file=toml)
    sec = config.inter_broker_security
    assert (sec.sasl_mechanism, sec.sasl_username, sec.sasl_password) == (
        "SCRAM-SHA-512", "broker", SECRET)


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
