"""When a leader whose controller session has lapsed stops presenting itself as leader to clients
(issue 26 §4), sans-I/O.

A broker cut off from the controller keeps its last metadata image, in which it leads. The
controller meanwhile fences it (no heartbeat for ``broker.session.timeout.ms``) and elects new
leaders, but a client that reaches only the cut-off broker keeps asking it for Metadata (its most
recently used connection) and keeps being told "I lead": Kafka's producers stall until the
network heals. So a leader whose leadership is in doubt (``replication/controller_session.py``: the
session lapsed, or its metadata has not caught up since) *steps down for clients*: Produce and
client Fetch are answered NOT_LEADER_OR_FOLLOWER, produce waiting in the purgatory too, and
Metadata names no leader for the partition (LEADER_NOT_AVAILABLE) and leaves this broker out of
its broker list, so the client drops the connection and asks another broker.

Safety: stepping down only ever refuses more. Nothing is appended, acknowledged or truncated by
the rule; the partition state (role, epoch, ISR, HW) is untouched, replica fetches are still
served (followers are fenced by leader epochs as before), and the metadata that comes once the
session is back decides what this broker is.

Availability: the rule does not step down where stepping down helps no one.

* Some other in-sync replica fetched from this leader, at its leader epoch, within half the
  session timeout: the followers still follow it, so the controller has not moved the partition
  where they can see it. This is the cluster whose controllers are all down: every broker's
  session lapses, and it keeps serving on the metadata it has, as Kafka's does. A follower
  that follows fetches far more often than that (at least every ``replica.fetch.wait.max.ms``,
  500 ms by default). A leader cut off from its followers and the controller stopped hearing
  them when it stopped hearing the controller, a whole session timeout before the lapse, so it
  steps down the moment its session lapses, no later than the controller fences it.
* No other replica is in the ISR (the maximal one, a pending change included): the controller
  cannot elect another leader cleanly, so the partition's only server stays.

Checked: the simulator runs this rule (``sim/partition/broker.py``, ``SimBroker.steps_down``) under the
explorer's faults, the isolated leader among them, with the invariants ``one-writer-per-epoch``
and ``acked-write-lost`` (``tests/sim/test_explore.py``). The model checker (``mc/model.py``)
lets any replica that presumes leadership write, a zombie included: the behaviours with this
rule are a subset of the ones it explores, so its invariants (``one_leader_per_epoch``,
``no_committed_record_lost``) hold for them too.
"""

from __future__ import annotations

from floodmark.replication.partition import LeaderState, Partition


def steps_down(core: Partition, now_ms: int, *, in_doubt: bool, session_timeout_ms: int) -> bool:
    """True when ``core`` leads in its metadata but must answer clients as a non-leader.

    ``in_doubt``: the broker's leadership is in doubt (``ControllerSession.leadership_in_doubt``);
    ``session_timeout_ms``: ``broker.session.timeout.ms`` as the controller told it."""
    if not in_doubt:
        return False
    role = core.role
    if not isinstance(role, LeaderState):
        return False
    others = [r for r in role.isr_state.maximal_isr if r != core.config.broker_id]
    if not others:
        return False
    followed_within_ms = session_timeout_ms // 2
    for replica_id in others:
        state = core.replica_states.get(replica_id)
        if state is not None and state.last_fetch_time_ms > 0 \
                and now_ms - state.last_fetch_time_ms <= followed_within_ms:
            return False
    return True
