"""Kafka's classic consumer-group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) as a
sans-I/O core (``core``): typed requests in (``messages``), answers and stores out as effect
values (``effects``), the groups' state in ``state``. ``broker.groups`` drives it."""
