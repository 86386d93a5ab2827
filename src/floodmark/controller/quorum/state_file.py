"""The ``quorum-state`` file: the election state a voter must never forget (KRaft's file of the
same name, JSON: ``leaderEpoch``, ``leaderId``, ``votedId``, ``data_version``; floodmark adds
``voterDirectories``, the committed ``[voter id, directory id, bound at]`` bindings, and
``voterSets``, the ``[offset, [[voter id, directory id]...]]`` of the log's ``voter_set`` records).

Written durably (temp file, fsync, rename, fsync the directory) before the vote or the
candidacy it records is sent. Unreadable content is refused loudly: starting with a forgotten
vote could elect two leaders in one epoch.
"""

from __future__ import annotations

import json

from floodmark.controller.quorum.roles import ElectionState
from floodmark.controller.quorum.voter_history import entry_from_json, entry_to_json
from floodmark.controller.quorum.voter_set import VoterDirectory
from floodmark.errors import CorruptDataError
from floodmark.storage import FileSystem, write_text_atomically

QUORUM_STATE_FILE = "quorum-state"
DATA_VERSION = 0


class CorruptQuorumStateError(CorruptDataError, ValueError):
    pass


class QuorumStateFile:
    def __init__(self, fs: FileSystem, directory: str) -> None:
        self.fs = fs
        self.path = f"{directory.rstrip('/')}/{QUORUM_STATE_FILE}"

    def read(self) -> ElectionState:
        """The stored state; epoch 0, no leader, no vote when the file does not exist."""
        if not self.fs.exists(self.path):
            return ElectionState()
        try:
            data = json.loads(self.fs.read_file(self.path).decode("utf-8"))
            state = ElectionState(int(data["leaderEpoch"]), int(data["leaderId"]),
                                  int(data["votedId"]), tuple(
                                      VoterDirectory(int(v), str(d), int(at))
                                      for v, d, at in data.get("voterDirectories", [])),
                                  tuple(entry_from_json(e) for e in data.get("voterSets", [])))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise CorruptQuorumStateError(f"{self.path} is unreadable ({exc}); refusing to "
                                          "start without the vote it holds") from None
        if state.epoch < 0:
            raise CorruptQuorumStateError(f"{self.path}: negative epoch {state.epoch}")
        return state

    def write(self, state: ElectionState) -> None:
        text = json.dumps({"leaderEpoch": state.epoch, "leaderId": state.leader_id,
                           "votedId": state.voted_for, "data_version": DATA_VERSION,
                           "voterDirectories": [[b.voter_id, b.directory_id, b.bound_at]
                                                for b in state.directories],
                           "voterSets": [entry_to_json(e) for e in state.voter_sets]},
                          sort_keys=True)
        write_text_atomically(self.fs, self.path, text + "\n")
