"""Kafka's partition.metadata file: format, check-or-set, refusal of another topic's directory."""

from __future__ import annotations

import uuid

import pytest

from floodmark.errors import ErrorCode, KafkaError
from floodmark.storage import MemoryFileSystem
from floodmark.storage.partition_metadata import (
    check_or_set_topic_id,
    read_partition_metadata,
    topic_id_from_kafka,
    topic_id_to_kafka,
)


def test_kafka_text_form_of_a_topic_id() -> None:
    # Kafka prints Uuid as URL-safe base64 without padding: 22 characters.
    tid = uuid.UUID("c6c1a9a8-7f6e-4b8e-9a51-0e2f6d2a3c11")
    text = topic_id_to_kafka(tid)
    assert len(text) == 22 and "=" not in text
    assert topic_id_from_kafka(text) == tid


def test_written_once_then_checked() -> None:
    fs = MemoryFileSystem()
    fs.mkdirs("/d/t-0")
    tid = uuid.uuid4()
    assert read_partition_metadata(fs, "/d/t-0") is None
    assert check_or_set_topic_id(fs, "/d/t-0", tid) is True
    text = fs.read_file("/d/t-0/partition.metadata").decode()
    assert text == f"version: 0\ntopic_id: {topic_id_to_kafka(tid)}\n"
    assert check_or_set_topic_id(fs, "/d/t-0", tid) is False  # same id: nothing written
    with pytest.raises(KafkaError) as err:
        check_or_set_topic_id(fs, "/d/t-0", uuid.uuid4())
    assert err.value.code is ErrorCode.INCONSISTENT_TOPIC_ID
    assert "t-0" in err.value.message


@pytest.mark.parametrize("text", [b"version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n",
                                  b"version: 0\n", b"version: 0\ntopic_id: !!\n", b"\xff\xfe"])
def test_unreadable_file_is_an_error_naming_it(text: bytes) -> None:
    fs = MemoryFileSystem()
    fs.mkdirs("/d/t-0")
    handle = fs.open("/d/t-0/partition.metadata")
    handle.write(text)
    handle.close()
    with pytest.raises(KafkaError) as err:
        check_or_set_topic_id(fs, "/d/t-0", uuid.uuid4())
    assert err.value.code is ErrorCode.INCONSISTENT_TOPIC_ID
    assert "partition.metadata" in err.value.message


def test_dump_log_shows_the_topic_id(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import io

    from floodmark.storage import RealFileSystem
    from floodmark.storage.dump import dump_partition

    (tmp_path / "t-0").mkdir()
    tid = uuid.uuid4()
    check_or_set_topic_id(RealFileSystem(), str(tmp_path / "t-0"), tid)
    out = io.StringIO()
    assert dump_partition(str(tmp_path / "t-0"), out) == 0
    assert f"partition.metadata: topic_id={topic_id_to_kafka(tid)} ({tid})" in out.getvalue()
    (tmp_path / "t-0" / "partition.metadata").write_text("version: 9\n")
    out = io.StringIO()
    assert dump_partition(str(tmp_path / "t-0"), out) == 1
    assert "partition.metadata: CORRUPT" in out.getvalue()
