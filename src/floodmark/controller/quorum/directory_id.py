"""A controller data dir's directory id (Kafka's ``directory.id`` in ``meta.properties``).

Made (a random uuid) when the directory is first formatted, that is the first time a controller
starts on it, and never changed: a voter that comes back on a new directory (its disk was lost
or deleted) is a new directory to the quorum (``voter_set.accepts``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from floodmark.storage.checkpoints import write_text_atomically
from floodmark.storage.fs import FileSystem

META_PROPERTIES = "meta.properties"
KEY = "directory.id"


class BadMetaPropertiesError(ValueError):
    pass


def load_or_format(fs: FileSystem, directory: str,
                   new_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> str:
    """The directory's id, written (durably) first if the directory has none."""
    path = f"{directory.rstrip('/')}/{META_PROPERTIES}"
    if fs.exists(path):
        try:
            text = fs.read_file(path).decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == KEY and value.strip():
                return value.strip()
        raise BadMetaPropertiesError(f"{path} has no {KEY}; refusing to start as a new "
                                     "directory over an existing one")
    directory_id = new_id()
    write_text_atomically(fs, path, f"{KEY}={directory_id}\nversion=1\n")
    return directory_id
