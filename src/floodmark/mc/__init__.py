"""The model checker: exhaustive (bounded) and random-walk searches over the real replication
and quorum cores, judged by the invariants of ``floodmark.spec``. Reached through its commands
(``floodmark sim check``, ``floodmark sim check-quorum``: ``floodmark.cli.main`` loads
``floodmark.mc.cli`` and ``floodmark.mc.quorum.cli``); no other package imports it."""

__all__: list[str] = []
