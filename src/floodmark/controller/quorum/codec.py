"""The quorum messages as JSON objects for the controllers' RPC framing (``controller/rpc.py``).

``{"type": <class name>, <field>: value...}``; a diverging epoch is ``[epoch, end_offset]``,
an error its Kafka code. Decoding checks the type name against the closed set and the fields
against the dataclass, so a malformed message is a ``ValueError`` (a one-line answer), never a
half-built value.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from floodmark.address import BadAddress, parse_host_port
from floodmark.controller.quorum.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    QuorumFetchRequest,
    QuorumFetchResponse,
    QuorumMessage,
    VoteRequest,
    VoteResponse,
)
from floodmark.controller.quorum.voter_history import entry_from_json, entry_to_json
from floodmark.controller.quorum.voter_set import VoterDirectory
from floodmark.errors import ErrorCode
from floodmark.replication import EpochEndOffset

_TYPES: dict[str, type[Any]] = {cls.__name__: cls for cls in (
    VoteRequest, VoteResponse, BeginQuorumEpochRequest, BeginQuorumEpochResponse,
    EndQuorumEpochRequest, EndQuorumEpochResponse, QuorumFetchRequest, QuorumFetchResponse,
    FetchSnapshotRequest, FetchSnapshotResponse)}


def encode_message(message: QuorumMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type(message).__name__}
    for f in dataclasses.fields(message):
        value = getattr(message, f.name)
        if isinstance(value, EpochEndOffset):
            value = [value.epoch, value.end_offset]
        elif isinstance(value, ErrorCode):
            value = int(value)
        elif f.name == "voter_sets":
            value = [entry_to_json(e) for e in value]
        elif isinstance(value, tuple):
            value = [[v.voter_id, v.directory_id, v.bound_at]
                     if isinstance(v, VoterDirectory) else v for v in value]
        out[f.name] = value
    return out


def decode_message(data: Any) -> QuorumMessage:
    if not isinstance(data, dict):
        raise ValueError("quorum message is not an object")
    cls = _TYPES.get(str(data.get("type")))
    if cls is None:
        raise ValueError(f"unknown quorum message type {data.get('type')!r}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name == "diverging":
            value = None if value is None else EpochEndOffset(int(value[0]), int(value[1]))
        elif f.name == "error":
            value = ErrorCode(int(value))
        elif f.name == "preferred_successors":
            value = tuple(int(v) for v in value)
        elif f.name == "pre_vote" or f.name == "vote_granted":
            value = bool(value)
        elif f.name.endswith("directory_id"):
            if not isinstance(value, str):
                raise ValueError(f"{f.name} is not a string")
        elif f.name == "voter_directories":
            try:
                value = tuple(VoterDirectory(int(v), str(d), int(at)) for v, d, at in value)
            except (TypeError, ValueError):
                raise ValueError("voter_directories is not a list of [id, dir, at]") from None
        elif f.name == "voter_sets":
            if not isinstance(value, list):
                raise ValueError("voter_sets is not a list")
            value = tuple(entry_from_json(e) for e in value)
        else:
            value = int(value)
        kwargs[f.name] = value
    message: QuorumMessage = cls(**kwargs)
    return message


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    """``controller.quorum.voters``: ``id@host:port,id@host:port,...`` (one voter is valid)."""
    voters: dict[int, tuple[str, int]] = {}
    for item in text.split(","):
        item = item.strip()
        node, at, address = item.partition("@")
        try:
            if not at or not node.strip().isdigit():
                raise BadAddress(item)
            host, port = parse_host_port(address, min_port=1)
        except BadAddress:
            raise ValueError(f"controller.quorum.voters entry {item!r} is not id@host:port"
                             ) from None
        if int(node) in voters:
            raise ValueError(f"controller.quorum.voters lists id {node} twice")
        voters[int(node)] = (host, port)
    return voters
