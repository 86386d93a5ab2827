"""A controller data dir's directory id (Kafka's ``directory.id`` in ``meta.properties``).

Made (a random uuid) when the directory is first formatted — by ``format_directory`` when a new
quorum forms (``cluster up``, the simulator), else the first time a controller starts on it —
and never changed: a voter that comes back on a new directory (its disk was lost or deleted)
is a new directory to the quorum (``voter_set.accepts``).
"""

from __future__ import annotations

from collections.abc import Callable

from floodmark.controller.quorum.roles import ElectionState
from floodmark.controller.quorum.state_file import QuorumStateFile
from floodmark.controller.quorum.voter_set import BOOTSTRAP, Bindings, VoterDirectory
from floodmark.storage import (
    DIRECTORY_ID_KEY as KEY,
)
from floodmark.storage import (
    META_PROPERTIES,
    BadMetaPropertiesError,
    FileSystem,
    load_or_create_directory_id,
    new_directory_id,
    write_text_atomically,
)

__all__ = ["KEY", "META_PROPERTIES", "BadMetaPropertiesError", "bootstrap_bindings",
           "format_directory", "load_or_format", "new_directory_id"]


def bootstrap_bindings(directory_ids: dict[int, str]) -> Bindings:
    """Every voter bound to its data dir from the start (the initial controllers)."""
    return tuple(VoterDirectory(v, d, BOOTSTRAP) for v, d in sorted(directory_ids.items()))


def format_directory(fs: FileSystem, path: str, directory_id: str, bootstrap: Bindings) -> None:
    """One voter's data dir at a new quorum's first formation (Kafka's ``kafka-storage format
    --initial-controllers``): its directory id, and a ``quorum-state`` that already binds every
    voter to its directory (``bootstrap_bindings``), so every voter knows every other's from
    the start and refuses one that comes back on a new directory. Run once per voter, before
    any starts; never on a restart (a lost data dir comes back unformatted, on a new id)."""
    fs.mkdirs(path)
    write_text_atomically(fs, f"{path.rstrip('/')}/{META_PROPERTIES}",
                          f"{KEY}={directory_id}\nversion=1\n")
    QuorumStateFile(fs, path).write(ElectionState(directories=bootstrap))


def load_or_format(fs: FileSystem, directory: str,
                   new_id: Callable[[], str] = new_directory_id) -> str:
    """The directory's id, written (durably) first if the directory has none (the rule every
    directory with a ``meta.properties`` follows: ``storage.log_dirs``)."""
    return load_or_create_directory_id(fs, directory, new_id)
