"""controller/scram.py: SCRAM credentials as metadata records, KIP-554's alter/describe rules,
replay into the image, snapshots, and the record check."""

from __future__ import annotations

import os

import pytest

from floodmark.controller import scram
from floodmark.controller.image import MetadataImage
from floodmark.controller.logic import ControllerConfig, ControllerLogic
from floodmark.controller.record_check import check_record
from floodmark.controller.snapshot import image_from_records, image_records
from floodmark.errors import ErrorCode, KafkaError
from floodmark.security.sasl.scram import (
    ScramMechanism,
    credential_from_password,
    parse_add_scram,
    salted_password,
)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def upsert(name: str, mech: ScramMechanism = SHA512, password: str = "pw",
           iterations: int = 4096) -> scram.Upsertion:
    salt = os.urandom(16)  # the salted password of 4096 rounds: the iterations field may lie
    return scram.Upsertion(name, int(mech), iterations, salt,
                           salted_password(mech, password, salt, 4096))


def logic() -> ControllerLogic:
    lg = ControllerLogic(MetadataImage(), ControllerConfig(
        bootstrap_scram=(parse_add_scram("SCRAM-SHA-512=[name=admin,password=admin-secret]"),)))
    lg.bootstrap()
    return lg


def test_bootstrap_users_are_written_with_the_cluster_id_never_the_password() -> None:
    lg = logic()
    records = [r for _, r in lg.take_pending()]
    assert [r["type"] for r in records] == ["cluster_id", "feature_level", "user_scram_credential"]
    assert "admin-secret" not in repr(records)
    cred = lg.image.scram_credentials["admin"][SHA512]
    assert cred == credential_from_password(SHA512, "admin-secret", cred.iterations, cred.salt)
    lg.bootstrap()  # an existing cluster: nothing more
    assert lg.take_pending() == []


def test_alter_upserts_and_deletes_per_user() -> None:
    lg = logic()
    results = lg.alter_scram_credentials([], [upsert("alice"), upsert("alice", SHA256),
                                              upsert("bob")])
    assert [(r.user, r.error) for r in results] == [("alice", ErrorCode.NONE),
                                                    ("bob", ErrorCode.NONE)]
    assert set(lg.image.scram_credentials["alice"]) == {SHA256, SHA512}
    results = lg.alter_scram_credentials([scram.Deletion("alice", int(SHA256))], [])
    assert results[0].error is ErrorCode.NONE
    assert set(lg.image.scram_credentials["alice"]) == {SHA512}
    lg.alter_scram_credentials([scram.Deletion("alice", int(SHA512))], [])
    assert "alice" not in lg.image.scram_credentials


@pytest.mark.parametrize(("deletions", "upsertions", "error", "message"), [
    ([scram.Deletion("nobody", 2)], [], ErrorCode.RESOURCE_NOT_FOUND, "does not exist"),
    ([], [upsert("carol", iterations=4095)], ErrorCode.UNACCEPTABLE_CREDENTIAL,
     "Too few iterations"),
    ([], [upsert("carol", iterations=16385)], ErrorCode.UNACCEPTABLE_CREDENTIAL,
     "Too many iterations"),
    ([], [scram.Upsertion("carol", 3, 4096, b"s", b"x" * 32)],
     ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    ([], [upsert("carol"), upsert("carol")], ErrorCode.DUPLICATE_RESOURCE, "twice"),
    ([scram.Deletion("admin", 2)], [upsert("admin")], ErrorCode.DUPLICATE_RESOURCE, "twice"),
    ([], [upsert("")], ErrorCode.UNACCEPTABLE_CREDENTIAL, "empty"),
    ([], [scram.Upsertion("carol", 2, 4096, b"salt", b"short")],
     ErrorCode.UNACCEPTABLE_CREDENTIAL, "64 bytes"),
    ([], [scram.Upsertion("carol", 2, 4096, b"", b"x" * 64)],
     ErrorCode.UNACCEPTABLE_CREDENTIAL, "salt"),
])
def test_bad_alterations_write_nothing_for_that_user(
        deletions: list[scram.Deletion], upsertions: list[scram.Upsertion], error: ErrorCode,
        message: str) -> None:
    lg = logic()
    lg.take_pending()
    before = {u: dict(c) for u, c in lg.image.scram_credentials.items()}
    results = lg.alter_scram_credentials(deletions, [*upsertions, upsert("dave")])
    bad = results[0]
    assert bad.error is error and bad.message is not None and message in bad.message
    assert results[-1] == scram.AlterResult("dave", ErrorCode.NONE)  # others go ahead
    written = [r for _, r in lg.take_pending()]
    assert [r["name"] for r in written] == ["dave"]
    assert {u: c for u, c in lg.image.scram_credentials.items() if u != "dave"} == before


def test_describe_all_named_unknown_and_duplicate() -> None:
    lg = logic()
    lg.alter_scram_credentials([], [upsert("alice", SHA256, iterations=8192)])
    creds = lg.image.scram_credentials
    assert [(d.user, d.credentials) for d in scram.describe(creds, None)] == [
        ("admin", ((SHA512, 8192),)), ("alice", ((SHA256, 8192),))]
    named = scram.describe(creds, ["alice", "nobody", "admin", "admin"])
    assert [(d.user, d.error) for d in named] == [
        ("alice", ErrorCode.NONE), ("nobody", ErrorCode.RESOURCE_NOT_FOUND),
        ("admin", ErrorCode.DUPLICATE_RESOURCE)]


def test_credentials_survive_replay_and_snapshot() -> None:
    lg = logic()
    lg.alter_scram_credentials([], [upsert("alice"), upsert("bob", SHA256)])
    lg.alter_scram_credentials([scram.Deletion("bob", int(SHA256))], [upsert("bob")])
    replayed = MetadataImage()
    replayed.apply_all(lg.take_pending())
    assert replayed.scram_credentials == lg.image.scram_credentials
    snap = image_from_records(replayed.next_offset, image_records(replayed))
    assert snap.scram_credentials == lg.image.scram_credentials


@pytest.mark.parametrize("change", [
    {"iterations": 100}, {"mechanism": 7}, {"mechanism": True}, {"salt": "!!"}, {"salt": ""},
    {"stored_key": "AAAA"}, {"name": ""}, {"name": 5}, {"server_key": None},
])
def test_record_check_refuses_broken_credentials(change: dict[str, object]) -> None:
    cred = credential_from_password(SHA512, "pw", 4096)
    rec = {**scram.credential_record("alice", cred), **change}
    with pytest.raises(KafkaError) as info:
        check_record(rec)
    assert info.value.code is ErrorCode.INVALID_REQUEST
    check_record(scram.credential_record("alice", cred))
    check_record(scram.remove_record("alice", SHA512))
    with pytest.raises(KafkaError):
        check_record({"type": "remove_user_scram_credential", "name": "alice", "mechanism": 0})


def test_a_bad_credential_record_is_skipped_by_readers() -> None:
    good = scram.credential_record("alice", credential_from_password(SHA256, "pw", 4096))
    bad = {**good, "name": "mallory", "iterations": 1}
    image = MetadataImage()
    skipped: list[object] = []
    image.apply_all([(0, bad), (1, good)], skipped.append)
    assert len(skipped) == 1 and list(image.scram_credentials) == ["alice"]


def test_json_round_trip_of_the_controller_call() -> None:
    d, u = [scram.Deletion("a", 1)], [upsert("b")]
    assert scram.alterations_from_json(scram.alterations_to_json(d, u)) == (d, u)
    rows = scram.results_to_json([scram.AlterResult("a", ErrorCode.NONE),
                                  scram.AlterResult("b", ErrorCode.RESOURCE_NOT_FOUND, "m")])
    assert scram.results_from_json(rows)[1].error is ErrorCode.RESOURCE_NOT_FOUND
    with pytest.raises(ValueError):
        scram.alterations_from_json({"deletions": [["a"]], "upsertions": []})
    assert "salted" not in repr(u[0]).lower()
