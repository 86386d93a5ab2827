"""The classic consumer-group coordinator core (``broker.classic_group``) in the simulator:
members that join, sync, heartbeat, consume, commit, leave, crash and restart (static members
too), stores that succeed, fail or are lost, coordinator failovers that load the stored
record; the group invariants of ``spec.groups`` checked after every step."""
