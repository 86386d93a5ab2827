"""The chaos run's clients, one process each (``python -m floodmark.chaos.workload ROLE ...``),
run inside the lab's client namespace. Every send, acknowledgement, poll and commit is a line of
the process's history file (``floodmark.chaos.history``).

Roles:

* ``setup`` — create the topics (RF 3, ``min.insync.replicas`` 2) and wait for their leaders;
* ``producer-confluent`` / ``producer-kafka-python`` — ``acks=all`` and idempotent (``--acks 1``:
  not idempotent, which the clients require), unique values ``<process>-<n>`` spread over every
  partition, at a bounded rate; a fatal producer error crashes the client and builds a new one;
* ``consumer-assign`` — confluent-kafka by assignment: every partition from the beginning,
  no commits; every ``--crash-s`` seconds a fresh client resumes where the last one was;
* ``consumer-group-confluent`` / ``consumer-group-kafka-python`` — one consumer group, committing
  synchronously after each poll, through rebalances (members crash and rejoin on a timer);
* ``producer-txn`` — confluent-kafka transactional producers (``transactional.id``
  ``chaos-<process>``): each transaction writes 1–4 unique values (padded to hundreds of bytes)
  to random partitions, then commits (``--commit-p``, 80 %) or aborts; every call and its
  outcome is a history line; a fatal error, or an outcome it cannot learn, builds a new producer
  with the same ``transactional.id`` (its ``init_transactions`` fences the old one);
* ``group-member`` / ``group-offsets`` — the consumer-group workload's members of one classic
  group, committing after processing, sync or async, and the group's committed offsets at the
  end (``floodmark.chaos.group_member``);
* ``share-member`` — the share-group workload's members (KIP-932), every record acknowledged
  ACCEPT; ``--idle-s`` makes it the final drainer (``floodmark.chaos.share_member``);
* ``final-read`` — a fresh client reads every partition from its low to its high watermark
  (``--isolation``: read_committed by default; ``--sparse``: offsets may be taken by
  transaction markers, so a partition is done at its end-of-partition event).

Workers stop on SIGTERM (or after ``--duration-s``, a hard bound) and close their clients.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from floodmark.chaos.history import HistoryWriter, padded, value_id
from floodmark.chaos.worker_config import confluent_config as _confluent_config
from floodmark.chaos.worker_config import kafka_python_security as _kafka_python_security
from floodmark.chaos.worker_config import records_confluent as _records_confluent
from floodmark.chaos.worker_config import security_properties as _security
from floodmark.chaos.worker_config import topics_of as _topics

STOP = {"now": False}
CRASH_AFTER_ERRORS = 200  # kafka-python: a producer failing this many sends in a row is rebuilt
END_ATTEMPTS = 2          # commit_transaction / abort_transaction calls per transaction
INIT_ATTEMPTS = 20        # init_transactions calls per producer before it is rebuilt
# A producer told to stop waits at most this long for the outcomes of its sends in flight: the
# harness stops the clients once the healed cluster acknowledges writes again, where they come
# within a second. A send still open after it stays indefinite (an ``invoke`` without an
# outcome); waiting out a stuck client's 30 s delivery timeout told nothing more.
STOP_FLUSH_S = 5.0


def _stopping(deadline: float) -> bool:
    return STOP["now"] or time.monotonic() >= deadline


# -- setup -------------------------------------------------------------------------------------
def setup(args: argparse.Namespace, history: HistoryWriter) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({**_security(args), "bootstrap.servers": args.bootstrap})
    keys = _topics(args.topics)
    counts: dict[str, int] = {}
    for topic, _p in keys:
        counts[topic] = counts.get(topic, 0) + 1
    deadline = time.monotonic() + args.duration_s
    pending = set(counts)
    while pending and time.monotonic() < deadline:
        futures = admin.create_topics([
            NewTopic(t, counts[t], args.replication_factor,
                     config={"min.insync.replicas": str(args.min_insync_replicas)})
            for t in sorted(pending)], request_timeout=10)
        for topic, future in futures.items():
            try:
                future.result(15)
                pending.discard(topic)
            except Exception as exc:  # brokers still registering, or already there
                if "already exists" in str(exc).lower() or "TOPIC_ALREADY_EXISTS" in str(exc):
                    pending.discard(topic)
        if pending:
            time.sleep(0.5)
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=10)
        ready = all(t in md.topics and p in md.topics[t].partitions
                    and md.topics[t].partitions[p].leader >= 0 for t, p in keys)
        if ready:
            history.event("ok", "setup", topics=sorted(counts))
            return 0
        time.sleep(0.3)
    print("setup: topics not ready in time", file=sys.stderr)
    return 1


# -- producers ---------------------------------------------------------------------------------
def _paced(rate: float, deadline: float) -> Callable[[], bool]:
    """Call once per send: sleeps to keep ``rate`` sends per second; False when it is time to
    stop."""
    start, n = time.monotonic(), [0]

    def tick() -> bool:
        n[0] += 1
        wait = start + n[0] / rate - time.monotonic()
        if wait > 0:
            time.sleep(min(wait, 1.0))
        return not _stopping(deadline)

    return tick


def producer_confluent(args: argparse.Namespace, history: HistoryWriter) -> int:
    from confluent_kafka import KafkaException, Producer

    keys = _topics(args.topics)
    rng = random.Random(args.seed)
    config = {**_security(args), "bootstrap.servers": args.bootstrap, "acks": args.acks,
              "enable.idempotence": args.acks == "all", "linger.ms": 5,
              "request.timeout.ms": 3000, "message.timeout.ms": 30000,
              "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000}
    if os.environ.get("FLOODMARK_CHAOS_RDKAFKA_DEBUG"):  # e.g. "eos,msg": why an epoch bump
        config["debug"] = os.environ["FLOODMARK_CHAOS_RDKAFKA_DEBUG"]

    def delivery(topic: str, partition: int, value: str) -> Callable[[Any, Any], None]:
        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                history.event("ok", "send", topic=topic, partition=partition, value=value,
                              offset=msg.offset())
            else:
                # Indefinite, every one: a message failed after retries (or purged from the
                # retry queue, _PURGE_QUEUE) may have been written by an earlier attempt. Only a
                # refusal before produce() returns (BufferError below) is a definite failure.
                history.event("info", "send", topic=topic, partition=partition, value=value,
                              error=err.name())
        return delivered

    producer = Producer(config)
    deadline = time.monotonic() + args.duration_s
    tick = _paced(args.rate, deadline)
    n = 0
    while tick():
        topic, partition = keys[rng.randrange(len(keys))]
        value = f"{args.process}-{n}"
        n += 1
        history.event("invoke", "send", topic=topic, partition=partition, value=value)
        try:
            producer.produce(topic, value=value.encode(), partition=partition,
                             on_delivery=delivery(topic, partition, value))
            producer.poll(0)
        except BufferError as exc:
            history.event("fail", "send", topic=topic, partition=partition, value=value,
                          error=f"BufferError: {exc}")
        except KafkaException as exc:  # a fatal idempotence error: this producer is done
            history.event("info", "send", topic=topic, partition=partition, value=value,
                          error=str(exc))
            with contextlib.suppress(Exception):
                producer.purge()
            with contextlib.suppress(Exception):
                producer.flush(5)
            history.event("info", "crash", error=str(exc))
            producer = Producer(config)
    with contextlib.suppress(Exception):
        producer.flush(STOP_FLUSH_S)
        producer.purge()
        producer.flush(1)
    return 0


def producer_txn(args: argparse.Namespace, history: HistoryWriter) -> int:
    """Transactions of 1–4 values over random partitions, their acknowledgements awaited,
    then committed (``--commit-p``) or aborted, one at a time, at most ``--rate`` per second
    and ``--max-ops`` in all.

    Outcomes, as the history tells them: ``commit`` ``ok`` is committed; ``abort`` ``ok``, or a
    transaction whose commit was never asked for, is aborted; a commit that came back with an
    error and was not followed by a successful abort is unknown (the checker wants it all or
    nothing). A fatal error, or an end call that keeps failing, closes the producer and builds
    a new one with the same ``transactional.id``: its ``init_transactions`` fences the old one
    and completes or aborts whatever the old one left.

    A transaction with a send whose outcome is unknown (no acknowledgement within the flush
    timeout, or a failed delivery: the record may be in the log) is aborted by its own
    producer. librdkafka then purges the unacknowledged records and gives a later record the
    sequence number of one that may be in the log, under the same producer epoch; Kafka's broker
    answers that record as a duplicate of the aborted one (a committed value lost), floodmark's
    refuses it OUT_OF_ORDER_SEQUENCE_NUMBER (docs/wire.md), which librdkafka makes fatal: a new
    producer follows. ``FLOODMARK_CHAOS_TXN_ABORT_UNACKNOWLEDGED=0`` ends such a transaction with
    a new producer instead (its epoch bump rules the reuse out), as the harness did before the
    broker refused the reuse."""
    from confluent_kafka import KafkaException, Producer

    keys = _topics(args.topics)
    rng = random.Random(f"{args.seed}:{args.process}")
    config: dict[str, Any] = {
        **_security(args),
        "bootstrap.servers": args.bootstrap, "transactional.id": f"chaos-{args.process}",
        "enable.idempotence": True, "acks": "all", "linger.ms": 2,
        "transaction.timeout.ms": args.txn_timeout_ms,
        "message.timeout.ms": args.txn_timeout_ms, "request.timeout.ms": 3000,
        "socket.timeout.ms": 5000, "retry.backoff.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000}
    if os.environ.get("FLOODMARK_CHAOS_RDKAFKA_DEBUG"):  # e.g. "eos,msg"
        config["debug"] = os.environ["FLOODMARK_CHAOS_RDKAFKA_DEBUG"]
    end_timeout_s = args.end_timeout_s
    abort_unacknowledged = os.environ.get("FLOODMARK_CHAOS_TXN_ABORT_UNACKNOWLEDGED", "1") != "0"
    failed_deliveries: dict[str, int] = {}   # txn -> deliveries that failed (callbacks)
    deadline = time.monotonic() + args.duration_s

    def flags(exc: Exception) -> dict[str, Any]:
        err = exc.args[0] if exc.args else None
        if err is None or not hasattr(err, "name"):
            return {"error": f"{type(exc).__name__}: {exc}", "retriable": False,
                    "abortable": False, "fatal": True}
        return {"error": err.name(), "message": str(err.str())[:300],
                "retriable": bool(err.retriable()), "abortable": bool(err.txn_requires_abort()),
                "fatal": bool(err.fatal())}

    def delivery(txn: str, topic: str, partition: int, value: str
                 ) -> Callable[[Any, Any], None]:
        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                history.event("ok", "send", topic=topic, partition=partition, value=value,
                              offset=msg.offset(), txn=txn)
            else:  # indefinite: an earlier attempt may have been written
                failed_deliveries[txn] = failed_deliveries.get(txn, 0) + 1
                history.event("info", "send", topic=topic, partition=partition, value=value,
                              error=err.name(), txn=txn)
        return delivered

    def close(producer: Any, why: str) -> None:
        history.event("info", "crash", error=why)
        with contextlib.suppress(Exception):
            producer.purge()
        with contextlib.suppress(Exception):
            producer.flush(1)
        with contextlib.suppress(Exception):
            producer.close(5)

    def start() -> Any | None:
        """A new producer, its transactions initialised (bounded); None when time is up."""
        for _attempt in range(INIT_ATTEMPTS):
            if _stopping(deadline):
                return None
            producer = Producer(config)
            for _try in range(INIT_ATTEMPTS):
                if _stopping(deadline):
                    close(producer, "stopping")
                    return None
                history.event("invoke", "init")
                try:
                    producer.init_transactions(end_timeout_s)
                    history.event("ok", "init")
                    return producer
                except KafkaException as exc:
                    why = flags(exc)
                    history.event("info", "init", **why)
                    if not why["retriable"]:
                        break
            close(producer, "init_transactions failed")
        return None

    def end(producer: Any, txn: str, values: list[str], commit: bool) -> bool:
        """Commit or abort; False when the producer must be rebuilt."""
        f = "commit" if commit else "abort"
        for attempt in range(END_ATTEMPTS):
            history.event("invoke", f, txn=txn, values=values, attempt=attempt)
            try:
                if commit:
                    producer.commit_transaction(end_timeout_s)
                else:
                    producer.abort_transaction(end_timeout_s)
                history.event("ok", f, txn=txn)
                return True
            except KafkaException as exc:
                why = flags(exc)
                history.event("info", f, txn=txn, **why)
                if why["fatal"]:
                    return False
                if commit and why["abortable"]:
                    if failed_deliveries.get(txn) and not abort_unacknowledged:
                        return False  # a record may be in the log: a new producer ends it
                    return end(producer, txn, values, commit=False)
                if not why["retriable"]:
                    return False
        return False

    producer = start()
    n = 0
    txns = 0
    tick = _paced(args.rate, deadline)
    while producer is not None and txns < args.max_ops and tick():
        txn = f"{args.process}-t{txns}"
        txns += 1
        try:
            producer.begin_transaction()
        except KafkaException as exc:
            history.event("info", "begin", txn=txn, **flags(exc))
            close(producer, "begin_transaction failed")
            producer = start()
            continue
        history.event("ok", "begin", txn=txn)
        values: list[str] = []
        broken: dict[str, Any] | None = None
        for _i in range(rng.randint(1, 4)):
            topic, partition = keys[rng.randrange(len(keys))]
            value = f"{args.process}-{n}"
            n += 1
            history.event("invoke", "send", topic=topic, partition=partition, value=value,
                          txn=txn)
            try:
                producer.produce(topic, value=padded(value, rng.randint(*args.pad_bytes)),
                                 partition=partition,
                                 on_delivery=delivery(txn, topic, partition, value))
                values.append(value)
                producer.poll(0)
            except BufferError as exc:
                history.event("fail", "send", topic=topic, partition=partition, value=value,
                              error=f"BufferError: {exc}", txn=txn)
            except KafkaException as exc:  # e.g. the transaction must abort, or fatal
                broken = flags(exc)
                history.event("fail", "send", topic=topic, partition=partition, value=value,
                              txn=txn, **broken)
                break
        remaining = 0
        if broken is None:
            # wait for the acknowledgements first (bounded), so an aborted transaction's records
            # are in the log too and its ABORT markers are written
            remaining = producer.flush(end_timeout_s)
            if remaining:
                history.event("info", "flush", txn=txn, remaining=remaining)
        commit = broken is None and rng.random() < args.commit_p
        unknown_sends = bool(remaining or failed_deliveries.get(txn))
        why = f"transaction {txn} left the producer unusable"
        if broken is not None and broken["fatal"]:
            ok = False
        elif not commit and unknown_sends and not abort_unacknowledged:
            # ended by the next producer's epoch bump (see the docstring)
            ok, why = False, f"transaction {txn} has unacknowledged sends: a new producer ends it"
        else:
            ok = end(producer, txn, values, commit)
        failed_deliveries.pop(txn, None)
        if not ok:
            close(producer, why)
            producer = start()
    if producer is not None:
        with contextlib.suppress(Exception):
            producer.close(5)
    return 0


def producer_kafka_python(args: argparse.Namespace, history: HistoryWriter) -> int:
    from kafka import KafkaProducer

    keys = _topics(args.topics)
    rng = random.Random(args.seed)
    acks: int | str = "all" if args.acks == "all" else int(args.acks)

    def make() -> Any:
        return KafkaProducer(
            bootstrap_servers=args.bootstrap.split(","), acks=acks,
            enable_idempotence=args.acks == "all", linger_ms=5, request_timeout_ms=3000,
            delivery_timeout_ms=30000, retry_backoff_ms=100, metadata_max_age_ms=1000,
            max_in_flight_requests_per_connection=5, **_kafka_python_security(args))

    producer = make()
    deadline = time.monotonic() + args.duration_s
    tick = _paced(args.rate, deadline)
    n = 0
    errors_in_a_row = [0]  # since the last acknowledgement (callbacks run on the sender thread)

    def on_ok(topic: str, partition: int, value: str) -> Callable[[Any], None]:
        def ok(md: Any) -> None:
            errors_in_a_row[0] = 0
            history.event("ok", "send", topic=topic, partition=partition, value=value,
                          offset=md.offset)
        return ok

    def on_error(topic: str, partition: int, value: str) -> Callable[[Any], None]:
        def error(exc: Any) -> None:
            errors_in_a_row[0] += 1
            history.event("info", "send", topic=topic, partition=partition, value=value,
                          error=type(exc).__name__)
        return error

    while tick():
        if errors_in_a_row[0] >= CRASH_AFTER_ERRORS:
            # e.g. an idempotent producer left in an error state (OutOfOrderSequenceNumber):
            # a new client, as an application would build
            with contextlib.suppress(Exception):
                producer.close(1)
            history.event("info", "crash", error=f"{errors_in_a_row[0]} errors in a row")
            errors_in_a_row[0] = 0
            producer = make()
        topic, partition = keys[rng.randrange(len(keys))]
        value = f"{args.process}-{n}"
        n += 1
        history.event("invoke", "send", topic=topic, partition=partition, value=value)
        try:
            future = producer.send(topic, value=value.encode(), partition=partition)
        except Exception as exc:  # raised before anything was sent
            history.event("fail", "send", topic=topic, partition=partition, value=value,
                          error=type(exc).__name__)
            continue
        future.add_callback(on_ok(topic, partition, value))
        future.add_errback(on_error(topic, partition, value))
    with contextlib.suppress(Exception):  # KafkaTimeoutError: sends still open
        producer.flush(STOP_FLUSH_S)
    with contextlib.suppress(Exception):
        producer.close(1)
    return 0


# -- consumers ---------------------------------------------------------------------------------
def _isolation(args: argparse.Namespace) -> dict[str, Any]:
    """Poll fields that name the isolation level, when the run asked for one (the
    transactional workload: the checker tells read_committed polls from the others)."""
    return {"isolation": args.isolation} if args.isolation else {}


def _hw_confluent(consumer: Any, records: list[list[Any]]) -> list[list[Any]]:
    from confluent_kafka import TopicPartition

    out = []
    for topic, partition in sorted({(r[0], r[1]) for r in records}):
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                    cached=True)
        if high is not None and high >= 0:
            out.append([topic, partition, high])
    return out


def consumer_assign(args: argparse.Namespace, history: HistoryWriter) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    keys = _topics(args.topics)
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.duration_s
    position = {k: OFFSET_BEGINNING for k in keys}
    while not _stopping(deadline):
        consumer = Consumer(_confluent_config(args, f"chaos-{args.process}"))
        consumer.assign([TopicPartition(t, p, position[(t, p)]) for t, p in keys])
        history.event("ok", "assign", partitions=[[t, p, position[(t, p)]] for t, p in keys])
        crash_at = time.monotonic() + rng.uniform(0.5, 1.5) * args.crash_s
        while not _stopping(deadline) and time.monotonic() < crash_at:
            records = _records_confluent(consumer.consume(200, 0.5))
            if records:
                history.event("ok", "poll", records=records,
                              hw=_hw_confluent(consumer, records), **_isolation(args))
                for topic, partition, offset, _v in records:
                    position[(topic, partition)] = offset + 1
        consumer.close()
        history.event("info", "crash")
    return 0


def consumer_group_confluent(args: argparse.Namespace, history: HistoryWriter) -> int:
    from confluent_kafka import Consumer, KafkaException

    topics = sorted({t for t, _p in _topics(args.topics)})
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.duration_s

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        history.event("ok", "rebalance", group=args.group,
                      assigned=[[tp.topic, tp.partition] for tp in partitions])

    while not _stopping(deadline):
        consumer = Consumer(_confluent_config(args, args.group))
        consumer.subscribe(topics, on_assign=on_assign)
        history.event("ok", "subscribe", group=args.group, topics=topics)
        crash_at = time.monotonic() + rng.uniform(0.5, 1.5) * args.crash_s
        while not _stopping(deadline) and time.monotonic() < crash_at:
            records = _records_confluent(consumer.consume(200, 0.5))
            if not records:
                continue
            history.event("ok", "poll", records=records, hw=_hw_confluent(consumer, records))
            try:
                done = consumer.commit(asynchronous=False) or []
                history.event("ok", "commit", group=args.group,
                              offsets=[[tp.topic, tp.partition, tp.offset] for tp in done])
            except KafkaException as exc:
                history.event("info", "commit", group=args.group, error=str(exc))
        consumer.close()
        history.event("info", "crash")
    return 0


def consumer_group_kafka_python(args: argparse.Namespace, history: HistoryWriter) -> int:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    topics = sorted({t for t, _p in _topics(args.topics)})
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.duration_s

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            history.event("ok", "rebalance", group=args.group,
                          assigned=[[tp.topic, tp.partition] for tp in assigned])

    while not _stopping(deadline):
        consumer = KafkaConsumer(
            bootstrap_servers=args.bootstrap.split(","), group_id=args.group,
            enable_auto_commit=False, auto_offset_reset="earliest",
            isolation_level="read_committed", metadata_max_age_ms=1000,
            session_timeout_ms=6000, heartbeat_interval_ms=500, request_timeout_ms=8000,
            **_kafka_python_security(args))
        consumer.subscribe(topics, listener=Listener())
        history.event("ok", "subscribe", group=args.group, topics=topics)
        crash_at = time.monotonic() + rng.uniform(0.5, 1.5) * args.crash_s
        while not _stopping(deadline) and time.monotonic() < crash_at:
            try:
                batch = consumer.poll(timeout_ms=500, max_records=200)
            except Exception as exc:  # e.g. a commit-failed rebalance surfacing in poll
                history.event("info", "poll", error=type(exc).__name__)
                continue
            records = [[tp.topic, tp.partition, r.offset, value_id(r.value)]
                       for tp, rs in batch.items() for r in rs]
            if not records:
                continue
            hw = [[tp.topic, tp.partition, consumer.highwater(tp)] for tp in batch
                  if consumer.highwater(tp) is not None]
            history.event("ok", "poll", records=records, hw=hw)
            try:
                consumer.commit()
                history.event("ok", "commit", group=args.group, offsets=[
                    [tp.topic, tp.partition, consumer.position(tp)] for tp in batch])
            except Exception as exc:
                history.event("info", "commit", group=args.group, error=type(exc).__name__)
        consumer.close()
        history.event("info", "crash")
    return 0


def final_read(args: argparse.Namespace, history: HistoryWriter) -> int:
    """Every partition from its low to its high watermark (asked of the leader), as polls of
    process ``final``, then one ``final`` line.

    ``--sparse`` (a log with transaction markers, whose offsets no consumer sees): a partition
    is done once its end-of-partition event comes at or past its high watermark. The high
    watermarks are asked with read_uncommitted, whatever ``--isolation`` is: a read_committed
    reader ends at the last stable offset, so one that cannot reach the high watermark within
    ``--duration-s`` shows an LSO stuck below it (recorded as ``reached`` and ``lso``)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    keys = _topics(args.topics)
    deadline = time.monotonic() + args.duration_s
    config = _confluent_config(args, "chaos-final")
    if args.sparse:
        config["enable.partition.eof"] = True
    consumer = Consumer(config)
    asker = consumer
    if args.sparse and config["isolation.level"] != "read_uncommitted":
        asker = Consumer({**config, "isolation.level": "read_uncommitted",
                          "group.id": "chaos-final-marks"})
    marks: dict[tuple[str, int], tuple[int, int]] = {}
    while len(marks) < len(keys) and not _stopping(deadline):
        for t, p in keys:
            if (t, p) in marks:
                continue
            try:
                low, high = asker.get_watermark_offsets(TopicPartition(t, p), timeout=5)
                marks[(t, p)] = (low, high)
            except Exception:  # leader not reachable yet
                time.sleep(0.2)
    if asker is not consumer:
        asker.close()
    consumer.assign([TopicPartition(t, p, low) for (t, p), (low, _h) in marks.items()])
    seen: dict[tuple[str, int], set[int]] = {k: set() for k in marks}
    reached: dict[tuple[str, int], int] = {}

    def finished(k: tuple[str, int]) -> bool:
        lo, hi = marks[k]
        if reached.get(k, -1) >= hi:
            return True
        return all(o in seen[k] for o in range(lo, hi))

    def done() -> bool:
        return all(finished(k) for k in marks)

    while not done() and not _stopping(deadline):
        msgs = consumer.consume(500, 0.5)
        for m in msgs:
            error = m.error()
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            if (error is not None and error.code() == KafkaError._PARTITION_EOF
                    and topic is not None and partition is not None and offset is not None):
                k = (str(topic), int(partition))
                reached[k] = max(reached.get(k, -1), int(offset))
        records = _records_confluent(msgs)
        records = [r for r in records if r[2] < marks[(r[0], r[1])][1]]
        if records:
            history.event("ok", "poll", records=records, hw=[
                [t, p, marks[(t, p)][1]] for t, p in sorted({(r[0], r[1]) for r in records})],
                **_isolation(args))
            for topic, partition, offset, _v in records:
                seen[(topic, partition)].add(offset)
    complete = len(marks) == len(keys) and done()
    extra: dict[str, Any] = {}
    if args.sparse:
        extra["reached"] = [[t, p, o] for (t, p), o in sorted(reached.items())]
        extra["isolation"] = config["isolation.level"]
        lso = []
        for k in sorted(marks):
            if not finished(k):
                with contextlib.suppress(Exception):
                    _lo, last_stable = consumer.get_watermark_offsets(TopicPartition(*k),
                                                                      timeout=5)
                    lso.append([k[0], k[1], last_stable])
        if lso:
            extra["lso"] = lso
    history.event("ok", "final", complete=complete,
                  high_watermarks=[[t, p, hi, lo] for (t, p), (lo, hi) in sorted(marks.items())],
                  **extra)
    consumer.close()
    return 0 if complete else 1


def group_member(args: argparse.Namespace, history: HistoryWriter) -> int:
    from floodmark.chaos.group_member import group_member as run_member

    return run_member(args, history, STOP)


def share_member(args: argparse.Namespace, history: HistoryWriter) -> int:
    from floodmark.chaos.share_member import share_member as run_member

    return run_member(args, history, STOP)


def group_offsets(args: argparse.Namespace, history: HistoryWriter) -> int:
    from floodmark.chaos.group_member import group_offsets as read_offsets

    return read_offsets(args, history, STOP)


ROLES: dict[str, Callable[[argparse.Namespace, HistoryWriter], int]] = {
    "setup": setup,
    "producer-confluent": producer_confluent,
    "producer-kafka-python": producer_kafka_python,
    "consumer-assign": consumer_assign,
    "consumer-group-confluent": consumer_group_confluent,
    "consumer-group-kafka-python": consumer_group_kafka_python,
    "final-read": final_read,
    "producer-txn": producer_txn,
    "group-member": group_member,
    "group-offsets": group_offsets,
    "share-member": share_member,
}


def _span(text: str) -> tuple[int, int]:
    low, _, high = text.partition(":")
    span = (int(low), int(high or low))
    if not 0 <= span[0] <= span[1]:
        raise argparse.ArgumentTypeError(f"bad span {text!r}: want MIN:MAX, 0 <= MIN <= MAX")
    return span


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m floodmark.chaos.workload")
    p.add_argument("role", choices=sorted(ROLES))
    p.add_argument("--process", required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topics", required=True, help="NAME:PARTITIONS,...")
    p.add_argument("--history", required=True)
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="the clients' security settings, librdkafka's names (a secured "
                        "cluster's client.properties)")
    p.add_argument("--acks", default="all", choices=["all", "1"])
    p.add_argument("--rate", type=float, default=50.0, help="sends per second")
    p.add_argument("--group", default="chaos-group")
    p.add_argument("--crash-s", type=float, default=20.0)
    p.add_argument("--duration-s", type=float, default=600.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--replication-factor", type=int, default=3)
    p.add_argument("--min-insync-replicas", type=int, default=2)
    p.add_argument("--isolation", default=None, choices=["read_committed", "read_uncommitted"],
                   help="consumers: the isolation level (default read_committed), named in "
                        "every poll line when given")
    p.add_argument("--sparse", action="store_true",
                   help="final-read: offsets may be taken by transaction markers; a partition "
                        "is read once its end-of-partition event reaches the high watermark")
    p.add_argument("--max-ops", type=int, default=1_000_000,
                   help="producer-txn: at most this many transactions")
    p.add_argument("--commit-p", type=float, default=0.8,
                   help="producer-txn: the share of transactions that commit (others abort)")
    p.add_argument("--txn-timeout-ms", type=int, default=10_000,
                   help="producer-txn: transaction.timeout.ms")
    p.add_argument("--end-timeout-s", type=float, default=2.5,
                   help="producer-txn: the timeout of each init, flush, commit and abort call "
                        "(a commit still timing out after its retries has an unknown "
                        "outcome: shorter than most faults, so some do)")
    p.add_argument("--pad-bytes", type=_span, default=(100, 900), metavar="MIN:MAX",
                   help="producer-txn: filler bytes after each value (random in the span)")
    p.add_argument("--process-ms", type=float, default=20.0,
                   help="group-member: each poll's processing takes up to this long")
    p.add_argument("--group-protocol", default="classic", choices=["classic", "consumer"],
                   help="group-member: group.protocol (consumer: KIP-848)")
    p.add_argument("--async-commit-p", type=float, default=0.5,
                   help="group-member: the share of commits made asynchronously")
    p.add_argument("--idle-s", type=float, default=0.0,
                   help="share-member: stop once no record came for this long (0: never)")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: STOP.update(now=True))
    signal.signal(signal.SIGINT, lambda *_: STOP.update(now=True))
    history = HistoryWriter(args.history, args.process)
    try:
        return ROLES[args.role](args, history)
    finally:
        history.close()


if __name__ == "__main__":
    sys.exit(main())
