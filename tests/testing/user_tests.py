"""What a user of the floodmark pytest plugin writes: test files (as text) that pytester runs
in a fresh pytest session, with confluent-kafka against the plugin's fixtures."""

HELPERS = '''
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


def produce(bootstrap, topic, values):
    failed = []

    def on_delivery(err, msg):
        if err is not None:
            failed.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "reconnect.backoff.max.ms": 200, "message.timeout.ms": 60000})
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=on_delivery)
    assert p.flush(90) == 0
    assert not failed, failed


def consume(bootstrap, topic, count, idle_polls=40):
    """The first ``count`` values of partition 0; fails once ``idle_polls`` polls in a row
    bring nothing new (progress, not a deadline)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-" + topic,
                  "enable.auto.commit": False, "reconnect.backoff.max.ms": 200})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, idle = [], 0
    try:
        while len(got) < count:
            msg = c.poll(0.5)
            if msg is None or msg.error() is not None:
                idle += 1
                assert idle < idle_polls, f"no progress after {len(got)} values"
                continue
            idle = 0
            got.append(msg.value())
    finally:
        c.close()
    return got
'''

BROKER_TESTS = HELPERS + '''

def test_produce_consume_crash_restart(floodmark_broker):
    values = [b"v%d" % i for i in range(50)]
    produce(floodmark_broker.bootstrap_servers, "orders", values)
    assert consume(floodmark_broker.bootstrap_servers, "orders", 50) == values

    before = floodmark_broker.bootstrap_servers
    floodmark_broker.kill()                 # SIGKILL
    assert not floodmark_broker.alive()
    floodmark_broker.restart()              # same port, returns once it serves
    assert floodmark_broker.bootstrap_servers == before
    produce(before, "orders", [b"after"])
    assert consume(before, "orders", 51) == [*values, b"after"]
'''

MODULE_TESTS = HELPERS + '''
SEEN = []


def test_module_broker_first(floodmark_broker_module):
    SEEN.append(floodmark_broker_module.bootstrap_servers)
    produce(floodmark_broker_module.bootstrap_servers, "shared", [b"one"])


def test_module_broker_is_shared(floodmark_broker_module):
    assert SEEN == [floodmark_broker_module.bootstrap_servers]
    assert consume(floodmark_broker_module.bootstrap_servers, "shared", 1) == [b"one"]


def test_module_cluster_first(floodmark_cluster_module):
    SEEN.append(floodmark_cluster_module.bootstrap_servers)
    produce(floodmark_cluster_module.bootstrap_servers, "shared", [b"two"])


def test_module_cluster_is_shared(floodmark_cluster_module):
    assert SEEN[-1] == floodmark_cluster_module.bootstrap_servers
    assert consume(floodmark_cluster_module.bootstrap_servers, "shared", 1) == [b"two"]
'''

CLUSTER_TESTS = HELPERS + '''

def test_leader_killed_mid_test(floodmark_cluster):
    bootstrap = floodmark_cluster.bootstrap_servers
    assert len(bootstrap.split(",")) == 3
    produce(bootstrap, "events", [b"e%d" % i for i in range(20)])
    leader = floodmark_cluster.leader_of("events", 0)
    assert leader in floodmark_cluster.broker_ids

    floodmark_cluster.kill(leader)          # SIGKILL
    floodmark_cluster.wait_serving()        # the survivors lead every partition
    assert floodmark_cluster.leader_of("events", 0) not in (-1, leader)
    produce(bootstrap, "events", [b"e%d" % i for i in range(20, 40)])

    floodmark_cluster.restart(leader, in_sync=True)   # back, caught up, in the ISR
    assert floodmark_cluster.running_brokers() == [1, 2, 3]
    assert consume(bootstrap, "events", 40) == [b"e%d" % i for i in range(40)]
'''

SESSION_TESTS = HELPERS + '''

def test_session_cluster(floodmark_cluster_session):
    produce(floodmark_cluster_session.bootstrap_servers, "s-{name}", [b"x"])
    assert consume(floodmark_cluster_session.bootstrap_servers, "s-{name}", 1) == [b"x"]


def test_session_broker(floodmark_broker_session):
    produce(floodmark_broker_session.bootstrap_servers, "b-{name}", [b"y"])
    assert consume(floodmark_broker_session.bootstrap_servers, "b-{name}", 1) == [b"y"]
'''
