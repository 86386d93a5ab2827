"""The hand-written hot codecs are byte-identical to kio's, for every version served."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema

from floodmark.client.connection import decode_response, encode_request
from floodmark.records import simple_batch
from floodmark.wire.codec import decode_request, encode_response
from floodmark.wire.hot import (
    FetchPartitionResult,
    HotDecodeError,
    NodeEndpoint,
    ProducePartitionResult,
    encode_fetch_response,
    encode_produce_response,
    parse_fetch_response,
    parse_produce_request,
)

names = st.text(alphabet="abcxyz._-", min_size=1, max_size=12)
partition_ids = st.integers(0, 2**31 - 1)
offsets = st.integers(-1, 2**62)


@pytest.mark.parametrize("version", range(3, 14))
@settings(max_examples=25, deadline=None)
@given(topics=st.lists(st.tuples(names, st.uuids(), st.lists(
    st.tuples(partition_ids, st.booleans()), min_size=1, max_size=3)), min_size=1, max_size=3),
       acks=st.sampled_from([-1, 0, 1]), txn=st.none() | names)
def test_produce_request_parse_matches_kio(version, topics, acks, txn) -> None:
    """Topics by name (v3..12) or by topic id (v13+, KIP-516: names left "")."""
    batch = simple_batch([b"v1", None, b"v3"], keys=[b"k", None, b"kk"])
    by_id = version >= 13
    body = {"transactional_id": txn, "acks": acks, "timeout": 1234, "topic_data": [
        {**({"topic_id": tid} if by_id else {"name": n}), "partition_data": [
            {"index": i, "records": batch if has else None} for i, has in parts]}
        for n, tid, parts in topics]}
    frame = encode_request(0, version, 99, body, client_id="cid")[4:]
    ours = parse_produce_request(memoryview(frame))
    _, theirs = decode_request(frame)
    assert (ours.correlation_id, ours.client_id, ours.acks, ours.timeout_ms) == (99, "cid", acks, 1234)
    assert ours.transactional_id == theirs.transactional_id
    got = [(n, [(p.index, None if p.records is None else bytes(p.records)) for p in ps])
           for n, ps in ours.topics]
    want = [("" if by_id else t.name, [(p.index, None if p.records is None else bytes(p.records))
                                       for p in t.partition_data]) for t in theirs.topic_data]
    assert got == want
    assert ours.topic_ids == (tuple(t.topic_id for t in theirs.topic_data) if by_id else None)


def test_produce_request_truncated_is_an_error() -> None:
    frame = encode_request(0, 9, 1, {"acks": -1, "timeout": 1, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": simple_batch([b"x"])}]}]})[4:]
    with pytest.raises(HotDecodeError):
        parse_produce_request(memoryview(frame[:-20]))


@pytest.mark.parametrize("version", range(3, 14))
@settings(max_examples=25, deadline=None)
@given(topics=st.lists(st.tuples(names, st.uuids(), st.lists(
    st.tuples(partition_ids, st.sampled_from([0, 2, 3, 19, 45, 100]), offsets,
              st.integers(-1, 4_000_000_000_000), offsets,
              st.none() | st.text(max_size=8)), min_size=1, max_size=3)), max_size=3))
def test_produce_response_matches_kio(version, topics) -> None:
    by_id = version >= 13
    ours = encode_produce_response(version, 7, [
        (tid if by_id else n, [ProducePartitionResult(i, e, b, t, s, m) for i, e, b, t, s, m in ps])
        for n, tid, ps in topics])
    theirs = b"".join(encode_response(0, version, 7, {"throttle_time": 0, "responses": [
        {**({"topic_id": tid} if by_id else {"name": n}), "partition_responses": [
            {"index": i, "error_code": e, "base_offset": b, "log_append_time": t,
             "log_start_offset": s, "record_errors": [], "error_message": m}
            for i, e, b, t, s, m in ps]} for n, tid, ps in topics]}))
    assert ours == theirs


@pytest.mark.parametrize("version", range(4, 19))
@settings(max_examples=25, deadline=None)
@given(topics=st.lists(st.tuples(names, st.uuids(), st.lists(
    st.tuples(partition_ids, st.sampled_from([0, 1, 3, 6, 74, 75, 100]), offsets, offsets,
              offsets, st.sampled_from(["none", "empty", "data"]),
              st.none() | st.tuples(st.integers(-1, 2**31 - 1), st.integers(-1, 2**31 - 1)),
              st.integers(-1, 2**31 - 1),  # preferred_read_replica (KIP-392, v11+)
              # diverging_epoch (a replica's answer, v12+)
              st.none() | st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**62))),
    min_size=1, max_size=3)), max_size=3),
       session_id=st.integers(0, 2**31 - 1), error_code=st.sampled_from([0, 70, 71]),
       endpoints=st.lists(st.tuples(st.integers(0, 2**31 - 1), names, st.integers(0, 65535),
                                    st.none() | names), max_size=3))
def test_fetch_response_matches_kio(version, topics, session_id, error_code, endpoints) -> None:
    batch = simple_batch([b"payload"] * 3)
    recs = {"none": None, "empty": b"", "data": batch}
    by_id = version >= 13
    leaders = version >= 16
    ours = b"".join(bytes(p) for p in encode_fetch_response(version, 11, [
        (tid if by_id else n,
         [FetchPartitionResult(i, e, hw, lso, ls, recs[r], cl, preferred_read_replica=pr,
                               diverging_epoch=de)
          for i, e, hw, lso, ls, r, cl, pr, de in ps])
        for n, tid, ps in topics], error_code=error_code, session_id=session_id,
        node_endpoints=[NodeEndpoint(*e) for e in endpoints]))
    theirs = b"".join(encode_response(1, version, 11, {
        "throttle_time": 0, "error_code": error_code, "session_id": session_id,
        "node_endpoints": ([{"node_id": i, "host": h, "port": p, "rack": r}
                            for i, h, p, r in endpoints] if leaders else []),
        "responses": [
            {"topic": n, "topic_id": tid, "partitions": [
                {"partition_index": i, "error_code": e, "high_watermark": hw,
                 "last_stable_offset": lso, "log_start_offset": ls,
                 "aborted_transactions": None,  # null unless read_committed, as Kafka
                 "preferred_read_replica": pr,
                 **({"current_leader": {"leader_id": cl[0], "leader_epoch": cl[1]}}
                    if cl is not None and leaders else {}),
                 **({"diverging_epoch": {"epoch": de[0], "end_offset": de[1]}}
                    if de is not None and version >= 12 else {}),
                 # never null on the wire: Kafka sends empty records for an errored partition
                 "records": recs[r] if recs[r] is not None else b""}
                for i, e, hw, lso, ls, r, cl, pr, de in ps]} for n, tid, ps in topics]}))
    assert ours == theirs


def test_fetch_response_passes_record_bytes_by_reference() -> None:
    data = memoryview(bytearray(simple_batch([b"x" * 1000])))
    parts = encode_fetch_response(12, 1, [("t", [FetchPartitionResult(0, 0, 1, 1, 0, data)])])
    assert any(p is data for p in parts)


def test_schema_versions_exist() -> None:
    for v in range(3, 14):
        load_request_schema(0, v)


@pytest.mark.parametrize("version", range(8, 13))
def test_produce_response_record_errors_match_kio(version) -> None:
    """KIP-467: per-record errors (a keyless record sent to a compacted topic)."""
    errors = [(1, "Compacted topic cannot accept message without key"), (3, None)]
    ours = encode_produce_response(version, 7, [
        ("t", [ProducePartitionResult(0, 87, -1, -1, 0, "no key", record_errors=errors)])])
    theirs = b"".join(encode_response(0, version, 7, {"throttle_time": 0, "responses": [
        {"name": "t", "partition_responses": [
            {"index": 0, "error_code": 87, "base_offset": -1, "log_append_time": -1,
             "log_start_offset": 0, "error_message": "no key", "record_errors": [
                 {"batch_index": i, "batch_index_error_message": m} for i, m in errors]}]}]}))
    assert ours == theirs


def _kio_fields(obj: object) -> object:
    """A decoded answer as plain values (kio's dataclasses and ours alike)."""
    if isinstance(obj, (list, tuple)):
        return [_kio_fields(o) for o in obj]
    if isinstance(obj, (bytes, memoryview)):
        return bytes(obj)
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _kio_fields(getattr(obj, k)) for k in obj.__dataclass_fields__
                if not k.startswith("__")}
    return int(obj) if isinstance(obj, int) else obj


@pytest.mark.parametrize("version", range(4, 12))
@settings(max_examples=25, deadline=None)
@given(topics=st.lists(st.tuples(names, st.lists(
    st.tuples(partition_ids, st.sampled_from([0, 1, 3, 6]), offsets, offsets, offsets,
              st.sampled_from(["none", "empty", "data"]),
              st.none() | st.lists(st.tuples(offsets, offsets), max_size=3)),
    min_size=1, max_size=3)), max_size=3),
       session_id=st.integers(0, 2**31 - 1), error_code=st.sampled_from([0, 70]))
def test_fetch_response_read_matches_kio(version, topics, session_id, error_code) -> None:
    """The consumer's zero-copy Fetch reader gives what kio's generic reader gives."""
    recs = {"none": None, "empty": b"", "data": simple_batch([b"payload"] * 3)}
    frame = memoryview(b"".join(bytes(p) for p in encode_response(1, version, 11, {
        "throttle_time": 5, "error_code": error_code, "session_id": session_id,
        "responses": [{"topic": n, "partitions": [
            {"partition_index": i, "error_code": e, "high_watermark": hw,
             "last_stable_offset": lso, "log_start_offset": ls, "preferred_read_replica": -1,
             "aborted_transactions": (None if ab is None else
                                      [{"producer_id": a, "first_offset": b} for a, b in ab]),
             "records": recs[r]}
            for i, e, hw, lso, ls, r, ab in ps]} for n, ps in topics]}))[4:])
    corr, ours = parse_fetch_response(frame, version)
    assert corr == 11
    kio = pytest.importorskip("kio.index")
    from kio.serial import entity_reader
    cls = kio.load_response_schema(1, version)
    _, used = entity_reader(cls.__header_schema__)(bytes(frame), 0)
    theirs, _ = entity_reader(cls)(bytes(frame), used)
    mine = _kio_fields(ours)
    want = _kio_fields(theirs)
    assert isinstance(mine, dict) and isinstance(want, dict)
    for key, value in want.items():  # every field kio reads equals ours
        if key != "responses":
            assert mine[key] == value, key
    # every field kio reads at this version equals ours (older versions have fewer)
    assert [{"topic": m["topic"], "partitions": [{k: mp[k] for k in p}
                                                 for p, mp in zip(t["partitions"], m["partitions"],
                                                                  strict=True)]}
            for t, m in zip(want["responses"], mine["responses"], strict=True)] == want["responses"]
    # and the client's decoder takes this path, leaving the records in the frame
    answer = decode_response(frame, 1, version, 11)
    for topic in answer.responses:
        for part in topic.partitions:
            assert part.records is None or isinstance(part.records, memoryview)


def test_fetch_response_read_refuses_a_truncated_frame() -> None:
    frame = b"".join(bytes(p) for p in encode_fetch_response(11, 3, [
        ("t", [FetchPartitionResult(0, 0, 1, 1, 0, simple_batch([b"x" * 100]))])]))[4:]
    with pytest.raises(HotDecodeError):
        parse_fetch_response(memoryview(frame[:-10]), 11)
    with pytest.raises(HotDecodeError):
        parse_fetch_response(memoryview(frame), 12)


@settings(max_examples=50, deadline=None)
@given(topics=st.lists(st.tuples(st.uuids(), st.lists(st.tuples(
    partition_ids, st.integers(-1, 2**31 - 1), st.integers(0, 2**62),
    st.integers(-1, 2**31 - 1), st.integers(0, 2**62), st.integers(0, 2**31 - 1)),
    max_size=4)), max_size=4),
       replica=st.tuples(st.integers(0, 2**31 - 1), st.integers(-1, 2**62)),
       limits=st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
                        st.integers(0, 2**31 - 1)),
       session=st.tuples(st.integers(0, 2**31 - 1), st.integers(-1, 2**31 - 1)),
       forgotten=st.lists(st.tuples(st.uuids(), st.lists(partition_ids, max_size=4)),
                          max_size=3))
def test_replica_fetch_request_matches_kio(topics, replica, limits, session, forgotten) -> None:
    from floodmark.wire.hot import encode_replica_fetch_request

    ours = encode_replica_fetch_request(7, "floodmark-replica-2", *replica, *limits, topics,
                                        session_id=session[0], session_epoch=session[1],
                                        forgotten=forgotten)
    theirs = encode_request(1, 15, 7, {
        "replica_state": {"replica_id": replica[0], "replica_epoch": replica[1]},
        "max_wait": limits[0], "min_bytes": limits[1], "max_bytes": limits[2],
        "isolation_level": 0, "session_id": session[0], "session_epoch": session[1],
        "rack_id": "",
        "topics": [{"topic_id": tid, "partitions": [{
            "partition": p, "current_leader_epoch": e, "fetch_offset": fo,
            "last_fetched_epoch": le, "log_start_offset": ls, "partition_max_bytes": pm}
            for p, e, fo, le, ls, pm in parts]} for tid, parts in topics],
        "forgotten_topics_data": [{"topic_id": tid, "partitions": indexes}
                                  for tid, indexes in forgotten]}, "floodmark-replica-2")
    assert ours == theirs
