"""Issue 22: a Quix Streams application in exactly-once mode through a SIGKILL of the broker that
is its group coordinator *and* leads one of its input partitions, restarted 8 s later.

Before the fix the new coordinator did not know the group (membership was kept in memory only):
every member got UNKNOWN_MEMBER_ID, librdkafka declared the assignment lost and started again from
the committed offsets, behind what the app had processed (Quix: ``InvalidStoredOffset: Cannot
store offset smaller or equal than already processed one: 0 <= 1143``, or a failed commit), or
the transactional producer waited forever in ``send_offsets_to_transaction`` on a group
coordinator librdkafka had torn down (the broker had left the Metadata answers at once). Here the
app must go on without a restart and count every input exactly once (``count_app.py``)."""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.helpers import start_cluster, wait_progress, wait_until
from tests.quix.test_quix_exactly_once import (
    PARTITIONS,
    SINK,
    SOURCE,
    Output,
    QuixApp,
    _produce,
    assert_counted_once,
    input_producer,
    quix_python,
)

pytestmark = pytest.mark.integration

INPUTS = 2000
DOWN_S = 8.0  # the scenario: the broker stays down this long, then starts again
GROUP = "quix-counter"  # count_app.py's consumer group
# The app's consumer must not miss its session while the coordinator moves (a new coordinator
# found, loaded and answering), or Quix exits: with a 6 s session and the load of three test
# workers beside it, the fresh-clone run of 5f5d01f saw "Consumer group session timed out ...
# after 6335 ms". The app is never killed here, so the session's length decides nothing else.
SESSION_TIMEOUT_MS = 30000


def test_quix_exactly_once_through_a_sigkill_of_the_group_coordinator(tmp_path: Path) -> None:
    if not quix_python().exists():
        pytest.fail(f"no Quix virtualenv at {quix_python()} (./dev setup makes it)")
    cluster = start_cluster(tmp_path / "quix-coordinator-cluster")
    app: QuixApp | None = None
    output: Output | None = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        # Each broker leads one input partition: whichever coordinates the group leads one too.
        rotations = [[1 + (p + i) % 3 for i in range(3)] for p in range(PARTITIONS)]
        futures = admin.create_topics([
            NewTopic(SOURCE, PARTITIONS, replica_assignment=rotations, config={"min.insync.replicas": "2"}),
            NewTopic(SINK, PARTITIONS, 3, config={"min.insync.replicas": "2"})])
        for f in futures.values():
            f.result(30)
        wait_until(lambda: all(cluster.leader_of(t, p) > 0 for t in (SOURCE, SINK)
                               for p in range(PARTITIONS)), 30, "leaders")
        producer = input_producer(cluster.bootstrap)
        sent: dict[str, list[str]] = defaultdict(list)
        _produce(producer, 0, INPUTS // 2, sent)

        output = Output(cluster.bootstrap)
        app = QuixApp(cluster.bootstrap, tmp_path, session_timeout_ms=SESSION_TIMEOUT_MS)

        def reached(n: int) -> Any:
            assert app is not None and output is not None
            app.supervise()
            return output.count() >= n

        wait_progress(lambda: reached(300), output.count, 120, "the app's first output")
        coordinator = cluster.leader_of("__consumer_offsets", 0)
        leads = [p for p in range(PARTITIONS) if cluster.leader_of(SOURCE, p) == coordinator]
        assert coordinator > 0 and leads, (coordinator, leads)
        # The rest of the input trickles in while the coordinator is down and after.
        trickle = threading.Thread(target=_produce,
                                   args=(producer, INPUTS // 2, INPUTS // 2, sent, 5))
        trickle.start()
        cluster.kill(coordinator)
        threading.Event().wait(DOWN_S)
        cluster.start_node(coordinator)
        trickle.join(180)
        assert not trickle.is_alive(), "the input producer did not finish"

        def complete() -> bool:
            reached(0)
            counted = output.by_key()  # type: ignore[union-attr]
            return sum(max((n for n, _ in v), default=0) for v in counted.values()) >= INPUTS
        wait_progress(complete, output.count, 120, f"every one of {INPUTS} inputs counted")
        app.supervise()
        assert app.exits == [], f"the app exited {app.exits}: {app.tail()}"
        app.stop()
        wait_until(lambda: output.count() >= INPUTS, 30, "the output settled")  # type: ignore[union-attr]

        assert_counted_once(output, sent, f"app starts {app.starts}")
        # The coordinator that took over loaded the group: nobody joined it again.
        logs = "".join(cluster.log_path(b).read_text(errors="replace")
                       for b in cluster.broker_ids)
        assert f"group {GROUP} preparing rebalance generation=1" not in logs, \
            "the group rebalanced after the failover"
        print(f"coordinator {coordinator} (leading {SOURCE} {leads}) SIGKILLed for {DOWN_S}s; "
              f"{INPUTS} inputs counted exactly once, app starts {app.starts}")
    finally:
        if app is not None:
            app.stop()
        if output is not None:
            output.close()
        cluster.stop()
