"""The share-group workload's checks (``--workload share``, KIP-932): Jepsen's queue for a
share group, whose guarantee is at-least-once with a delivery count.

Pure: the merged history in, a verdict out. ``check_share`` runs ``checker.check`` (the
producers, the final read, the replicas) and then judges the share members' lines
(``floodmark.chaos.share_member``, ``share-poll`` and ``share-ack``). Anomalies, each with the
lines proving it:

* ``redelivered_after_accept`` — a record (topic, partition, offset) delivered again after an
  ACCEPT of it came back ``ok`` (an acknowledged record is never delivered again);
* ``undelivered`` — a value its producer was told was written (``send`` ``ok``) that no share
  member was ever given (at any offset: a producer's resend may write a value twice), although the final drainer (process ``share-final``) ran until it was
  idle (every record comes at least once; one that reaches the delivery-count limit is archived
  only after it was delivered that many times);
* ``delivery_count`` — a delivery whose count is above ``limit``, or not above the count of an
  earlier delivery of the same record (topic, partition, offset) (each delivery counts one more, and the count survives a
  leader or coordinator failover: it is stored with the share partition's state);
* ``refused_not_redelivered`` — a record whose ACCEPT the leader refused (``fail``: not
  applied), never delivered again although the drainer went idle and its delivery count was
  below the limit (a refused record stays with its member until its lock expires, then comes
  back);
* ``undrained`` — the final drainer never went idle (``share-drained``): records kept coming,
  so ``undelivered`` could not be judged.

Redeliveries of records not (yet) accepted are at-least-once's right: counted, not reported.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from floodmark.chaos.checker import MAX_EXAMPLES, CheckResult, Event, Replicas, check

SHARE_ANOMALIES = ("redelivered_after_accept", "undelivered", "delivery_count",
                   "refused_not_redelivered", "undrained")
SHARE_FINAL_PROCESS = "share-final"


def _line(event: Event, index: int) -> int:
    return int(event.get("line", index + 1))


def check_share(events: Sequence[Event], replicas: Replicas | None = None,
                in_sync: Mapping[str, Sequence[int]] | None = None, *, group: str,
                limit: int) -> CheckResult:
    """``check`` plus the share checks above, for the members of ``group``; ``limit``:
    ``group.share.delivery.count.limit``."""
    base = check(events, replicas, in_sync)
    anomalies = {name: list(examples) for name, examples in base.anomalies.items()}
    counts = dict(base.counts)
    for name in SHARE_ANOMALIES:
        anomalies.setdefault(name, [])
        counts.setdefault(name, 0)

    def add(name: str, example: dict[str, Any]) -> None:
        counts[name] += 1
        if len(anomalies[name]) < MAX_EXAMPLES:
            anomalies[name].append(example)

    produced: dict[str, int] = {}                 # value -> line of its send ok
    Record = tuple[str, int, int]                 # topic, partition, offset
    accepted: dict[Record, int] = {}              # record -> first line of an ok ACCEPT
    refused: dict[Record, int] = {}               # record -> last line of a refused ACCEPT
    deliveries: dict[Record, list[tuple[int, int]]] = defaultdict(list)  # (line, count)
    delivered_values: set[str] = set()
    acks = {"ok": 0, "fail": 0, "info": 0}
    drained = False
    for index, event in enumerate(events):
        line = _line(event, index)
        f, type_ = event.get("f"), event.get("type")
        if f == "send" and type_ == "ok":
            produced.setdefault(str(event["value"]), line)
            continue
        if event.get("group") != group:
            continue
        if f == "share-poll" and type_ == "ok":
            for topic, partition, offset, value, count in event.get("records", []):
                record = (str(topic), int(partition), int(offset))
                delivered_values.add(str(value))
                seen = deliveries[record]
                where = {"value": str(value), "topic": topic, "partition": int(partition),
                         "offset": int(offset), "delivery_count": int(count), "line": line,
                         "process": event.get("process")}
                if record in accepted and accepted[record] < line:
                    add("redelivered_after_accept",
                        {**where, "accepted_line": accepted[record]})
                if int(count) > limit or (seen and int(count) <= seen[-1][1]):
                    add("delivery_count", {**where, "earlier": [
                        {"line": a, "delivery_count": c} for a, c in seen[-3:]]})
                seen.append((line, int(count)))
        elif f == "share-ack" and type_ in acks:
            if type_ != "invoke":
                acks[type_] += 1
            for topic, partition, offset, _value in event.get("records", []):
                record = (str(topic), int(partition), int(offset))
                if type_ == "ok":
                    accepted.setdefault(record, line)
                elif type_ == "fail":
                    refused[record] = line
        elif f == "share-drained" and type_ == "ok":
            drained = True
    if drained:
        for value, line in sorted(produced.items(), key=lambda kv: kv[1]):
            if value not in delivered_values:
                add("undelivered", {"value": value, "send_line": line})
        for record, line in sorted(refused.items(), key=lambda kv: kv[1]):
            seen = deliveries.get(record, [])
            if record not in accepted and seen and seen[-1][0] < line \
                    and seen[-1][1] < limit:
                add("refused_not_redelivered", {
                    "topic": record[0], "partition": record[1], "offset": record[2],
                    "refused_line": line, "delivered_line": seen[-1][0],
                    "delivery_count": seen[-1][1]})
    else:
        add("undrained", {"process": SHARE_FINAL_PROCESS})
    redelivered = sum(1 for seen in deliveries.values() if len(seen) > 1)
    base.anomalies, base.counts = anomalies, counts
    base.valid = base.valid and not any(counts[name] for name in SHARE_ANOMALIES)
    base.group = {
        "group": group, "deliveries": sum(len(s) for s in deliveries.values()),
        "records_delivered": len(deliveries), "accepted": len(accepted),
        "acknowledgements": acks, "redelivered_records": redelivered,
        "max_delivery_count": max((c for s in deliveries.values() for _l, c in s),
                                  default=0),
        "drained": drained}
    return base
