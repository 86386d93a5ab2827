"""Invariants of the client quota rules (security/quotas.py), over random traffic (Hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.security.quotas import (
    QuotaStore,
    QuotaType,
    SampledRate,
    precedence,
    record_and_throttle,
)

windows = st.tuples(st.integers(2, 12), st.integers(10, 2000))  # (samples, window_ms)


@settings(max_examples=200, deadline=None)
@given(windows, st.lists(st.tuples(st.integers(0, 5000), st.floats(0, 1e6)), max_size=60),
       st.floats(1, 1e6))
def test_throttle_never_negative(window, traffic, bound):
    r = SampledRate(*window)
    now_ms = 0
    for gap_ms, size in traffic:
        now_ms += gap_ms
        assert record_and_throttle(r, size, bound, now_ms) >= 0
        assert r.rate(now_ms) >= 0


@settings(max_examples=200, deadline=None)
@given(windows, st.integers(1, 500), st.integers(1, 100_000), st.integers(50, 400))
def test_a_client_at_its_rate(window, gap_ms, size, count):
    """A client sending ``size`` bytes every ``gap_ms`` (rate ``c``) against a bound ``T``:
    - at ``T = c * (1 + gap / ((samples - 1) * window))`` (its rate plus one request of slack
      over the rate's minimum window) it is never throttled;
    - at ``T = c`` exactly, it waits at most one gap (the window counts the request that opened
      it and the one just sent)."""
    samples, window_ms = window
    rate = size * 1000 / gap_ms
    slack = 1 + gap_ms / ((samples - 1) * window_ms)
    within, exact = SampledRate(samples, window_ms), SampledRate(samples, window_ms)
    for i in range(count):
        now_ms = i * gap_ms
        assert record_and_throttle(within, size, rate * slack * (1 + 1e-9), now_ms) == 0
        assert record_and_throttle(exact, size, rate, now_ms) <= gap_ms + 1


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 200), st.integers(2, 10))
def test_a_client_over_its_rate_is_throttled(gap_ms, over):
    r = SampledRate(11, 1000)
    size, throttled = 1000, 0
    rate = size * 1000 / gap_ms
    for i in range(20_000 // gap_ms + 11_000 // gap_ms):
        throttled = max(throttled, record_and_throttle(r, size, rate / over, i * gap_ms))
    assert throttled > 0


ENTITY_NAMES = st.sampled_from(["u", "v"]), st.sampled_from(["c", "d"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["u", "v"]),
                          st.sampled_from(["c", "d"]), st.integers(1, 1000)), max_size=12),
       st.sampled_from(["u", "v"]), st.sampled_from(["c", "d"]))
def test_the_most_specific_quota_wins(sets, user, client_id):
    """Whatever else is set, the answer is the value of the first entity in Kafka's order that
    holds one, and an entity below it changes nothing."""
    store = QuotaStore()
    for level, u, c, value in sets:
        e, _ = precedence(u, c)[level]
        store.set(e, QuotaType.PRODUCE.value, float(value))
    found = store.resolve(QuotaType.PRODUCE, user, client_id)
    chain = precedence(user, client_id)
    held = [(e, tags) for e, tags in chain if QuotaType.PRODUCE.value in store.get(e)]
    if not held:
        assert found is None
        return
    assert found is not None and (found.entity, found.tags) == held[0]
    assert found.bound == store.get(held[0][0])[QuotaType.PRODUCE.value]
    for e, _ in chain[chain.index(held[0]) + 1:]:
        store.set(e, QuotaType.PRODUCE.value, 7.0)
    again = store.resolve(QuotaType.PRODUCE, user, client_id)
    assert again is not None and again.entity == found.entity and again.bound == found.bound
