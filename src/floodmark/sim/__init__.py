"""The deterministic simulator: a seeded world with virtual time (``world``) and a fake network
(``network``) shared by its two halves, the partition cluster (``partition/``) and the
controller quorum (``quorum/``), laid out like the model checker (``floodmark.mc``)."""
