"""The transaction coordinator's rules (KIP-98), sans-I/O: the state of each transactional id
(``state``), its records in ``__transaction_state`` (``log``) and the coordinator that decides
every request and every step of a commit or an abort (``coordinator``). The broker drives it
(``floodmark.broker.txn_coordinator``): it writes the records, sends the markers, keeps time."""
