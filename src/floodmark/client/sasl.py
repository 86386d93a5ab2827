"""The client side of SASL: SaslHandshake v1, then SaslAuthenticate v2 rounds, sans I/O.

``sasl_steps`` is a generator of requests ``(api_key, version, body)``: send each, and give the
decoded response back with ``send``; it ends when the broker has authenticated the client and
raises ``AuthenticationError`` (one line, the broker's KIP-152 message, never the password)
when it has not. ``authenticate`` drives it over a blocking request function; the asyncio
connection drives it with ``await``. SCRAM's client is the ``scramp`` library's, which also
checks the broker's final signature (a broker that does not know the password cannot pass).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any

from floodmark.errors import FloodmarkError
from floodmark.security import ClientSecurity

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 2

Request = tuple[int, int, Mapping[str, Any]]


class AuthenticationError(FloodmarkError):
    """The broker did not authenticate this client (a ``RequestFailed`` of its own kind)."""


def _check(answer: Any, what: str) -> None:
    code = int(answer.error_code)
    if code:
        message = getattr(answer, "error_message", None)
        names = {33: "UNSUPPORTED_SASL_MECHANISM", 34: "ILLEGAL_SASL_STATE",
                 58: "SASL_AUTHENTICATION_FAILED"}
        extra = ""
        if code == 33:
            extra = f" (the broker enables {', '.join(str(m) for m in answer.mechanisms)})"
        raise AuthenticationError(f"{what}: {names.get(code, f'error {code}')}"
                                  f"{': ' + str(message) if message else ''}{extra}")


def sasl_steps(security: ClientSecurity) -> Generator[Request, Any, None]:
    mechanism = security.sasl_mechanism
    if not mechanism:  # a broker on a SASL inter-broker listener without a login of its own
        raise AuthenticationError(
            "no SASL login configured (a broker's: sasl.mechanism.inter.broker.protocol and "
            "listener.name.<listener>.<mechanism>.sasl.jaas.config)")
    answer = yield (SASL_HANDSHAKE, HANDSHAKE_VERSION, {"mechanism": mechanism})
    _check(answer, f"SaslHandshake {mechanism}")
    if mechanism == "OAUTHBEARER":
        # its module (JSON, URLs, HTTP) only for this mechanism
        from floodmark.client.oauthbearer import TokenUnavailable, access_token, initial_response

        try:
            jwt = access_token(security.extra)
        except TokenUnavailable as exc:
            raise AuthenticationError(f"SASL/OAUTHBEARER: {exc}") from None
        answer = yield (SASL_AUTHENTICATE, AUTHENTICATE_VERSION,
                        {"auth_bytes": initial_response(jwt)})
        _check(answer, "SASL/OAUTHBEARER authentication")
        if bytes(answer.auth_bytes or b""):
            # RFC 7628 §3.2.2: a refusal comes as an error challenge; the client answers
            # with a lone 0x01 and the broker then fails the exchange (with its message).
            answer = yield (SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": b"\x01"})
            _check(answer, "SASL/OAUTHBEARER authentication")
            raise AuthenticationError("SASL/OAUTHBEARER authentication: the broker refused the "
                                      "token")
        return
    if mechanism == "PLAIN":
        token = b"\0" + security.sasl_username.encode() + b"\0" + security.sasl_password.encode()
        answer = yield (SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": token})
        _check(answer, "SASL/PLAIN authentication")
        return
    import scramp  # SCRAM only: the library loads package metadata, a cost every client paid

    try:
        client = scramp.ScramClient([mechanism], security.sasl_username,
                                    security.sasl_password)
        first = client.get_client_first().encode()
    except scramp.ScramException as exc:
        raise AuthenticationError(f"SASL/{mechanism}: {exc}") from None
    answer = yield (SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": first})
    _check(answer, f"SASL/{mechanism} authentication")
    try:
        client.set_server_first(bytes(answer.auth_bytes).decode())
        final = client.get_client_final().encode()
    except (scramp.ScramException, UnicodeDecodeError) as exc:
        raise AuthenticationError(f"SASL/{mechanism}: the broker's first message: "
                                  f"{str(exc).splitlines()[0]}") from None
    answer = yield (SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": final})
    _check(answer, f"SASL/{mechanism} authentication")
    try:
        client.set_server_final(bytes(answer.auth_bytes).decode())
    except (scramp.ScramException, UnicodeDecodeError) as exc:
        raise AuthenticationError(f"SASL/{mechanism}: the broker's final message does not "
                                  f"prove it knows the credential ({exc})") from None


def authenticate(security: ClientSecurity,
                 request: Callable[[int, int, Mapping[str, Any]], Any]) -> None:
    """Run the exchange over a blocking ``request(api_key, version, body)``."""
    steps = sasl_steps(security)
    step = next(steps)
    while True:
        answer = request(*step)
        try:
            step = steps.send(answer)
        except StopIteration:
            return
