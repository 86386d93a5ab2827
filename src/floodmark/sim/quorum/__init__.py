"""The simulated controller quorum (``floodmark sim quorum``): voters around the shared
``QuorumCore`` and its driver, scenarios, the explorer and the disk-wipe schedules (the
invariants they check are defined once in ``floodmark.spec.quorum``, shared with the model
checker)."""
