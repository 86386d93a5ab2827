"""Where a client's OAUTHBEARER token comes from (KIP-768's client side), as Kafka's clients
read it from ``sasl.oauthbearer.token.endpoint.url``:

* ``file:///path``: the file holds the access token (a JWT, serialized), re-read at each login, so
  a token refreshed in place by an outside agent is used at the next connection;
* ``https://...`` (or ``http://`` on loopback): the OAuth 2 client-credentials grant (RFC 6749
  §4.4) with ``sasl.oauthbearer.client.id`` / ``sasl.oauthbearer.client.secret`` (HTTP Basic, as
  Kafka sends them) and ``sasl.oauthbearer.scope``; the answer's ``access_token`` is the token.

Errors are one line and never carry the secret or the token.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from floodmark.errors import FloodmarkError

ENDPOINT = "sasl.oauthbearer.token.endpoint.url"
TIMEOUT_S = 10.0


class TokenUnavailable(FloodmarkError):
    """No token could be had (a missing file, an endpoint that refused or did not answer)."""


def access_token(props: Mapping[str, str]) -> str:
    """The token to present, from ``props`` (the client's unread ``sasl.*`` properties)."""
    url = props.get(ENDPOINT, "").strip()
    if not url:
        raise TokenUnavailable(f"OAUTHBEARER needs {ENDPOINT} (file:///path/to/token or the "
                               "identity provider's token endpoint)")
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        path = Path(urllib.parse.unquote(parsed.path))
        try:
            token = path.read_text().strip()
        except OSError as exc:
            raise TokenUnavailable(f"{ENDPOINT}: cannot read {path}: "
                                   f"{exc.strerror or exc}") from None
        if not token:
            raise TokenUnavailable(f"{ENDPOINT}: {path} is empty")
        return token
    if parsed.scheme not in ("https", "http"):
        raise TokenUnavailable(f"{ENDPOINT}={url}: expected a file:, https: or http: URL")
    return _client_credentials(url, props)


def _client_credentials(url: str, props: Mapping[str, str]) -> str:
    client_id = props.get("sasl.oauthbearer.client.id", "")
    secret = props.get("sasl.oauthbearer.client.secret", "")
    if not client_id or not secret:
        raise TokenUnavailable("the client-credentials grant needs sasl.oauthbearer.client.id "
                               "and sasl.oauthbearer.client.secret")
    form = {"grant_type": "client_credentials"}
    if props.get("sasl.oauthbearer.scope"):
        form["scope"] = props["sasl.oauthbearer.scope"]
    import urllib.error  # http.client, email, ...: only a client asking a token endpoint
    import urllib.request

    basic = base64.b64encode(
        f"{urllib.parse.quote(client_id)}:{urllib.parse.quote(secret)}".encode()).decode()
    request = urllib.request.Request(
        url, data=urllib.parse.urlencode(form).encode(), method="POST",
        headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                 "Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            body = answer.read(1 << 20)
    except urllib.error.HTTPError as exc:
        raise TokenUnavailable(f"token endpoint {url} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TokenUnavailable(f"token endpoint {url}: {reason}") from None
    try:
        token = json.loads(body)["access_token"]
    except (ValueError, KeyError, TypeError):
        raise TokenUnavailable(f"token endpoint {url}: no access_token in its answer") from None
    if not isinstance(token, str) or not token:
        raise TokenUnavailable(f"token endpoint {url}: no access_token in its answer")
    return token


def initial_response(token: str) -> bytes:
    """RFC 7628's client first message, without an authorization identity."""
    return b"n,,\x01auth=Bearer " + token.encode() + b"\x01\x01"
