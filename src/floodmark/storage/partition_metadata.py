"""Kafka's ``partition.metadata`` file (KIP-516): the topic id a partition directory belongs to.

One per partition directory, two lines::

    version: 0
    topic_id: <the id as Kafka prints it: URL-safe base64 of its 16 bytes, no padding>

Written (atomically, through the file-system seam) when a partition is first opened with a
known topic id, checked on every later open: a directory left by another topic of the same name
(deleted and re-created while this broker was away, or copied from elsewhere) is refused with
INCONSISTENT_TOPIC_ID instead of being served as if it were this topic's data.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import uuid

from floodmark.errors import ErrorCode, KafkaError
from floodmark.storage.checkpoints import _write_atomically
from floodmark.storage.fs import FileSystem

PARTITION_METADATA_FILE = "partition.metadata"
PARTITION_METADATA_VERSION = 0


def topic_id_to_kafka(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def topic_id_from_kafka(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"a topic id is 16 bytes, not {len(raw)}")
    return uuid.UUID(bytes=raw)


def read_partition_metadata(fs: FileSystem, partition_dir: str) -> uuid.UUID | None:
    """The topic id recorded in ``partition_dir`` (None when there is no file yet); a file that
    cannot be parsed is an INCONSISTENT_TOPIC_ID error naming the file."""
    path = posixpath.join(partition_dir, PARTITION_METADATA_FILE)
    if not fs.exists(path):
        return None
    fields: dict[str, str] = {}
    try:
        for line in fs.read_file(path).decode("utf-8").splitlines():
            if line.strip():
                name, _, value = line.partition(":")
                fields[name.strip()] = value.strip()
        if fields.get("version") != str(PARTITION_METADATA_VERSION):
            raise ValueError(f"unsupported version {fields.get('version')!r}")
        return topic_id_from_kafka(fields["topic_id"])
    except (UnicodeDecodeError, KeyError, ValueError, binascii.Error) as exc:
        raise KafkaError(ErrorCode.INCONSISTENT_TOPIC_ID,
                         f"{path} is unreadable ({exc!r})") from None


def write_partition_metadata(fs: FileSystem, partition_dir: str, topic_id: uuid.UUID) -> None:
    text = (f"version: {PARTITION_METADATA_VERSION}\n"
            f"topic_id: {topic_id_to_kafka(topic_id)}\n")
    _write_atomically(fs, posixpath.join(partition_dir, PARTITION_METADATA_FILE), text)


def check_or_set_topic_id(fs: FileSystem, partition_dir: str, topic_id: uuid.UUID) -> bool:
    """Kafka's ``Partition.checkOrSetTopicId`` at open: record ``topic_id`` in a directory that
    has none yet (a partition created before topic ids were persisted gets its id on first load;
    the id comes from the metadata, so it is the same at every restart), refuse a directory that
    records another. Returns True when the file was written."""
    recorded = read_partition_metadata(fs, partition_dir)
    if recorded is None:
        write_partition_metadata(fs, partition_dir, topic_id)
        return True
    if recorded != topic_id:
        raise KafkaError(ErrorCode.INCONSISTENT_TOPIC_ID,
                         f"{partition_dir} belongs to topic id {topic_id_to_kafka(recorded)}, "
                         f"the metadata says {topic_id_to_kafka(topic_id)}")
    return False
