"""The share-group workload's members (``--workload share``, KIP-932): confluent-kafka share
consumers of one share group, every record acknowledged ACCEPT, the acknowledgements committed
synchronously after each poll; every delivery and every acknowledgement's outcome is a history
line (``floodmark.chaos.share_checker`` judges them):

* ``share-poll`` ``ok`` (``group``, ``records`` = ``[[topic, partition, offset, value,
  delivery_count], ...]``);
* ``share-ack`` ``invoke`` (``group``, ``id``, ``records`` = ``[[topic, partition, offset,
  value], ...]``, all ACCEPT), then ``ok`` with the records whose partition's acknowledgement
  the leader answered without error, ``fail`` (``error``) with those it refused with an error
  code (not applied: the record comes back) and ``info`` when the outcome is unknown
  (librdkafka's local errors, a broker transport failure among them: the leader may have
  applied it before the connection broke);
* ``crash``: the client failed and a new one was built (what it held comes back when its locks
  expire).

``--idle-s``: the member stops once no record has come for that long, and says so
(``share-drained`` ``ok``): the run's final drainer, after which every record written has been
delivered at least once.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Mapping
from typing import Any

from floodmark.chaos.history import HistoryWriter, value_id
from floodmark.chaos.worker_config import security_properties, topics_of

COMMIT_TIMEOUT_S = 10.0
POLL_S = 0.5


def share_member(args: argparse.Namespace, history: HistoryWriter, stop: Mapping[str, bool]
                 ) -> int:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    deadline = time.monotonic() + args.duration_s
    topics = sorted({t for t, _p in topics_of(args.topics)})
    config: dict[str, Any] = {**security_properties(args), "bootstrap.servers": args.bootstrap,
                              "group.id": args.group, "client.id": args.process,
                              "share.acknowledgement.mode": "explicit",
                              "socket.timeout.ms": 5000}
    acks = 0
    last_record = time.monotonic()
    while not stop.get("now") and time.monotonic() < deadline:
        consumer = ShareConsumer(config)
        consumer.subscribe(topics)
        history.event("ok", "subscribe", group=args.group, topics=topics)
        try:
            while not stop.get("now") and time.monotonic() < deadline:
                if args.idle_s and time.monotonic() - last_record > args.idle_s:
                    history.event("ok", "share-drained", group=args.group, idle_s=args.idle_s)
                    return 0  # (closed below)
                msgs = [m for m in consumer.poll(POLL_S) if m.error() is None]
                if not msgs:
                    continue
                last_record = time.monotonic()
                history.event("ok", "share-poll", group=args.group, records=[
                    [m.topic(), m.partition(), m.offset(), value_id(m.value()),
                     int(m.delivery_count() or 0)] for m in msgs])
                for m in msgs:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                acks += 1
                # the records by partition: [topic, partition, offset, value]
                held: dict[tuple[str, int], list[list[Any]]] = {}
                for m in msgs:
                    tp = (str(m.topic()), int(m.partition() or 0))
                    held.setdefault(tp, []).append([tp[0], tp[1], m.offset(),
                                                    value_id(m.value())])
                every = [r for rs in held.values() for r in rs]
                history.event("invoke", "share-ack", group=args.group, id=acks, records=every)
                try:
                    results = consumer.commit_sync(COMMIT_TIMEOUT_S)
                except Exception as exc:  # the outcome is unknown
                    history.event("info", "share-ack", group=args.group, id=acks,
                                  records=every, error=str(exc))
                    continue
                outcomes: dict[tuple[str, str | None], list[list[Any]]] = {}
                for (topic, partition), rs in held.items():
                    found = [err for tp, err in (results or {}).items()
                             if (tp.topic, tp.partition) == (topic, partition)]
                    outcome = _outcome(found[0]) if found else ("info", "no result")
                    outcomes.setdefault(outcome, []).extend(rs)
                for (type_, error), rs in sorted(outcomes.items(), key=str):
                    history.event(type_, "share-ack", group=args.group, id=acks, records=rs,
                                  **({"error": error} if error else {}))
        except Exception as exc:  # the client failed: a new one
            history.event("info", "crash", group=args.group, error=str(exc))
            time.sleep(0.5)
        finally:
            with contextlib.suppress(Exception):  # closing a failed client: nothing to do
                consumer.close()
    return 0


# Errors that do not say the acknowledgement was not applied: librdkafka reports its own request
# timeout as REQUEST_TIMED_OUT, and a leader whose state write could not be confirmed by the
# share coordinator (the write may have landed) answers COORDINATOR_NOT_AVAILABLE.
INDETERMINATE = frozenset({"REQUEST_TIMED_OUT", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
                           "COORDINATOR_LOAD_IN_PROGRESS", "UNKNOWN_SERVER_ERROR",
                           "NETWORK_EXCEPTION"})


def _outcome(err: Any) -> tuple[str, str | None]:
    """A partition's acknowledgement result: ``ok`` (None); ``fail`` for a broker error that
    refuses it (INVALID_RECORD_STATE, NOT_LEADER_OR_FOLLOWER...: not applied); ``info`` for
    librdkafka's local errors and ``INDETERMINATE`` (a transport failure, a timeout: the leader
    may have applied and stored it before the answer was lost)."""
    if err is None:
        return "ok", None
    args = getattr(err, "args", None) or (None,)
    kafka_error: Any = args[0]
    if not (hasattr(kafka_error, "code") and hasattr(kafka_error, "name")):
        return "info", str(err)
    name = str(kafka_error.name())
    return ("fail" if int(kafka_error.code()) > 0 and name not in INDETERMINATE
            else "info"), name
