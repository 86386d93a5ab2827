"""The cluster part of ``floodmark demo``: a real local cluster loses its partition leader.

It starts the controller and three broker processes (``floodmark.cluster.LocalCluster``),
creates a topic with RF=3 and min.insync.replicas=2, and writes numbered page-view events with
acks=all and the idempotent producer (confluent-kafka). In the middle of the stream it kills the
partition leader with SIGKILL. The controller fences that broker once its session times out and
elects a new leader from the ISR, with a higher leader epoch; the producer follows the new
leader. The killed broker is restarted: it truncates anything it had that the new leader does
not have (by leader epoch) and rejoins the ISR. At the end the demo reads the topic with a fresh
consumer and checks that every acknowledged event is there exactly once. It then shows every
replica's LEO, HW and epoch cache, and compares the replicas' segment files below the HW.
"""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from floodmark.progress import ProgressWatch

TOPIC = "page-views"
EVENTS = 6000


def _say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


STALL_S = 60.0  # a wait gives up only when what it watches has not moved for this long


def wait_on_progress(pred: Callable[[], bool], motion: Callable[[], dict[str, object]]) -> bool:
    """Wait until ``pred()``, for as long as ``motion()`` keeps changing; False (after saying
    what stopped) once nothing in it has moved for STALL_S."""
    watch = ProgressWatch(int(STALL_S * 1000), int(time.monotonic() * 1000))
    while not pred():
        stalled = watch.observe(int(time.monotonic() * 1000), motion())
        if stalled is not None:
            _say(f"stopped waiting: {stalled}")
            return False
        time.sleep(0.1)
    return True


def live_cluster_tour() -> bool:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from floodmark.cluster import LocalCluster, describe_replicas, read_partition_values

    _say()
    _say("=" * 100)
    _say("7. A real cluster: controller + 3 brokers, RF=3, min.insync.replicas=2, acks=all; "
         "SIGKILL the leader")
    _say("=" * 100)
    with tempfile.TemporaryDirectory(prefix="floodmark-demo-cluster-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", 3, {},
                               {"auto.leader.rebalance.enable": "false"})
        cluster.start()
        try:
            _say(f"$ floodmark cluster up --brokers 3   ->  bootstrap {cluster.bootstrap}")
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
                                )[TOPIC].result(30)
            wait_on_progress(lambda: cluster.leader_of(TOPIC) > 0,
                  lambda: {"leader": cluster.leader_of(TOPIC)})
            reg = cluster.partition_registration(TOPIC) or {}
            _say(f"topic {TOPIC}: leader {reg.get('leader')} leader_epoch "
                 f"{reg.get('leader_epoch')} isr {reg.get('isr')}")
            acked: dict[int, bytes] = {}
            failed: list[str] = []
            lock = threading.Lock()

            def on_delivery(err: object, msg: object) -> None:
                with lock:
                    if err is None:
                        acked[msg.offset()] = msg.value()  # type: ignore[attr-defined]
                    else:
                        failed.append(str(err))

            def produce() -> None:
                p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                              "enable.idempotence": True, "linger.ms": 5,
                              "message.timeout.ms": 60000, "request.timeout.ms": 4000,
                              "socket.timeout.ms": 4000, "log_level": 0,
                              "topic.metadata.refresh.interval.ms": 500})
                for i in range(EVENTS):
                    p.produce(TOPIC, value=b"page-view %05d" % i, partition=0,
                              on_delivery=on_delivery)
                    if i % 20 == 0:
                        p.poll(0.004)
                wait_on_progress(lambda: p.flush(0.5) == 0,
                                 lambda: {"acknowledged": len(acked), "failed": len(failed)})

            t = threading.Thread(target=produce, daemon=True)
            t.start()
            wait_on_progress(lambda: len(acked) > EVENTS // 4,
                  lambda: {"acknowledged": len(acked), "failed": len(failed)})
            victim = cluster.leader_of(TOPIC)
            killed_at = time.monotonic()
            cluster.kill(victim, signal.SIGKILL)
            _say(f"SIGKILL broker {victim} (the leader) after {len(acked)} acknowledged events")
            wait_on_progress(lambda: cluster.leader_of(TOPIC) not in (victim, -1),
                  lambda: {"leader": cluster.leader_of(TOPIC),
                           "isr": (cluster.partition_registration(TOPIC) or {}).get("isr")})
            reg = cluster.partition_registration(TOPIC) or {}
            _say(f"controller: broker {victim} fenced after broker.session.timeout.ms; new "
                 f"leader {reg.get('leader')} leader_epoch {reg.get('leader_epoch')} isr "
                 f"{reg.get('isr')} ({time.monotonic() - killed_at:.1f} s after the kill)")
            cluster.start_node(victim)
            _say(f"$ floodmark cluster start {victim}   (it comes back as a follower)")
            wait_on_progress(lambda: not t.is_alive(),
                  lambda: {"acknowledged": len(acked), "failed": len(failed)})

            def isr() -> list[int]:
                return sorted((cluster.partition_registration(TOPIC) or {}).get("isr", []))

            healed = wait_on_progress(lambda: isr() == [1, 2, 3], lambda: {
                "isr": isr(), "log_end_offsets": [r.get("log_end_offset") for row in
                                                  describe_replicas(cluster, TOPIC)
                                                  for r in row["replicas"]]})
            _say(f"ISR full again: {healed}")
            c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "demo-verify",
                          "enable.auto.commit": False, "log_level": 0})
            _lo, hw = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
            c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
            stored: dict[int, bytes] = {}
            watch = ProgressWatch(int(STALL_S * 1000), int(time.monotonic() * 1000))
            while len(stored) < hw:
                if (stalled := watch.observe(int(time.monotonic() * 1000),
                                             {"records read": len(stored)})) is not None:
                    _say(f"stopped reading below the HW ({hw}): {stalled}")
                    break
                for m in c.consume(500, 0.5):
                    offset, value = m.offset(), m.value()
                    if m.error() is None and offset is not None and value is not None:
                        stored[offset] = value
            c.close()
            missing = [o for o, v in acked.items() if stored.get(o) != v]
            values = list(stored.values())
            duplicates = len(values) - len(set(values))
            _say(f"acknowledged: {len(acked)}, failed sends: {len(failed)}, stored below the HW "
                 f"({hw}): {len(stored)}")
            _say(f"acknowledged but missing: {len(missing)}; duplicates: {duplicates}")
            _say(f"$ floodmark cluster describe {TOPIC}")
            time.sleep(1.0)  # followers learn the final HW one fetch late
            for row in describe_replicas(cluster, TOPIC):
                for r in row["replicas"]:
                    cache = ", ".join(f"{e}@{o}" for e, o in r.get("epoch_cache", []))
                    _say(f"  replica {r['id']}{' (leader)' if r['id'] == row['leader'] else ''}"
                         f": LEO {r.get('log_end_offset')} HW {r.get('high_watermark')} "
                         f"epochs [{cache}]")
            logs = [read_partition_values(cluster.partition_dir(b, TOPIC))
                    for b in cluster.broker_ids]
            identical = all({o: v for o, v in lg.items() if o < hw} ==
                            {o: v for o, v in logs[0].items() if o < hw} for lg in logs)
            _say(f"replica logs identical below the HW: {identical}")
            ok = healed and not missing and not duplicates and identical and len(acked) > 0
            _say("VERDICT: every acknowledged event survived the leader's SIGKILL, exactly once"
                 if ok else "VERDICT: UNEXPECTED (see above)")
            return ok
        finally:
            cluster.stop()
