"""The simulated partition cluster (``floodmark sim scenario|explore|replay``): simulated brokers
around the shared replication core and storage, a simulated controller, clients, named
scenarios, the random-schedule explorer and its checker (the invariants it checks are defined
once in ``floodmark.spec.partition``, shared with the model checker)."""
