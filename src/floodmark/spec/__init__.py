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
