"""A leader elected again in a later leader epoch must not count what its followers fetched in an
earlier epoch (found by the model checker driving the real ``Partition``; issue 13 item 8).

The story, in the simulator (every step is the running code; the network loses the metadata
pushes to a broker cut off from the controller, as a broker that polls the metadata log late
gets several changes at once and applies only the last):

1. A leads epoch 0; a producer sends r0 (acks=all); C fetches r0 and fetches again, so A knows
   C's log ends at 1. B has not fetched, so the HW stays 0 and r0 is not acknowledged.
2. A is cut off from the controller. The controller moves leadership to B (epoch 1); C follows B
   and, B's log being empty, truncates r0 — correct, r0 was never committed.
3. C is cut off from the controller too. B's session expires: A leads epoch 2 with ISR {A, C}.
4. A hears from the controller again and applies epoch 2 straight from epoch 0. If it kept C's
   log end (1) from epoch 0 — as Kafka's ``resetReplicaState`` does for a re-elected leader — its
   HW moves to 1 and r0 is acknowledged, while ISR member C no longer has it.
5. A dies; C, the only ISR member left, is elected: the acknowledged r0 is gone.

The rule (``replication.partition``): a new leader epoch is a new leadership; follower log ends
learned in an earlier epoch are forgotten and the HW waits for each follower's next fetch.
"""

from __future__ import annotations

from floodmark.replication.modes import Truncation
from floodmark.sim.partition.script import Script


def test_reelected_leader_does_not_ack_with_follower_state_from_an_earlier_epoch() -> None:
    s = Script(("A", "B", "C"), Truncation.LEADER_EPOCH, restart_keeps_isr=False)
    s.boot()
    s.produce("r0")
    s.fetch("C")
    s.fetch("C")
    leader = s.cluster.broker("A").partition
    assert leader is not None and leader.remote_log_end_offsets()[s._id("C")] == 1
    assert s.acknowledged() == []
    s.deafen("A", "A loses contact with the controller (it keeps leading epoch 0)")
    s.move_leadership()
    s.fetch("C")
    assert s.cluster.broker("C").log is not None
    assert s.cluster.broker("C").log.log_end_offset == 0  # r0 was never committed: cut
    s.deafen("C", "C loses contact with the controller (it keeps following B in epoch 1)")
    s.fence("B")
    reg = s.cluster.controller.registration
    assert (reg.leader, reg.leader_epoch, reg.isr) == (s._id("A"), 2, (s._id("A"), s._id("C")))
    s.undeafen("A", "A hears from the controller again: epoch 2, straight from epoch 0")
    a = s.cluster.broker("A").partition
    assert a is not None and a.is_leader and a.leader_epoch == 2
    # The HW may not count C's log end from epoch 0: C has cut r0 since.
    assert a.high_watermark == 0
    assert s.acknowledged() == []
    s.crash("A", lose_unsynced=False)
    s.fence("A")
    s.undeafen("C", "C hears from the controller again")
    assert s.final_leader() == "C"
    assert s.lost() == []

