"""The controller quorum (KIP-595 KRaft, with KIP-996 pre-vote), sans-I/O.

``core.QuorumCore`` is the state machine every voter runs: the real controller process, the
simulator (``floodmark.sim.quorum``) and the tests drive the same code. The log it replicates is
a floodmark ``Log`` (the metadata log, ``__cluster_metadata-0``); divergence is found with the
epoch cache and truncation rules of ``floodmark.replication`` (``validate_fetch`` on the leader,
``truncation_point`` on the follower), the leader epoch is the Raft term, and the metadata high
watermark is the commit index.
"""
