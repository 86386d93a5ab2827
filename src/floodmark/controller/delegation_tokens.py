"""Delegation tokens (KIP-48) as metadata records (KRaft's DelegationTokenRecord and
RemoveDelegationTokenRecord), and Kafka's rules for creating, renewing and expiring them
(``DelegationTokenControlManager``), pure: every decision takes ``now_ms``.

==============================  ================================================================
``delegation_token``            ``token_id``, ``owner``, ``requester``, ``renewers`` (principals
                                as ``Type:name``), ``issue_timestamp``, ``max_timestamp``,
                                ``expiration_timestamp`` (ms): a token, or its new expiry
``remove_delegation_token``     ``token_id``: the token is gone (expired by a client, or past
                                its expiry or max time: the controller's sweep)
==============================  ================================================================

The token's HMAC (its password) is never written: every broker computes it from the token id
with ``delegation.token.secret.key`` (``security/delegation_token.py``), as Kafka's brokers do.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from floodmark.errors import ErrorCode
from floodmark.security import USER_TYPE, KafkaPrincipal, parse_principal

TOKEN = "delegation_token"
REMOVE = "remove_delegation_token"
MAX_TIMESTAMP = 2**63 - 1


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """Kafka's TokenInformation."""

    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms


Tokens = Mapping[str, TokenInfo]
"""token id -> token (the image's ``delegation_tokens``)."""


@dataclass(frozen=True, slots=True)
class TokenSettings:
    """``delegation.token.max.lifetime.ms`` and ``delegation.token.expiry.time.ms``."""

    max_lifetime_ms: int
    expiry_time_ms: int


# -- records ----------------------------------------------------------------------------------
def token_record(t: TokenInfo) -> dict[str, Any]:
    return {"type": TOKEN, "token_id": t.token_id, "owner": str(t.owner),
            "requester": str(t.requester), "renewers": [str(r) for r in t.renewers],
            "issue_timestamp": t.issue_ms, "max_timestamp": t.max_ms,
            "expiration_timestamp": t.expiry_ms}


def remove_record(token_id: str) -> dict[str, Any]:
    return {"type": REMOVE, "token_id": token_id}


def _int(rec: Mapping[str, Any], name: str) -> int:
    value = rec.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, not {value!r}")
    return value


def _principal(value: Any, name: str) -> KafkaPrincipal:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a principal (Type:name), not {value!r}")
    return parse_principal(value)


def record_token_id(rec: Mapping[str, Any]) -> str:
    token_id = rec.get("token_id")
    if not isinstance(token_id, str) or not token_id:
        raise ValueError(f"token_id must be a non-empty string, not {token_id!r}")
    return token_id


def record_token(rec: Mapping[str, Any]) -> TokenInfo:
    """A ``delegation_token`` record's token; ValueError when it is not one (the record check)."""
    renewers = rec.get("renewers")
    if not isinstance(renewers, list):
        raise ValueError(f"renewers must be a list, not {renewers!r}")
    return TokenInfo(record_token_id(rec), _principal(rec.get("owner"), "owner"),
                     _principal(rec.get("requester"), "requester"),
                     tuple(_principal(r, "renewer") for r in renewers),
                     _int(rec, "issue_timestamp"), _int(rec, "max_timestamp"),
                     _int(rec, "expiration_timestamp"))


# -- Kafka's rules ------------------------------------------------------------------------------
def _sum(now_ms: int, duration_ms: int) -> int:
    return MAX_TIMESTAMP if now_ms > MAX_TIMESTAMP - duration_ms else now_ms + duration_ms


@dataclass(frozen=True, slots=True)
class Decision:
    """An answer and the records that make it so (none: nothing changes)."""

    error: ErrorCode
    expiry_ms: int = -1
    token: TokenInfo | None = None
    records: tuple[dict[str, Any], ...] = ()


def create(owner: KafkaPrincipal, requester: KafkaPrincipal,
           renewers: Sequence[KafkaPrincipal], max_lifetime_ms: int, settings: TokenSettings,
           now_ms: int, token_id: str | None = None) -> Decision:
    """A new token: its max time is now + the smaller of ``delegation.token.max.lifetime.ms``
    and the asked lifetime (if > 0), its expiry the earlier of that and now +
    ``delegation.token.expiry.time.ms``. Renewers must be users (INVALID_PRINCIPAL_TYPE)."""
    if any(r.principal_type != USER_TYPE for r in renewers):
        return Decision(ErrorCode.INVALID_PRINCIPAL_TYPE)
    lifetime = settings.max_lifetime_ms
    if max_lifetime_ms > 0:
        lifetime = min(lifetime, max_lifetime_ms)
    max_ms = _sum(now_ms, lifetime)
    expiry_ms = min(max_ms, _sum(now_ms, settings.expiry_time_ms))
    token = TokenInfo(token_id or str(uuid.uuid4()), owner, requester, tuple(renewers), now_ms,
                      max_ms, expiry_ms)
    return Decision(ErrorCode.NONE, expiry_ms, token, (token_record(token),))


def renew(token: TokenInfo | None, principal: KafkaPrincipal, renew_period_ms: int,
          settings: TokenSettings, now_ms: int) -> Decision:
    """DELEGATION_TOKEN_NOT_FOUND, _EXPIRED, _OWNER_MISMATCH (only the owner and the renewers
    renew), else the expiry moves to now + the smaller of ``delegation.token.expiry.time.ms``
    and the asked period (if > 0), never past the max time."""
    if token is None:
        return Decision(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
    if token.expired(now_ms):
        return Decision(ErrorCode.DELEGATION_TOKEN_EXPIRED)
    if not token.owner_or_renewer(principal):
        return Decision(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    period = settings.expiry_time_ms
    if renew_period_ms > 0:
        period = min(period, renew_period_ms)
    renewed = replace(token, expiry_ms=min(token.max_ms, _sum(now_ms, period)))
    return Decision(ErrorCode.NONE, renewed.expiry_ms, renewed, (token_record(renewed),))


def expire(token: TokenInfo | None, principal: KafkaPrincipal, expiry_period_ms: int,
           now_ms: int) -> Decision:
    """A negative period removes the token at once; else (unless it expired already) its
    expiry moves to now + the period, never past the max time. The owner and renewers only."""
    if token is None:
        return Decision(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
    if not token.owner_or_renewer(principal):
        return Decision(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    if expiry_period_ms < 0:
        return Decision(ErrorCode.NONE, now_ms, None, (remove_record(token.token_id),))
    if token.expired(now_ms):
        return Decision(ErrorCode.DELEGATION_TOKEN_EXPIRED)
    expired = replace(token, expiry_ms=min(token.max_ms, _sum(now_ms, expiry_period_ms)))
    return Decision(ErrorCode.NONE, expired.expiry_ms, expired, (token_record(expired),))


def sweep(tokens: Tokens, now_ms: int) -> list[dict[str, Any]]:
    """The removal of every token past its expiry or max time (Kafka's periodic sweep)."""
    return [remove_record(t.token_id) for t in sorted(tokens.values(), key=lambda t: t.token_id)
            if t.expired(now_ms)]


def describable(token: TokenInfo, requester: KafkaPrincipal,
                owners: Sequence[KafkaPrincipal] | None,
                may_describe: Callable[[TokenInfo], bool]) -> bool:
    """Kafka's ``DelegationTokenManager.filterToken``: a token of one of ``owners`` (as owner
    or renewer; None: any), that the requester owns or renews, or may Describe (``may_describe``:
    the ACL check, Describe on the token or DescribeTokens on its owner)."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    return token.owner_or_renewer(requester) or may_describe(token)


# -- the broker -> controller calls (JSON) -------------------------------------------------------
def principals_to_json(principals: Iterable[KafkaPrincipal]) -> list[str]:
    return [str(p) for p in principals]


def principals_from_json(rows: Any) -> list[KafkaPrincipal]:
    if not isinstance(rows, list):
        raise ValueError(f"principals must be a list, not {rows!r}")
    return [_principal(r, "principal") for r in rows]


def settings_to_json(s: TokenSettings) -> list[int]:
    return [s.max_lifetime_ms, s.expiry_time_ms]


def settings_from_json(row: Any) -> TokenSettings:
    max_lifetime_ms, expiry_time_ms = row
    return TokenSettings(int(max_lifetime_ms), int(expiry_time_ms))


def decision_to_json(d: Decision) -> dict[str, Any]:
    return {"error": int(d.error), "expiry_ms": d.expiry_ms,
            "token": None if d.token is None else token_record(d.token)}


def decision_from_json(a: Mapping[str, Any]) -> Decision:
    token = a.get("token")
    return Decision(ErrorCode(int(a["error"])), int(a["expiry_ms"]),
                    None if token is None else record_token(token))
