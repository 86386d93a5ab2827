"""``floodmark ui``: a live dashboard that draws each partition the way the reference documents
draw replication (offset boxes, HW and the dashed LEO box per replica, the leader's remote LEOs,
ISR, leader epoch, epoch cache, log start offset), from a running cluster.

Modules: ``source`` (reading the cluster through the project's own client and debug reads),
``groups`` (consumer groups and lag), ``topic_stats`` (size and throughput per topic),
``messages`` (the message browser), ``admin`` (configs with their sources; create and delete
topics, reset offsets, through the CLI's own code), ``guard`` (who may change the cluster:
``--allow-changes``, POST, own Host and Origin), ``server`` (aiohttp: poller, JSON API,
server-sent events), ``cli`` (the subcommand), ``static/`` (the page: HTML, vanilla JS and SVG,
no build step).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.ui.launch import start_ui, stop_ui

__all__ = [
    "start_ui",
    "stop_ui",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
