"""The dashboard's change guard (``ui.guard``), its admin arguments (``ui.admin``) and its
per-topic rates and sizes (``ui.topic_stats``): pure functions and values, no cluster."""

from __future__ import annotations

import pytest

from floodmark.ui.admin import AdminError, _masked, _reset_args
from floodmark.ui.guard import ChangeGuard, own_hosts
from floodmark.ui.topic_stats import Sample, TopicStats, committed_of, topic_sizes

HOSTS = own_hosts("127.0.0.1", 8080)
ON = ChangeGuard(True, HOSTS)


def test_own_hosts_of_a_loopback_dashboard() -> None:
    assert {"127.0.0.1:8080", "localhost:8080", "[::1]:8080"} <= HOSTS
    assert "example.com:8080" not in HOSTS
    assert own_hosts("10.1.2.3", 81) == frozenset({"10.1.2.3:81"})


@pytest.mark.parametrize(("guard", "method", "headers", "refused"), [
    (ON, "POST", {"Host": "127.0.0.1:8080", "Origin": "http://127.0.0.1:8080"}, None),
    (ON, "POST", {"Host": "localhost:8080"}, None),  # curl: no Origin, not a browser
    (ChangeGuard(False, HOSTS), "POST", {"Host": "127.0.0.1:8080"}, "--allow-changes"),
    (ON, "GET", {"Host": "127.0.0.1:8080"}, "use POST"),
    (ON, "POST", {"Host": "evil.example:8080"}, "not this dashboard's address"),
    (ON, "POST", {"Host": "127.0.0.1:8080", "Origin": "http://evil.example"}, "cross-site"),
    (ON, "POST", {"Host": "127.0.0.1:8080", "Origin": "null"}, "cross-site"),
    (ON, "POST", {"Host": "127.0.0.1:8080", "Origin": "https://127.0.0.1:8080"}, "cross-site"),
])
def test_guard(guard: ChangeGuard, method: str, headers: dict[str, str],
               refused: str | None) -> None:
    answer = guard.refusal(method, headers)
    if refused is None:
        assert answer is None
    else:
        assert answer is not None and refused in answer and "\n" not in answer


def test_reset_arguments_are_the_cli_planners() -> None:
    args = _reset_args({"mode": "offset", "offset": 7, "topic": "orders"})
    assert (args.topic, args.all_topics, args.to_offset, args.to_earliest) == (
        ["orders"], False, 7, False)
    args = _reset_args({"mode": "datetime", "timestamp_ms": 1_700_000_000_123, "topic": None})
    assert args.all_topics and args.to_datetime == "2023-11-14T22:13:20.123+00:00"
    assert _reset_args({"mode": "earliest"}).to_earliest
    for bad in ({"mode": "shift"}, {"mode": "offset", "offset": -1},
                {"mode": "offset", "offset": "x"}, {"mode": "latest", "topic": ""}):
        with pytest.raises(AdminError):
            _reset_args(bad)


def test_sensitive_values_are_masked_whatever_the_broker_said() -> None:
    entry = {"name": "ssl.key.password", "value": "hunter2", "source": "STATIC_BROKER_CONFIG",
             "sensitive": False, "read_only": True,
             "synonyms": [{"source": "STATIC_BROKER_CONFIG", "name": "ssl.key.password",
                           "value": "hunter2"}]}
    masked = _masked(entry)
    assert masked["value"] is None and masked["sensitive"] is True
    assert masked["synonyms"][0]["value"] is None
    plain = dict(entry, name="retention.ms", value="5")
    assert _masked(plain)["value"] == "5"


def test_rates_from_two_samples_and_counter_resets() -> None:
    stats = TopicStats()
    url = "http://b1/metrics"
    first = Sample(100.0, {("a", 0): 10, ("a", 1): 0, ("b", 0): 5},
                   {("g", "a", 0): 4}, {url: {"a": {"bytesin": 1000.0, "bytesout": 0.0}}})
    assert stats.observe(first) == {}  # one sample: no rate yet
    second = Sample(102.0, {("a", 0): 20, ("a", 1): 10, ("b", 0): 5},
                    {("g", "a", 0): 10}, {url: {"a": {"bytesin": 3000.0, "bytesout": 500.0}}})
    rates = stats.observe(second)
    assert rates["a"] == {"records_in_per_s": 10.0, "records_out_per_s": 3.0,
                          "bytes_in_per_s": 1000, "bytes_out_per_s": 250}
    assert rates["b"]["records_in_per_s"] == 0.0
    # Too soon after: the same rates. A restarted broker's counter counts from zero.
    assert stats.observe(Sample(102.5, {}, {}, {})) is rates
    third = Sample(104.0, {("a", 0): 20, ("a", 1): 10, ("b", 0): 5}, {("g", "a", 0): 2},
                   {url: {"a": {"bytesin": 400.0, "bytesout": 500.0}}})
    rates = stats.observe(third)
    assert rates["a"]["bytes_in_per_s"] == 200 and rates["a"]["records_out_per_s"] == 1.0
    # A topic's series appears with its first record: counted from zero. A partition not
    # read before (its leader did not answer) is left out, not counted as a burst.
    fourth = Sample(106.0, {("a", 0): 20, ("a", 1): 10, ("b", 0): 5, ("c", 0): 50}, {},
                    {url: {"a": {"bytesin": 400.0, "bytesout": 500.0}, "c": {"bytesin": 600.0}}})
    rates = stats.observe(fourth)
    assert rates["c"]["bytes_in_per_s"] == 300 and rates["c"]["records_in_per_s"] == 0.0
    # No metrics endpoint known: bytes are None, records still counted.
    plain = TopicStats()
    plain.observe(Sample(0.0, {("a", 0): 0}, {}, {}))
    assert plain.observe(Sample(4.0, {("a", 0): 8}, {}, {}))["a"] == {
        "records_in_per_s": 2.0, "records_out_per_s": 0.0, "bytes_in_per_s": None,
        "bytes_out_per_s": None}


def test_sizes_one_copy_and_every_replica() -> None:
    sizes = {1: {("a", 0): 100, ("a", 1): 50}, 2: {("a", 0): 90, ("a", 1): 60}, 3: {}}
    leaders = {("a", 0): 1, ("a", 1): 3}  # a-1's leader did not answer: its largest copy
    assert topic_sizes(sizes, leaders) == {"a": {"size_bytes": 160,
                                                 "size_on_disk_bytes": 300}}
    groups = [{"group": "g", "offsets": [{"topic": "a", "partition": 0, "committed_offset": 3},
                                         {"topic": "a", "partition": 1,
                                          "committed_offset": -1}]}]
    assert committed_of(groups) == {("g", "a", 0): 3}


def test_a_refusal_is_400_an_unreachable_cluster_502() -> None:
    from floodmark.client.cluster import NoBrokerAvailable
    from floodmark.client.connection import RequestFailed
    from floodmark.ui.admin import _failed

    assert _failed(RequestFailed("topic x: UNKNOWN_TOPIC_OR_PARTITION (3)")).status == 400
    assert _failed(NoBrokerAvailable("no broker answered")).status == 502
    assert _failed(OSError("refused")).status == 502
    try:
        raise RequestFailed("127.0.0.1:1: reset") from OSError("reset")
    except RequestFailed as exc:
        assert _failed(exc).status == 502
