"""A SASL listener's settings are checked at start: one line, nothing served."""

from __future__ import annotations

from pathlib import Path

import pytest

from floodmark.broker.config import BrokerConfig

SASL_LISTENER = ["listeners=PLAINTEXT://127.0.0.1:0,SASL://127.0.0.1:0",
                 "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT"]


def load(tmp_path: Path, *overrides: str) -> BrokerConfig:
    return BrokerConfig.load(data_dir=tmp_path / "d", listen="127.0.0.1:0",
                             overrides=[*SASL_LISTENER, *overrides])


def users_file(tmp_path: Path) -> str:
    path = tmp_path / "users"
    path.write_text("alice:s3cret\n")
    path.chmod(0o600)
    return f"floodmark.sasl.plain.users.file={path}"


def test_scram_by_default_needs_nothing_else(tmp_path: Path) -> None:
    load(tmp_path)


@pytest.mark.parametrize(("overrides", "message"), [
    (["sasl.enabled.mechanisms=PLAIN"], "floodmark.unsafe.sasl.plain.without.tls=true"),
    (["sasl.enabled.mechanisms=PLAIN", "floodmark.unsafe.sasl.plain.without.tls=true"],
     "names no users file"),
    (["sasl.enabled.mechanisms=GSSAPI"], "GSSAPI not served"),
    (["sasl.enabled.mechanisms= "], "enables no SASL mechanism"),
    (["listener.name.sasl.sasl.enabled.mechanisms=OAUTHBEARER"], "OAUTHBEARER but "
     "sasl.oauthbearer.jwks.endpoint.url names no key set"),
    (["sasl.enabled.mechanisms=PLAIN", "floodmark.unsafe.sasl.plain.without.tls=true",
      "floodmark.sasl.plain.users.file=/nonexistent/users"], "No such file"),
    (["connections.max.reauth.ms=-1"], "must not be negative"),
])
def test_bad_sasl_settings_are_one_line(tmp_path: Path, overrides: list[str],
                                        message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        load(tmp_path, *overrides)
    assert "\n" not in str(info.value)


def test_plain_is_allowed_without_tls_only_when_the_operator_says_so(tmp_path: Path) -> None:
    load(tmp_path, "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
         "floodmark.unsafe.sasl.plain.without.tls=true", users_file(tmp_path))


def test_a_plaintext_only_node_ignores_sasl_settings(tmp_path: Path) -> None:
    BrokerConfig.load(data_dir=tmp_path / "d", listen="127.0.0.1:0",
                      overrides=["sasl.enabled.mechanisms=PLAIN"])


def test_users_file_errors_never_show_a_password(tmp_path: Path) -> None:
    bad = tmp_path / "users"
    bad.write_text("alice-without-colon-s3cret\n")
    with pytest.raises(ValueError, match="line 1") as info:
        load(tmp_path, "sasl.enabled.mechanisms=PLAIN",
             "floodmark.unsafe.sasl.plain.without.tls=true",
             f"floodmark.sasl.plain.users.file={bad}")
    assert "s3cret" not in str(info.value)
