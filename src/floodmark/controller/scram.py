"""SCRAM credentials as metadata records (KRaft's UserScramCredentialRecord and
RemoveUserScramCredentialRecord), and KIP-554's rules for altering and describing them.

=================================  ==============================================================
``user_scram_credential``          ``name``, ``mechanism`` (KIP-554 code: 1 SCRAM-SHA-256,
                                   2 SCRAM-SHA-512), ``salt``, ``stored_key``, ``server_key``
                                   (base64), ``iterations``: a user's credential for one
                                   mechanism, replacing any earlier one. Never a password.
``remove_user_scram_credential``   ``name``, ``mechanism``: that credential is gone
=================================  ==============================================================

AlterUserScramCredentials carries salted passwords (the client salts: the password never leaves
it); the controller turns each into stored and server keys here, as Kafka's ScramControlManager
does, so a salted password is never written anywhere. Each user's changes in one request are
applied together or not at all, and the user's result is the first error found.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from floodmark.errors import ErrorCode
from floodmark.security import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    check_user_name,
    credential_from_salted_password,
)

CREDENTIAL = "user_scram_credential"
REMOVE = "remove_user_scram_credential"

Credentials = Mapping[str, Mapping[ScramMechanism, ScramCredential]]
"""user name -> mechanism -> credential (the image's ``scram_credentials``)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: Any, field: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{field} must be base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{field} is not base64") from None


def credential_record(name: str, cred: ScramCredential) -> dict[str, Any]:
    return {"type": CREDENTIAL, "name": name, "mechanism": int(cred.mechanism),
            "salt": _b64(cred.salt), "stored_key": _b64(cred.stored_key),
            "server_key": _b64(cred.server_key), "iterations": cred.iterations}


def remove_record(name: str, mechanism: ScramMechanism) -> dict[str, Any]:
    return {"type": REMOVE, "name": name, "mechanism": int(mechanism)}


def _mechanism(rec: Mapping[str, Any]) -> ScramMechanism:
    value = rec.get("mechanism")
    if not isinstance(value, int) or isinstance(value, bool) or \
            value not in ScramMechanism._value2member_map_:
        raise ValueError(f"mechanism {value!r} is not a SCRAM mechanism code (1 or 2)")
    return ScramMechanism(value)


def _name(rec: Mapping[str, Any]) -> str:
    name = rec.get("name")
    if not isinstance(name, str):
        raise ValueError(f"name must be a string, not {name!r}")
    check_user_name(name)
    return name


def record_credential(rec: Mapping[str, Any]) -> tuple[str, ScramCredential]:
    """A ``user_scram_credential`` record's (user, credential); ValueError when it is not one
    every broker can use (the record check)."""
    name = _name(rec)
    mech = _mechanism(rec)
    iterations = rec.get("iterations")
    if not isinstance(iterations, int) or isinstance(iterations, bool) or \
            not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations {iterations!r} outside [{MIN_ITERATIONS}, "
                         f"{MAX_ITERATIONS}]")
    salt = _unb64(rec.get("salt"), "salt")
    stored_key = _unb64(rec.get("stored_key"), "stored_key")
    server_key = _unb64(rec.get("server_key"), "server_key")
    if not salt:
        raise ValueError("salt is empty")
    for field, key in (("stored_key", stored_key), ("server_key", server_key)):
        if len(key) != mech.digest_bytes:
            raise ValueError(f"{field} of {mech.mechanism_name} has {mech.digest_bytes} bytes, "
                             f"not {len(key)}")
    return name, ScramCredential(mech, salt, stored_key, server_key, iterations)


def record_removal(rec: Mapping[str, Any]) -> tuple[str, ScramMechanism]:
    return _name(rec), _mechanism(rec)


# -- AlterUserScramCredentials (KIP-554) ----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:  # the salted password stays out of logs
        return f"Upsertion({self.name!r}, mechanism={self.mechanism})"


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class AlterResult:
    user: str
    error: ErrorCode
    message: str | None = None


def plan_alterations(current: Credentials, deletions: Sequence[Deletion],
                     upsertions: Sequence[Upsertion]
                     ) -> tuple[list[dict[str, Any]], list[AlterResult]]:
    """The records to write and one result per user (in the order users first appear)."""
    users: dict[str, list[Deletion | Upsertion]] = {}
    changes_in_order: list[Deletion | Upsertion] = [*deletions, *upsertions]
    for change in changes_in_order:
        users.setdefault(change.name, []).append(change)
    records: list[dict[str, Any]] = []
    results: list[AlterResult] = []
    for user, changes in users.items():
        planned: list[dict[str, Any]] = []
        error: tuple[ErrorCode, str] | None = None
        seen: set[int] = set()
        for change in changes:
            error = _refusal(current, user, change, seen)
            if error is not None:
                break
            seen.add(change.mechanism)
            mech = ScramMechanism(change.mechanism)
            if isinstance(change, Deletion):
                planned.append(remove_record(user, mech))
                continue
            try:
                cred = credential_from_salted_password(mech, change.salted_password,
                                                       change.salt, change.iterations)
            except ValueError as exc:
                error = (ErrorCode.UNACCEPTABLE_CREDENTIAL, str(exc))
                break
            planned.append(credential_record(user, cred))
        if error is not None:
            results.append(AlterResult(user, *error))
        else:
            records.extend(planned)
            results.append(AlterResult(user, ErrorCode.NONE))
    return records, results


def _refusal(current: Credentials, user: str, change: Deletion | Upsertion,
             seen: set[int]) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    try:
        check_user_name(user)
    except ValueError as exc:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, str(exc)
    if change.mechanism not in ScramMechanism._value2member_map_:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {change.mechanism}"
    if change.mechanism in seen:
        return (ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request")
    if isinstance(change, Deletion):
        if ScramMechanism(change.mechanism) not in current.get(user, {}):
            return (ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist")
        return None
    if change.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if change.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


# -- DescribeUserScramCredentials (KIP-554) -------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DescribedUser:
    user: str
    error: ErrorCode
    message: str | None
    credentials: tuple[tuple[ScramMechanism, int], ...]
    """(mechanism, iterations) of each credential the user has."""


def describe(current: Credentials, users: Sequence[str] | None) -> list[DescribedUser]:
    """Every user with a credential (``users`` None or empty), else the named ones: an unknown
    user is RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE."""
    if not users:
        return [_described(current, name) for name in sorted(current)]
    counts: dict[str, int] = {}
    for name in users:
        counts[name] = counts.get(name, 0) + 1
    out = []
    for name in counts:
        if counts[name] > 1:
            out.append(DescribedUser(name, ErrorCode.DUPLICATE_RESOURCE,
                                     "Cannot describe SCRAM credentials for the same user twice "
                                     "in a single request", ()))
        elif not current.get(name):
            out.append(DescribedUser(name, ErrorCode.RESOURCE_NOT_FOUND,
                                     "Attempt to describe a user credential that does not exist",
                                     ()))
        else:
            out.append(_described(current, name))
    return out


def _described(current: Credentials, name: str) -> DescribedUser:
    creds = current[name]
    return DescribedUser(name, ErrorCode.NONE, None,
                         tuple((m, creds[m].iterations) for m in sorted(creds)))


# -- the broker -> controller call (JSON) ---------------------------------------------------------
def alterations_to_json(deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
                        ) -> dict[str, Any]:
    return {"deletions": [[d.name, d.mechanism] for d in deletions],
            "upsertions": [[u.name, u.mechanism, u.iterations, _b64(u.salt),
                            _b64(u.salted_password)] for u in upsertions]}


def alterations_from_json(a: Mapping[str, Any]) -> tuple[list[Deletion], list[Upsertion]]:
    """ValueError when the call is malformed."""
    try:
        deletions = [Deletion(str(n), int(m)) for n, m in a["deletions"]]
        upsertions = [Upsertion(str(n), int(m), int(i), _unb64(s, "salt"),
                                _unb64(p, "salted_password"))
                      for n, m, i, s, p in a["upsertions"]]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed SCRAM alteration: {exc!r}") from None
    return deletions, upsertions


def results_to_json(results: Sequence[AlterResult]) -> list[list[Any]]:
    return [[r.user, int(r.error), r.message] for r in results]


def results_from_json(rows: Sequence[Sequence[Any]]) -> list[AlterResult]:
    return [AlterResult(str(u), ErrorCode(int(e)), None if m is None else str(m))
            for u, e, m in rows]
