"""The deterministic simulator: a seeded world with virtual time (``world``) and a fake network
(``network``) shared by its two halves, the partition cluster (``partition/``) and the
controller quorum (``quorum/``), laid out like the model checker (``floodmark.mc``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.sim.partition.explore import ExploreOptions, explore, reproduce_command
    from floodmark.sim.partition.report import render_steps
    from floodmark.sim.partition.scenarios import SCENARIOS, run_scenario

__all__ = [
    "SCENARIOS",
    "ExploreOptions",
    "explore",
    "render_steps",
    "reproduce_command",
    "run_scenario",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
