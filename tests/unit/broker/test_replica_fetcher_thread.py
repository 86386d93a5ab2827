"""Which fetcher follows a partition (Kafka's getFetcherId, in Java's arithmetic), and the
replica.fetch.* settings as the broker reads them."""

from __future__ import annotations

from floodmark.broker.replica_fetcher_thread import ReplicaFetchConfig, fetcher_id
from floodmark.settings import DEFAULTS, SETTINGS


def java_hash(text: str) -> int:
    """String.hashCode written out the slow way, for the test: s[0]*31^(n-1) + ... + s[n-1]."""
    units = [int.from_bytes(text.encode("utf-16-be")[i:i + 2], "big")
             for i in range(0, len(text.encode("utf-16-be")), 2)]
    total = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) % (1 << 32)
    return total - (1 << 32) if total >= 1 << 31 else total


def test_fetcher_id_is_kafkas() -> None:
    # "a".hashCode() == 97; 31 * 97 + 2 == 3009
    assert fetcher_id("a", 2, 4) == 3009 % 4
    # "hello".hashCode() == 99162322 (a value Java prints)
    assert java_hash("hello") == 99162322
    # 31 * 99162322 + 5 overflows an int to -1220935309; Utils.abs gives 1220935309
    assert 31 * 99162322 + 5 - (1 << 32) == -1220935309
    assert fetcher_id("hello", 5, 7) == 1220935309 % 7
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE, and 31 * MIN_VALUE overflows to
    # MIN_VALUE: Kafka's Utils.abs makes it 0, not a negative id.
    assert java_hash("polygenelubricants") == -(1 << 31)
    assert fetcher_id("polygenelubricants", 0, 3) == 0


def test_fetcher_ids_cover_every_fetcher_and_stay_in_range() -> None:
    for n in (1, 2, 3, 5):
        ids = {fetcher_id(f"topic-{t}", p, n) for t in range(20) for p in range(10)}
        assert ids == set(range(n))
    # a negative hash folds to a non-negative id, as Utils.abs does
    names = (chr(65 + i % 26) * (1 + i % 13) + str(i) for i in range(1000))
    name = next(n for n in names if java_hash(n) * 31 % (1 << 32) >= 1 << 31)
    assert 0 <= fetcher_id(name, 0, 3) < 3


def test_config_from_settings_is_kafkas_defaults() -> None:
    config = ReplicaFetchConfig.from_settings(DEFAULTS.get)
    assert config == ReplicaFetchConfig()
    assert (config.num_replica_fetchers, config.max_bytes, config.response_max_bytes,
            config.min_bytes, config.wait_max_ms, config.backoff_ms) == (
        1, 1_048_576, 10_485_760, 1, 500, 1000)
    for name in ("num.replica.fetchers", "replica.fetch.max.bytes",
                 "replica.fetch.response.max.bytes", "replica.fetch.min.bytes",
                 "replica.fetch.wait.max.ms", "replica.fetch.backoff.ms"):
        assert SETTINGS[name].type.name == "INT"


def test_bad_fetcher_settings_are_refused_in_one_line() -> None:
    import pytest

    from floodmark.settings import check_value

    with pytest.raises(ValueError, match=r"num\.replica\.fetchers: Value must be at least 1"):
        check_value("num.replica.fetchers", "0")
    with pytest.raises(ValueError, match=r"replica\.fetch\.backoff\.ms: Value must be at least 0"):
        check_value("replica.fetch.backoff.ms", "-1")
    assert check_value("num.replica.fetchers", "4") == 4
