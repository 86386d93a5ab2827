"""The transaction coordinator's rules (KIP-98), sans-I/O: the state of each transactional id
(``state``), its records in ``__transaction_state`` (``log``), the coordinator that decides
every request and every step of a commit or an abort (``coordinator``), and the one driver that
carries its decisions out through ports (``driver``: writes, markers and their retries, timers).
The broker (``floodmark.broker.txn_coordinator``) and the simulator
(``floodmark.sim.partition.txn_coordinator``) only plug their ports into that driver."""
