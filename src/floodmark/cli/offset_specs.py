"""What a person types to say which offsets a group should move to, read as kafka-consumer-groups.sh
reads it: ``--topic T`` / ``T:0,1`` scopes, ``--to-datetime`` (``YYYY-MM-DDTHH:mm:SS.sss``, an
optional zone; none means local time, as Kafka's tool), ``--by-duration`` (ISO-8601 / Java
``Duration``: ``PnDTnHnMnS``), ``--from-file`` / ``--export`` CSV (``topic,partition,offset``, or
``group,topic,partition,offset`` with ``--all-groups``), and the clamp Kafka applies to
``--to-offset`` and ``--shift-by``. Pure functions: every mistake is a one-line ``CliError``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from floodmark.cli.common import CliError


@dataclass(frozen=True)
class TopicScope:
    """``--topic T`` (every partition: ``partitions`` is None) or ``--topic T:0,1``."""

    topic: str
    partitions: tuple[int, ...] | None


def parse_topic_scope(text: str) -> TopicScope:
    topic, sep, rest = text.partition(":")
    topic = topic.strip()
    if not topic:
        raise CliError(f"--topic {text!r}: no topic name (TOPIC or TOPIC:PARTITION[,PARTITION...])")
    if not sep:
        return TopicScope(topic, None)
    parts: list[int] = []
    for item in rest.split(","):
        item = item.strip()
        if not item.isdigit():
            raise CliError(f"--topic {text!r}: partition {item!r} is not a number "
                           "(TOPIC:PARTITION[,PARTITION...])")
        parts.append(int(item))
    return TopicScope(topic, tuple(sorted(set(parts))))


def parse_datetime_ms(text: str) -> int:
    """``--to-datetime``: ``YYYY-MM-DDTHH:mm:SS[.sss]`` with an optional zone (``Z``,
    ``+HH:MM``); without one, the local time zone (Kafka's tool does the same)."""
    if "T" not in text:
        raise CliError(f"--to-datetime {text!r} has no 'T': the format is "
                       "YYYY-MM-DDTHH:mm:SS.sss[+HH:MM|Z]")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--to-datetime {text!r} is not YYYY-MM-DDTHH:mm:SS.sss[+HH:MM|Z]"
                       ) from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as kafka-consumer-groups.sh reads it
    return int(when.timestamp() * 1000)


# java.time.Duration.parse's grammar: [-+]PnDTnHnMn.nS, every field optional but one.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?"
    r"(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?)(\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """``--by-duration``: an ISO-8601 duration as Java's ``Duration.parse`` takes it
    (``P1DT2H``, ``PT30M``, ``PT0.5S``, ``-PT1H``), in milliseconds."""
    m = _DURATION.fullmatch(text.strip())
    fields = m.groups() if m else ()
    if m is None or (fields[1] is None and fields[3] is None and fields[4] is None
                     and fields[6] is None) or fields[2] == "T" or fields[2] == "t":
        raise CliError(f"--by-duration {text!r} is not an ISO-8601 duration PnDTnHnMnS "
                       "(e.g. P1DT2H, PT30M)")
    sign, days, _t, hours, minutes, sec_sign, seconds, fraction = fields
    ms = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000
          + int(minutes or 0) * 60_000)
    if seconds is not None:
        sec_ms = int(seconds) * 1000 + int((fraction or "").ljust(3, "0")[:3])
        ms += -sec_ms if sec_sign == "-" else sec_ms
    return -ms if sign == "-" else ms


@dataclass(frozen=True)
class PlannedOffset:
    group: str | None  # None: a row of a file without the group column (every group named)
    topic: str
    partition: int
    offset: int


def parse_offsets_csv(text: str, source: str) -> list[PlannedOffset]:
    """``--from-file``: ``topic,partition,offset`` a line, or ``group,topic,partition,offset``
    (what ``--export`` prints with ``--all-groups``). Blank lines are skipped."""
    rows: list[PlannedOffset] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) not in (3, 4):
            raise CliError(f"{source} line {n}: {line!r} is not topic,partition,offset "
                           "(or group,topic,partition,offset)")
        group = cells[0] if len(cells) == 4 else None
        topic, partition, offset = cells[-3:]
        if not topic or not partition.isdigit() or not offset.isdigit():
            raise CliError(f"{source} line {n}: {line!r}: a topic, a partition number and an "
                           "offset of 0 or more")
        rows.append(PlannedOffset(group, topic, int(partition), int(offset)))
    if not rows:
        raise CliError(f"{source}: no offsets in it (topic,partition,offset a line)")
    return rows


def read_offsets_csv(path: str) -> list[PlannedOffset]:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"--from-file {path}: {exc.strerror if isinstance(exc, OSError) else exc}"
                       ) from None
    return parse_offsets_csv(text, f"--from-file {path}")


def export_csv(rows: list[PlannedOffset], *, with_group: bool) -> str:
    """The plan as ``--from-file`` reads it back (the group column with ``--all-groups``)."""
    return "".join((f"{r.group}," if with_group else "")
                   + f"{r.topic},{r.partition},{r.offset}\n" for r in rows)


def clamp(offset: int, log_start_offset: int, log_end_offset: int) -> int:
    """Kafka's tool keeps ``--to-offset`` and ``--shift-by`` within [log start, log end]."""
    return min(max(offset, log_start_offset), log_end_offset)
