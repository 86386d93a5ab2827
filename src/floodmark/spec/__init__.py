"""The specification the simulator and the model checker share: each safety property written
once, over small plain values both runners produce, and the vocabulary both use to show a
replica's log (a record as text, a marker as ``COMMIT(p7)``, a voter as ``c1``).

* ``partition``: SPEC §4 over ``ReplicaView`` values (HW <= LEO, one leader per epoch, log
  matching below the HW, monotonic HW and epochs, committed records kept, read_committed);
* ``quorum``: the controller quorum's properties over ``{offset: (epoch, value)}`` logs;
* ``entries``: a run of batches as (offset, epoch, value) entries;
* ``quorum_steps``: the quorum's step table (each voter's log, epoch, vote, LEO and HW).

Nothing here runs a replica: the runners (``floodmark.sim``, ``floodmark.mc``) drive the shared
cores and judge what they reach with these definitions. ``mc`` never imports ``sim``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.spec import groups, partition, quorum
    from floodmark.spec.entries import Entry, decode_entries, is_marker_label, marker_label
    from floodmark.spec.partition import ReplicaView
    from floodmark.spec.quorum import (
        commit_conflict,
        log_matching,
        missing_committed,
        other_leader,
        under_replicated,
    )
    from floodmark.spec.quorum_steps import (
        QuorumStep,
        describe_message,
        node_name,
        render_quorum_steps,
    )

__all__ = [
    "Entry",
    "QuorumStep",
    "ReplicaView",
    "commit_conflict",
    "decode_entries",
    "describe_message",
    "groups",
    "is_marker_label",
    "log_matching",
    "marker_label",
    "missing_committed",
    "node_name",
    "other_leader",
    "partition",
    "quorum",
    "render_quorum_steps",
    "under_replicated",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
