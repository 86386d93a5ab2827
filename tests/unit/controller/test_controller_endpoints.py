"""Where a broker dials the controllers (``controller_endpoints``): its ``--controller`` list
until the committed voter set names a controller's endpoint (UpdateRaftVoter, KIP-853); an entry
whose controller answered there and moved is replaced by the new endpoint."""

from __future__ import annotations

import pytest

from floodmark.controller import ControllerClient
from floodmark.controller.controller_endpoints import MAX_ANSWERED, ControllerEndpoints
from floodmark.controller.image import MetadataImage, VoterSetImage
from floodmark.controller.snapshot import image_from_records, image_records

A, B, C = "127.0.0.1:9201", "127.0.0.1:9202", "127.0.0.1:9203"
C_NEW = "127.0.0.1:9303"


def test_the_bootstrap_list_serves_until_the_voter_set_names_an_endpoint() -> None:
    ends = ControllerEndpoints([A, B, C, A])
    assert ends.addresses() == (A, B, C)
    assert ends.current(C) == C
    assert ends.endpoint_of(3) is None


def test_a_moved_controller_replaces_the_entry_it_answered_on() -> None:
    ends = ControllerEndpoints([A, B, C])
    ends.answered(C, 3)
    assert ends.learn_voter_set({3: C_NEW})
    assert not ends.learn_voter_set({3: C_NEW})  # nothing new
    assert ends.addresses() == (C_NEW, A, B)  # A and B: whose, not known yet
    assert ends.current(C) == C_NEW and ends.current(A) == A
    assert ends.endpoint_of(3) == C_NEW


def test_an_entry_never_answered_stays_beside_the_named_endpoint() -> None:
    ends = ControllerEndpoints([A, B, C])
    ends.learn_voter_set({3: C_NEW, 2: "127.0.0.1:9302"})
    # Whose entries these are is not known: they stay, after the voter set's endpoints (one
    # may be a moved controller's old address).
    assert ends.addresses() == ("127.0.0.1:9302", C_NEW, A, B, C)
    ends.answered(A, 1)
    ends.answered(B, 2)
    assert ends.addresses() == (A, "127.0.0.1:9302", C_NEW, C)


def test_ids_given_with_the_list_count_as_answers() -> None:
    ends = ControllerEndpoints([A, C], voters={1: A, 3: C})
    ends.learn_voter_set({3: C_NEW})
    assert ends.addresses() == (A, C_NEW)
    ends.learn_voter_set({})  # a voter set naming no endpoint: the list holds again
    assert ends.addresses() == (A, C)


def test_answers_without_an_id_are_ignored_and_the_memory_is_bounded() -> None:
    ends = ControllerEndpoints([A])
    for bad in (None, "3", True, 3.0):
        ends.answered(A, bad)
    assert ends.endpoint_of(3) is None
    for port in range(MAX_ANSWERED + 10):
        ends.answered(f"127.0.0.1:{port}", port)
    assert ends.endpoint_of(MAX_ANSWERED + 5) is None
    with pytest.raises(ValueError):
        ControllerEndpoints([])


def _voter_set(endpoints: list[list[object]]) -> dict[str, object]:
    return {"type": "voter_set", "epoch": 4, "voters": [[1, "d1"], [2, "d2"], [3, "d3"]],
            "endpoints": endpoints}


def test_the_image_keeps_the_latest_voter_set_and_a_snapshot_carries_it() -> None:
    image = MetadataImage()
    image.apply_all([(0, {"type": "cluster_id", "cluster_id": "c"}),
                     (1, _voter_set([[3, C_NEW]]))])
    assert image.voter_set == VoterSetImage(4, ((1, "d1"), (2, "d2"), (3, "d3")),
                                            ((3, C_NEW),))
    loaded = image_from_records(2, image_records(image))
    assert loaded.voter_set == image.voter_set


def test_a_broker_dials_a_moved_controller_where_the_voter_set_says() -> None:
    client = ControllerClient(f"{A},{C}", 7)
    client.endpoints.answered(C, 3)
    client._switch(C)  # following controller 3 at its old port
    client.apply_records([[0, _voter_set([[3, C_NEW]])]])
    assert client.address == C_NEW
    assert client.control.address == client.beat.address == client.poll.address == C_NEW
    assert client.addresses == [C_NEW, A]
    client.close()
