"""SASL authentication (Kafka's SaslHandshake / SaslAuthenticate exchange), sans I/O.

* ``exchange``: what a mechanism's server side is (tokens in, a challenge, success with a
  principal, or a refusal with a KIP-152 message);
* ``plain``: PLAIN (RFC 4616) against a users file the broker reads;
* ``scram``: SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) over the ``scramp`` library,
  with credentials (salt, stored key, server key, iterations: never a password) that the
  controller keeps as metadata records;
* ``oauthbearer``: OAUTHBEARER (RFC 7628) with KIP-768's JWT checks (signature against a JSON
  Web Key Set, expiry, subject, audience, issuer); ``jwks_source`` reads the key set (a file
  re-read when it changes, or a URL fetched periodically);
* ``session``: one connection's authenticator, a state machine the broker drives: which requests
  it admits before authentication, the handshake, the exchange, KIP-368 re-authentication and
  session expiry.

Nothing here touches sockets, files (but ``plain.load_plain_users`` and ``jwks_source``) or
clocks: ``now_ms`` is passed in.
"""
