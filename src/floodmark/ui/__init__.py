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
