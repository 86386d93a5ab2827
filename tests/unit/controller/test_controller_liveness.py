"""``controller/liveness.py``: which broker incarnations a newly active controller probes
(registered, unfenced, not shutting down, holding no connection to it), once, a grace after
activation."""

from __future__ import annotations

from floodmark.controller.image import BrokerRegistration
from floodmark.controller.liveness import ActivationSweep, BrokerConnections, unconnected


def _reg(broker_id: int, epoch: int, *, fenced: bool = False,
         shutting_down: bool = False) -> BrokerRegistration:
    return BrokerRegistration(broker_id, epoch, "127.0.0.1", 9000 + broker_id, f"i{broker_id}",
                              fenced=fenced, in_controlled_shutdown=shutting_down)


BROKERS = {1: _reg(1, 10), 2: _reg(2, 20), 3: _reg(3, 30, fenced=True),
           4: _reg(4, 40, shutting_down=True), 5: _reg(5, 50)}


def test_unconnected_names_only_unfenced_brokers_without_a_connection() -> None:
    conns = BrokerConnections()
    conns.spoke("c2", (2, 20))
    conns.spoke("c5-old", (5, 49))  # an earlier incarnation's connection says nothing of 50
    assert unconnected(BROKERS, conns) == [(1, 10), (5, 50)]
    conns.spoke("c1", (1, 10))
    assert unconnected(BROKERS, conns) == [(5, 50)]
    conns.closed("c1")
    assert unconnected(BROKERS, conns) == [(1, 10), (5, 50)]


def test_the_sweep_runs_once_a_grace_after_activation() -> None:
    conns = BrokerConnections()
    sweep = ActivationSweep(grace_ms=100)
    assert sweep.due(5_000, BROKERS, conns) == []  # never activated
    sweep.activated(10_000)
    assert sweep.due(10_099, BROKERS, conns) == []  # live brokers get the grace to reconnect
    conns.spoke("c2", (2, 20))
    assert sweep.due(10_100, BROKERS, conns) == [(1, 10), (5, 50)]
    assert sweep.due(10_200, BROKERS, conns) == []  # once per activation
    sweep.activated(20_000)  # active again later (after losing leadership)
    sweep.deactivated()  # ... and lost it before the grace ended: nothing to probe
    assert sweep.due(20_500, BROKERS, conns) == []
    sweep.activated(30_000)
    assert sweep.due(30_100, BROKERS, conns) == [(1, 10), (5, 50)]
