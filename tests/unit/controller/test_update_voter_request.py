"""UpdateRaftVoter's request checks (``controller/quorum/update_voter.py``), in Kafka's order
(``KafkaRaftClient.handleUpdateVoterRequest``, then ``UpdateVoterHandler``'s range check)."""

from __future__ import annotations

import pytest

from floodmark.controller.quorum.update_voter import (
    UpdateVoterRequest,
    request_error,
)
from floodmark.errors import ErrorCode


def _request(**changes: object) -> UpdateVoterRequest:
    args: dict[str, object] = {
        "current_leader_epoch": 3, "voter_id": 2, "voter_directory_id": "dir-2",
        "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 9402}],
        "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 1}}
    args.update(changes)
    return UpdateVoterRequest.from_args(args)


def _error(req: UpdateVoterRequest, epoch: int = 3, is_leader: bool = True) -> ErrorCode:
    found = request_error(req, epoch, is_leader=is_leader)
    return ErrorCode.NONE if found is None else found[0]


def test_a_good_request_passes_and_round_trips() -> None:
    req = _request()
    assert _error(req) is ErrorCode.NONE
    assert req.endpoint == "127.0.0.1:9402"
    assert UpdateVoterRequest.from_args(req.to_args()) == req


def test_kafkas_answers_in_kafkas_order() -> None:
    assert _error(_request(), epoch=4) is ErrorCode.FENCED_LEADER_EPOCH
    assert _error(_request(), epoch=2) is ErrorCode.UNKNOWN_LEADER_EPOCH
    assert _error(_request(), is_leader=False) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    # The epoch comes first: a stale request without a directory is fenced, not invalid.
    assert _error(_request(voter_directory_id=""), epoch=4) is ErrorCode.FENCED_LEADER_EPOCH
    assert _error(_request(voter_directory_id="")) is ErrorCode.INVALID_REQUEST
    other = [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092}]
    assert _error(_request(listeners=other)) is ErrorCode.INVALID_REQUEST
    for low, high in ((-1, 1), (1, 0), (2, 3), (0, 0)):  # malformed, or excludes kraft.version 1
        feature = {"min_supported_version": low, "max_supported_version": high}
        assert _error(_request(kraft_version_feature=feature)) is ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("args", [{}, {"current_leader_epoch": "x", "voter_id": 1},
                                  {"current_leader_epoch": 1, "voter_id": 1,
                                   "listeners": [{"name": "CONTROLLER"}]}])
def test_a_malformed_request_is_one_line(args: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"^UpdateRaftVoter: malformed request") as caught:
        UpdateVoterRequest.from_args(args)
    assert "\n" not in str(caught.value)
