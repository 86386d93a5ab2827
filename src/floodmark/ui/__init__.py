"""``floodmark ui``: a live dashboard that draws each partition the way the reference documents
draw replication (offset boxes, HW and the dashed LEO box per replica, the leader's remote LEOs,
ISR, leader epoch, epoch cache, log start offset), from a running cluster.

Modules: ``source`` (reading the cluster through the project's own client and debug reads),
``server`` (aiohttp: poller, JSON API, server-sent events), ``cli`` (the subcommand), ``static/``
(the page: HTML, vanilla JS and SVG, no build step).
"""
