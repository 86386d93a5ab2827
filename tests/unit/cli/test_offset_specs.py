"""How ``group reset-offsets`` reads what a person types (cli/offset_specs.py): Kafka's tool's
formats, and one-line refusals."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from floodmark.cli.common import CliError
from floodmark.cli.offset_specs import (
    PlannedOffset,
    TopicScope,
    clamp,
    export_csv,
    parse_datetime_ms,
    parse_duration_ms,
    parse_offsets_csv,
    parse_topic_scope,
)


def test_topic_scopes() -> None:
    assert parse_topic_scope("orders") == TopicScope("orders", None)
    assert parse_topic_scope("orders:0") == TopicScope("orders", (0,))
    assert parse_topic_scope("orders:2,0,2") == TopicScope("orders", (0, 2))
    for bad in ("orders:", "orders:a", ":1", "orders:1,-2"):
        with pytest.raises(CliError):
            parse_topic_scope(bad)


def test_datetimes_in_kafkas_format() -> None:
    jan = int(datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC).timestamp() * 1000)
    assert parse_datetime_ms("2024-01-02T03:04:05.678Z") == jan
    assert parse_datetime_ms("2024-01-02T03:04:05.678+00:00") == jan
    assert parse_datetime_ms("2024-01-02T05:04:05.678+02:00") == jan
    assert parse_datetime_ms("2024-01-02T03:04:05+00:00") == jan - 678
    local = datetime(2024, 1, 2, 3, 4, 5, 678000).astimezone()  # no zone: local time, as Kafka
    assert parse_datetime_ms("2024-01-02T03:04:05.678") == int(local.timestamp() * 1000)
    for bad in ("2024-01-02", "yesterday", "2024-13-01T00:00:00", "2024-01-02T25:00:00"):
        with pytest.raises(CliError) as err:
            parse_datetime_ms(bad)
        assert "\n" not in str(err.value)


def test_durations_as_java_parses_them() -> None:
    assert parse_duration_ms("PT30M") == 30 * 60_000
    assert parse_duration_ms("P1DT2H") == 26 * 3_600_000
    assert parse_duration_ms("P2D") == 2 * 86_400_000
    assert parse_duration_ms("PT1H2M3.5S") == 3_723_500
    assert parse_duration_ms("pt10s") == 10_000
    assert parse_duration_ms("-PT1H") == -3_600_000
    assert parse_duration_ms("PT-5S") == -5_000
    assert parse_duration_ms("PT0.001S") == 1
    for bad in ("P", "PT", "P1DT", "1H", "PT1X", "P1H", "", "PT1.5M"):
        with pytest.raises(CliError):
            parse_duration_ms(bad)


def test_csv_round_trips_through_export() -> None:
    rows = parse_offsets_csv("orders,0,5\n\norders,1,7\n", "f")
    assert rows == [PlannedOffset(None, "orders", 0, 5), PlannedOffset(None, "orders", 1, 7)]
    plan = [PlannedOffset("g1", "orders", 0, 5), PlannedOffset("g2", "orders", 1, 7)]
    assert export_csv(plan, with_group=True) == "g1,orders,0,5\ng2,orders,1,7\n"
    assert parse_offsets_csv(export_csv(plan, with_group=True), "f") == plan
    assert export_csv(plan, with_group=False) == "orders,0,5\norders,1,7\n"
    for bad in ("orders,0", "orders,x,1", "orders,0,-1", "", "a,b,c,d,e"):
        with pytest.raises(CliError) as err:
            parse_offsets_csv(bad, "f")
        assert str(err.value).startswith("f")


def test_clamp_to_the_log() -> None:
    assert clamp(5, 2, 10) == 5
    assert clamp(-3, 2, 10) == 2
    assert clamp(99, 2, 10) == 10
