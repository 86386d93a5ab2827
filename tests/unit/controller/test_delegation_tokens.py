"""Kafka's delegation token rules (``DelegationTokenControlManager``) as the controller decides
them, pure: lifetimes and expiries, who may renew and expire, the sweep, who may see a token;
and the records, which replay (a restarted controller, every broker, a snapshot) to the same
tokens."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from floodmark.controller import delegation_tokens as dt
from floodmark.controller.client import ControllerClient
from floodmark.controller.image import MetadataImage
from floodmark.controller.logic import ControllerConfig, ControllerLogic
from floodmark.controller.record_check import check_record
from floodmark.controller.server import ControllerServer
from floodmark.controller.snapshot import image_from_records, image_records
from floodmark.errors import ErrorCode, KafkaError
from floodmark.security.principal import KafkaPrincipal

ALICE, BOB, CAROL = (KafkaPrincipal.user(n) for n in ("alice", "bob", "carol"))
SETTINGS = dt.TokenSettings(max_lifetime_ms=10_000, expiry_time_ms=1_000)


def _created(now_ms: int = 100, max_lifetime_ms: int = -1) -> dt.TokenInfo:
    d = dt.create(ALICE, BOB, [CAROL], max_lifetime_ms, SETTINGS, now_ms, "t-1")
    assert d.error is ErrorCode.NONE and d.token is not None
    return d.token


def test_create_takes_the_smaller_lifetime_and_expires_first() -> None:
    t = _created()
    assert (t.issue_ms, t.max_ms, t.expiry_ms) == (100, 10_100, 1_100)
    assert (t.owner, t.requester, t.renewers) == (ALICE, BOB, (CAROL,))
    assert _created(max_lifetime_ms=500).max_ms == 600  # asked for less: that, and expiry too
    assert _created(max_lifetime_ms=500).expiry_ms == 600
    assert _created(max_lifetime_ms=99_999).max_ms == 10_100  # never past the setting
    group = KafkaPrincipal("Group", "ops")
    assert dt.create(ALICE, ALICE, [group], -1, SETTINGS, 0).error is \
        ErrorCode.INVALID_PRINCIPAL_TYPE


def test_renew_owner_and_renewers_only_within_the_max() -> None:
    t = _created()
    assert dt.renew(None, ALICE, -1, SETTINGS, 200).error is ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert dt.renew(t, BOB, -1, SETTINGS, 200).error is \
        ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH  # the requester is neither
    d = dt.renew(t, CAROL, 300, SETTINGS, 900)
    assert (d.error, d.expiry_ms) == (ErrorCode.NONE, 1_200)
    late = dataclasses.replace(t, expiry_ms=9_600)  # renewed until then
    assert dt.renew(late, ALICE, -1, SETTINGS, 9_500).expiry_ms == 10_100  # capped at the max
    assert dt.renew(t, ALICE, -1, SETTINGS, 1_101).error is ErrorCode.DELEGATION_TOKEN_EXPIRED


def test_expire_now_or_later() -> None:
    t = _created()
    now = dt.expire(t, ALICE, -1, 500)
    assert (now.error, now.expiry_ms, now.records) == (
        ErrorCode.NONE, 500, ({"type": dt.REMOVE, "token_id": "t-1"},))
    later = dt.expire(t, CAROL, 200, 500)
    assert (later.error, later.expiry_ms) == (ErrorCode.NONE, 700)
    assert dt.expire(t, BOB, -1, 500).error is ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert dt.expire(t, ALICE, 5, 2_000).error is ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert dt.expire(t, ALICE, -1, 2_000).error is ErrorCode.NONE  # removal still works


def test_sweep_and_who_may_see_a_token() -> None:
    t = _created()
    assert dt.sweep({"t-1": t}, 1_100) == []
    assert dt.sweep({"t-1": t}, 1_101) == [dt.remove_record("t-1")]

    def nobody(token: dt.TokenInfo) -> bool:
        return False
    assert dt.describable(t, ALICE, None, nobody)
    assert dt.describable(t, CAROL, None, nobody)  # a renewer
    assert not dt.describable(t, BOB, None, nobody)  # the requester is not an owner
    assert dt.describable(t, BOB, None, lambda token: True)  # with the ACL
    assert not dt.describable(t, ALICE, [BOB], nobody)  # not a token of the owners asked


def test_records_replay_into_every_image_and_snapshots() -> None:
    logic = ControllerLogic(MetadataImage(), ControllerConfig(
        delegation_token_expiry_check_interval_ms=50))
    logic.bootstrap()
    made = logic.create_delegation_token(ALICE, ALICE, [CAROL], -1, SETTINGS, 1_000)
    assert made.token is not None
    token_id = made.token.token_id
    logic.renew_delegation_token(token_id, CAROL, -1, SETTINGS, 1_500)
    records = logic.take_pending()
    for _offset, rec in records:
        check_record(rec)
        assert "hmac" not in rec
    broker_image = MetadataImage()
    broker_image.apply_all(records)
    assert broker_image.delegation_tokens[token_id].expiry_ms == 2_500
    again = image_from_records(logic.image.next_offset, image_records(logic.image))
    assert again.delegation_tokens == logic.image.delegation_tokens
    # the sweep, at its interval, removes it once past its expiry
    logic.tick(2_400)
    assert token_id in logic.image.delegation_tokens
    logic.tick(2_600)
    assert token_id not in logic.image.delegation_tokens


@pytest.mark.parametrize("bad", [
    {"type": dt.TOKEN, "token_id": "", "owner": "User:a", "requester": "User:a", "renewers": [],
     "issue_timestamp": 1, "max_timestamp": 2, "expiration_timestamp": 2},
    {"type": dt.TOKEN, "token_id": "x", "owner": "alice", "requester": "User:a",
     "renewers": [], "issue_timestamp": 1, "max_timestamp": 2, "expiration_timestamp": 2},
    {"type": dt.TOKEN, "token_id": "x", "owner": "User:a", "requester": "User:a",
     "renewers": "User:b", "issue_timestamp": 1, "max_timestamp": 2, "expiration_timestamp": 2},
    {"type": dt.REMOVE, "token_id": 7},
])
def test_a_malformed_record_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(KafkaError):
        check_record(bad)


def test_the_calls_a_broker_makes_and_a_restarted_controller(tmp_path: Path) -> None:
    """The broker's calls (JSON) on a controller, whose answer's records the broker applies;
    a controller started again on the same metadata log has the token."""
    server = ControllerServer(str(tmp_path), ControllerConfig())
    client = ControllerClient("127.0.0.1:1", 1)
    client.local = server
    try:
        made = asyncio.run(client.create_delegation_token(ALICE, BOB, [CAROL], -1, SETTINGS))
        assert made.error is ErrorCode.NONE and made.token is not None
        token_id = made.token.token_id
        assert client.delegation_token_infos()[token_id] == made.token
        renewed = asyncio.run(client.renew_delegation_token(token_id, BOB, -1, SETTINGS))
        assert renewed.error is ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        expired = asyncio.run(client.expire_delegation_token(token_id, CAROL, 60_000))
        assert expired.error is ErrorCode.NONE
        assert client.delegation_token_infos()[token_id].expiry_ms == expired.expiry_ms
    finally:
        client.close()
        server.mlog.close()
    again = ControllerServer(str(tmp_path), ControllerConfig())
    try:
        assert again.image.delegation_tokens[token_id].expiry_ms == expired.expiry_ms
    finally:
        again.mlog.close()
